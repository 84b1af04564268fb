#include "cli/option_table.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <sstream>

#include "tensor/error.h"

namespace sd::cli {

Option text_option(std::string short_name, std::string long_name, std::string description,
                   std::string* target, char joiner) {
  return {std::move(short_name),
          std::move(long_name),
          std::move(description),
          OptionKind::String,
          true,
          [target, joiner](const std::string& v) {
            if (joiner && !target->empty()) {
              *target += joiner;
              *target += v;
            } else {
              *target = v;
            }
          }};
}

Option int_option(std::string short_name, std::string long_name, std::string description,
                  int* target) {
  const std::string flag = long_name;
  return {std::move(short_name),
          std::move(long_name),
          std::move(description),
          OptionKind::Int,
          true,
          [target, flag](const std::string& v) { *target = parse_int(flag, v); }};
}

Option float_option(std::string short_name, std::string long_name, std::string description,
                    float* target) {
  const std::string flag = long_name;
  return {std::move(short_name),
          std::move(long_name),
          std::move(description),
          OptionKind::Float,
          true,
          [target, flag](const std::string& v) { *target = parse_float(flag, v); }};
}

Option switch_option(std::string short_name, std::string long_name, std::string description,
                     bool* target, bool value) {
  return {std::move(short_name),
          std::move(long_name),
          std::move(description),
          OptionKind::Switch,
          false,
          [target, value](const std::string&) { *target = value; }};
}

Option other_option(std::string short_name, std::string long_name, std::string description,
                    std::function<void(const std::string&)> apply, bool takes_value) {
  return {std::move(short_name), std::move(long_name), std::move(description),
          OptionKind::Other,     takes_value,          std::move(apply)};
}

int parse_int(const std::string& flag, const std::string& text) {
  errno = 0;
  char* end = nullptr;
  const long long v = std::strtoll(text.c_str(), &end, 10);
  SD_CHECK(!text.empty() && *end == '\0' && errno == 0 && v >= INT32_MIN && v <= INT32_MAX,
           "%s takes a whole number, got '%s'", flag.c_str(), text.c_str());
  return static_cast<int>(v);
}

int64_t parse_int64(const std::string& flag, const std::string& text) {
  errno = 0;
  char* end = nullptr;
  const long long v = std::strtoll(text.c_str(), &end, 10);
  SD_CHECK(!text.empty() && *end == '\0' && errno == 0, "%s takes a whole number, got '%s'",
           flag.c_str(), text.c_str());
  return v;
}

float parse_float(const std::string& flag, const std::string& text) {
  errno = 0;
  char* end = nullptr;
  const float v = std::strtof(text.c_str(), &end);
  SD_CHECK(!text.empty() && *end == '\0' && !std::isnan(v), "%s takes a number, got '%s'",
           flag.c_str(), text.c_str());
  SD_CHECK(errno != ERANGE || v == 0.0f,
           "%s %s is out of range: this flag takes numbers up to about 3.4e38 in size",
           flag.c_str(), text.c_str());
  return v;
}

std::string join_names(int count, const std::function<const char*(int)>& name_of) {
  std::string out;
  for (int i = 0; i < count; ++i) {
    if (i) out += ", ";
    out += name_of(i);
  }
  return out;
}

std::string format_section(const Section& section) {
  std::vector<const Option*> ordered;
  for (const auto& o : section.options) ordered.push_back(&o);
  std::stable_sort(ordered.begin(), ordered.end(),
                   [](const Option* a, const Option* b) { return a->kind < b->kind; });

  std::vector<std::pair<std::string, std::string>> rows;
  size_t name_width = 0;
  for (const Option* o : ordered) {
    std::string names = o->short_name;
    if (!names.empty() && !o->long_name.empty()) names += ", ";
    names += o->long_name;
    if (o->kind == OptionKind::String) names += " <string>";
    if (o->kind == OptionKind::Int) names += " <int>";
    if (o->kind == OptionKind::Float) names += " <float>";
    name_width = std::max(name_width, names.size());
    rows.emplace_back(std::move(names), o->description);
  }

  const size_t indent = 2 + name_width + 4;
  const size_t width = 120 > indent + 40 ? 120 - indent : 40;
  std::string out;
  for (const auto& [names, description] : rows) {
    out += "  ";
    out += names;
    out.append(indent - 2 - names.size(), ' ');
    size_t used = 0;
    std::istringstream words(description);
    std::string word;
    while (words >> word) {
      if (used > 0 && used + 1 + word.size() > width) {
        out += '\n';
        out.append(indent, ' ');
        used = 0;
      } else if (used > 0) {
        out += ' ';
        ++used;
      }
      out += word;
      used += word.size();
    }
    out += "\n";
  }
  return out;
}

}  // namespace sd::cli
