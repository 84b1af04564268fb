// The pieces sd-cli's option tables are made of: an option (names, help text, what it
// does with its value), strict value parsers, and the -h layout.
#pragma once

#include <functional>
#include <string>
#include <vector>

namespace sd::cli {

// The order -h lists a section's options in, as sd.cpp does.
enum class OptionKind { String, Int, Float, Switch, Other };

struct Option {
  std::string short_name, long_name, description;
  OptionKind kind;
  bool takes_value;
  std::function<void(const std::string& value)> apply;  // throws sd::Error on a bad value
};

struct Section {
  std::string title;
  std::vector<Option> options;
};

// `joiner` != 0: a repeated flag appends ("a" then "b" gives "a,b"), as sd.cpp's list flags.
Option text_option(std::string short_name, std::string long_name, std::string description,
                   std::string* target, char joiner = 0);
Option int_option(std::string short_name, std::string long_name, std::string description,
                  int* target);
Option float_option(std::string short_name, std::string long_name, std::string description,
                    float* target);
Option switch_option(std::string short_name, std::string long_name, std::string description,
                     bool* target, bool value = true);
Option other_option(std::string short_name, std::string long_name, std::string description,
                    std::function<void(const std::string&)> apply, bool takes_value = true);

// Whole-string parses; anything else throws sd::Error "<flag> takes ..., got '<text>'".
int parse_int(const std::string& flag, const std::string& text);
int64_t parse_int64(const std::string& flag, const std::string& text);
float parse_float(const std::string& flag, const std::string& text);

// "name, name, ..." of an enum's names 0..count-1.
std::string join_names(int count, const std::function<const char*(int)>& name_of);

// "  -m, --model <string>    description", wrapped at 120 columns like sd.cpp's -h.
std::string format_section(const Section& section);

}  // namespace sd::cli
