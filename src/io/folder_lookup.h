// Finding a model file by name in a folder, as prompt tags (<lora:name:1>) and embedding
// folders name them. Names can come from other people (a server's clients, shared
// prompts), so a lookup can be confined: the file must lie inside the folder once every
// symlink is resolved, and absolute names or ".." that climb out are refused.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace sd::io {

struct FolderMatch {
  std::string path;     // the file found; empty when none
  std::string refused;  // why a confined lookup refused the name; empty otherwise
};

// `name` as given, or with one of `extensions` appended, inside `folder` (an absolute
// `name` is taken as it is unless `confined`).
FolderMatch find_in_folder(const std::string& name, const std::string& folder,
                           const std::vector<std::string>& extensions, bool confined);

// Whether `file`, with symlinks resolved, lies inside `folder` (also resolved).
bool lies_inside(const std::filesystem::path& file, const std::filesystem::path& folder);

}  // namespace sd::io
