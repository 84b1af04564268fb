// Errors that reach a user: bad shapes from model code, unsupported op/dtype pairs,
// failed allocations. Thrown inside the engine and caught at the API boundary, where
// they become a message and a non-zero status.
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>

namespace sd {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

// Formats like printf; used to build error messages that name the thing and the fix.
std::string format(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

[[noreturn]] void fail(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

// Text from files and clients (tensor names, metadata, prompts) made safe for a terminal:
// control characters (C0, DEL and UTF-8 encoded C1, which carry escape sequences) become
// \n, \t, \r, \e or \xHH; everything else is kept. `keep_newlines` keeps '\n' as it is,
// for text printed as several lines on purpose.
std::string escape_control_chars(std::string_view text, bool keep_newlines = false);

}  // namespace sd

// Checks an argument a caller supplied; the message names the operation, e.g. "[add] ...".
#define SD_CHECK(cond, ...)    \
  do {                         \
    if (!(cond)) {             \
      ::sd::fail(__VA_ARGS__); \
    }                          \
  } while (0)
