// Errors about a file a user supplied. Every message starts with the file's path, so a
// user with several model files knows which one is bad: "<path>: <what> (<hint>)".
#pragma once

#include <string>
#include <string_view>

#include "tensor/error.h"

namespace sd::io {

[[noreturn]] inline void fail_file(std::string_view path, const std::string& what) {
  std::string msg;
  msg.reserve(path.size() + 2 + what.size());
  msg.append(path).append(": ").append(what);
  throw Error(msg);
}

}  // namespace sd::io
