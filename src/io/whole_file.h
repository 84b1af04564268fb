// Files written whole or not at all: the bytes go to a new temporary file beside the
// target, which is renamed over it only when everything was written. On any error the
// temporary file is removed and the target is left as it was (a crash leaves at most a
// hidden ".NAME.PID.N.RANDOM.tmp" beside it, never a half-written NAME).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace sd::io {

class TempFileBeside {
 public:
  // Creates the temporary file (a fresh name, O_EXCL). Throws sd::Error "<target>: cannot
  // create the <what> file: <reason>".
  TempFileBeside(std::string target, std::string what);
  ~TempFileBeside();  // removes the temporary file unless committed
  TempFileBeside(const TempFileBeside&) = delete;
  TempFileBeside& operator=(const TempFileBeside&) = delete;

  const std::string& path() const { return temp_; }
  // Writes all of `data` at the file's current end; throws naming the target.
  void write(const uint8_t* data, size_t size);
  // Closes the file and renames it over the target; throws naming the target.
  void commit();

 private:
  [[noreturn]] void fail_with(int error);

  std::string target_, what_, temp_;
  int fd_ = -1;
  bool committed_ = false;
};

// `data` as the whole content of `path`. Throws sd::Error naming `path` and `what` ("image").
void write_file_whole(const std::string& path, const uint8_t* data, size_t size,
                      const std::string& what);

// Fails, naming `path`, unless a `what` file could be written there now: `path` is not a
// folder and a file can be created beside it (tried, then removed). For checks before
// long work; the messages point at -o.
void check_file_writable(const std::string& path, const std::string& what);

}  // namespace sd::io
