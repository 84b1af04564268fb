#include "cli/output_paths.h"
#include "tensor/text.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <regex>

namespace sd::cli {

namespace {

// A '%' run of even length escapes itself; the specifier is the '%' after it.
const std::regex& specifier_regex() {
  static const std::regex re("(?:[^%]|^)(?:%%)*(%\\d{0,3}d)");
  return re;
}

bool is_image_extension(const std::string& extension) {
  const std::string ext = ascii_lower(extension);
  return ext == ".png" || ext == ".jpg" || ext == ".jpeg" || ext == ".jpe" || ext == ".webp";
}

}  // namespace

bool has_index_specifier(const std::string& path) {
  return std::regex_search(path, specifier_regex());
}

std::string format_index(const std::string& pattern, int index) {
  std::string result = pattern;
  std::smatch match;
  while (std::regex_search(result, match, specifier_regex())) {
    char formatted[32];
    std::snprintf(formatted, sizeof formatted, match.str(1).c_str(), index);
    result.replace(static_cast<size_t>(match.position(1)), static_cast<size_t>(match.length(1)),
                   formatted);
  }
  std::string unescaped;
  for (size_t i = 0; i < result.size(); ++i) {
    unescaped += result[i];
    if (result[i] == '%' && i + 1 < result.size() && result[i + 1] == '%') ++i;
  }
  return unescaped;
}

std::vector<std::string> output_paths(const std::string& output, int count, int begin_index) {
  namespace fs = std::filesystem;
  const fs::path path = output;
  const std::string ext = path.has_extension() ? path.extension().string() : "";
  const bool image_ext = is_image_extension(ext);
  fs::path base = path;
  if (image_ext) base.replace_extension();
  const std::string out_ext = image_ext ? ext : ".png";

  std::vector<std::string> paths;
  if (has_index_specifier(output)) {
    const std::string pattern = base.string() + out_ext;
    for (int i = 0; i < count; ++i) paths.push_back(format_index(pattern, begin_index + i));
    return paths;
  }
  for (int i = 0; i < count; ++i) {
    std::string p = base.string();
    if (count > 1) {
      p += '_';
      p += std::to_string(begin_index + i);
    }
    paths.push_back(p + out_ext);
  }
  return paths;
}

}  // namespace sd::cli
