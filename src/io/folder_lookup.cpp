#include "io/folder_lookup.h"

#include <algorithm>
#include <system_error>

namespace sd::io {

namespace fs = std::filesystem;

bool lies_inside(const fs::path& file, const fs::path& folder) {
  std::error_code ec;
  const fs::path real_file = fs::canonical(file, ec);
  if (ec) return false;
  const fs::path real_folder = fs::canonical(folder, ec);
  if (ec) return false;
  // Component by component, so that "/models/lora-evil" is not inside "/models/lora".
  auto f = real_file.begin();
  for (auto d = real_folder.begin(); d != real_folder.end(); ++d, ++f) {
    if (f == real_file.end() || *f != *d) return false;
  }
  return f != real_file.end();
}

FolderMatch find_in_folder(const std::string& name, const std::string& folder,
                           const std::vector<std::string>& extensions, bool confined) {
  FolderMatch match;
  const fs::path given(name);
  if (confined && given.is_absolute()) {
    match.refused = "it is an absolute path";
    return match;
  }
  const fs::path base = given.is_absolute() ? given : fs::path(folder) / given;
  std::vector<fs::path> candidates = {base};
  for (const auto& ext : extensions) candidates.push_back(fs::path(base) += ext);
  std::error_code ec;
  for (const fs::path& candidate : candidates) {
    if (!fs::is_regular_file(candidate, ec)) continue;
    if (confined && !lies_inside(candidate, folder)) {
      match.refused = "it leads outside the folder once symlinks and '..' are resolved";
      return match;
    }
    match.path = candidate.lexically_normal().string();
    return match;
  }
  return match;
}

}  // namespace sd::io
