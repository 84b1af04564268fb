// Shared by the tokenizers' searches for their files (the path given, an environment
// variable, the model's folder, the user cache).
#pragma once

#include <filesystem>
#include <string>
#include <system_error>

namespace sd::models {

// Whether `path` names a regular file; an unreadable path reads as no.
inline bool file_exists(const std::string& path) {
  std::error_code ec;
  return std::filesystem::is_regular_file(path, ec);
}

}  // namespace sd::models
