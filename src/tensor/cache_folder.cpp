#include "tensor/cache_folder.h"

#include <cstdlib>
#include <filesystem>

namespace sd {

std::string cache_folder_path(const std::string& relative) {
  std::filesystem::path cache;
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg) {
    cache = xdg;
  } else if (const char* home = std::getenv("HOME"); home && *home) {
    cache = std::filesystem::path(home) / ".cache";
  } else {
    return "";
  }
  return (cache / "sd-engine" / relative).string();
}

}  // namespace sd
