// Errors that reach a user: bad shapes from model code, unsupported op/dtype pairs,
// failed allocations. Thrown inside the engine and caught at the API boundary, where
// they become a message and a non-zero status.
#pragma once

#include <stdexcept>
#include <string>

namespace sd {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

// Formats like printf; used to build error messages that name the thing and the fix.
std::string format(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

[[noreturn]] void fail(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

}  // namespace sd

// Checks an argument a caller supplied; the message names the operation, e.g. "[add] ...".
#define SD_CHECK(cond, ...)    \
  do {                         \
    if (!(cond)) {             \
      ::sd::fail(__VA_ARGS__); \
    }                          \
  } while (0)
