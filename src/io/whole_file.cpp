#include "io/whole_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <random>

#include "io/file_error.h"
#include "tensor/error.h"

namespace sd::io {

namespace {

// Opens a new file beside `path` that no other writer uses: O_EXCL on a random name.
int create_temp_beside(const std::string& path, std::string& temp_path) {
  static std::atomic<uint64_t> counter{0};
  std::random_device entropy;
  const std::filesystem::path target(path);
  const std::string stem = target.filename().string();
  for (int attempt = 0; attempt < 16; ++attempt) {
    char suffix[64];
    std::snprintf(suffix, sizeof suffix, ".%d.%llu.%08x.tmp", static_cast<int>(::getpid()),
                  static_cast<unsigned long long>(counter++), entropy());
    temp_path = (target.parent_path() / ("." + stem + suffix)).string();
    const int fd = ::open(temp_path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd >= 0 || errno != EEXIST) return fd;
  }
  return -1;
}

}  // namespace

TempFileBeside::TempFileBeside(std::string target, std::string what)
    : target_(std::move(target)), what_(std::move(what)) {
  fd_ = create_temp_beside(target_, temp_);
  if (fd_ < 0)
    fail_file(target_,
              format("cannot create the %s file: %s", what_.c_str(), std::strerror(errno)));
}

TempFileBeside::~TempFileBeside() {
  if (fd_ >= 0) ::close(fd_);
  if (!committed_) std::remove(temp_.c_str());
}

void TempFileBeside::fail_with(int error) {
  fail_file(target_, format("cannot write the %s file: %s", what_.c_str(), std::strerror(error)));
}

void TempFileBeside::write(const uint8_t* data, size_t size) {
  size_t written = 0;
  while (written < size) {
    const ssize_t n = ::write(fd_, data + written, size - written);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) fail_with(n < 0 ? errno : EIO);
    written += static_cast<size_t>(n);
  }
}

void TempFileBeside::commit() {
  const int fd = fd_;
  fd_ = -1;
  if (fd >= 0 && ::close(fd) != 0) fail_with(errno);
  if (std::rename(temp_.c_str(), target_.c_str()) != 0) fail_with(errno);
  committed_ = true;
}

void write_file_whole(const std::string& path, const uint8_t* data, size_t size,
                      const std::string& what) {
  TempFileBeside file(path, what);
  file.write(data, size);
  file.commit();
}

void check_file_writable(const std::string& path, const std::string& what) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    fail_file(path, format("is a folder; give -o a file name for the %s", what.c_str()));
  try {
    TempFileBeside probe(path, what);  // removed again at once
  } catch (const Error& e) {
    fail("%s; choose another -o", e.what());
  }
}

}  // namespace sd::io
