// Small text helpers shared by the parsers of flags and key=value lists.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace sd {

// `s` without leading and trailing white space.
std::string trim(std::string_view s);

// `s` with A-Z as a-z (names, hosts, formats; no locale).
std::string ascii_lower(std::string_view s);

// The whole of `s` as a finite float / a whole number; nothing when it is empty, has
// anything else in it, or is out of range.
std::optional<float> parse_finite_float(const std::string& s);
std::optional<long> parse_whole_number(const std::string& s);

}  // namespace sd
