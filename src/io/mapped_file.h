// Read-only view of a whole file: memory-mapped by default, so opening a multi-GB model
// costs nothing until tensor bytes are touched, or read into memory where mmap is not
// wanted or not possible (some network and FUSE filesystems).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace sd::io {

enum class MapMode {
  Auto,  // mmap, and read into memory if the filesystem refuses mmap
  Mmap,  // mmap or fail
  Read,  // read the whole file into memory
};

class MappedFile {
 public:
  // Throws sd::Error naming the path and the system's reason (errno text).
  static std::shared_ptr<const MappedFile> open(const std::string& path,
                                                MapMode mode = MapMode::Auto);
  // Wraps bytes already in memory; `name` stands in for the path in error messages.
  static std::shared_ptr<const MappedFile> from_memory(std::string name,
                                                       std::vector<uint8_t> bytes);

  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile();

  const std::string& path() const { return path_; }
  const uint8_t* data() const { return data_; }
  uint64_t size() const { return size_; }
  bool is_mapped() const { return mapped_; }
  // Lets this process drop the whole pages inside [p, p + n) of a file mapping: resident
  // memory falls, the kernel's page cache keeps the bytes, and a later read maps them again.
  // Does nothing for a file read into memory (there the bytes exist only once).
  void evict(const uint8_t* p, size_t n) const;

 private:
  MappedFile() = default;

  std::string path_;
  const uint8_t* data_ = nullptr;
  uint64_t size_ = 0;
  bool mapped_ = false;         // data_ maps the file
  void* anon_ = nullptr;        // data_ is this anonymous mapping, read into
  std::vector<uint8_t> bytes_;  // data_ is this (from_memory)
};

}  // namespace sd::io
