// Small text helpers shared by the parsers of flags and key=value lists.
#pragma once

#include <string>
#include <string_view>

namespace sd {

// `s` without leading and trailing white space.
std::string trim(std::string_view s);

}  // namespace sd
