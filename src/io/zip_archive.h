// Read-only view of a zip archive in a mapped file, as PyTorch's torch.save (>= 1.6)
// writes them: entries stored uncompressed and aligned, so a tensor's bytes can be used in
// place. Our own reader rather than libzip or minizip: those hand out entries through
// read calls into buffers and do not expose where an entry's bytes sit in the file, which
// zero-copy mmap loading needs. Only the parts of the format real archives use are read:
// the end-of-central-directory record (and its zip64 form, for archives over 4 GiB), the
// central directory and the local headers. Everything is bounds-checked against the file.
// Archives re-zipped by other tools may hold deflated entries: inflated() brings those
// into memory (zlib), bounded by their declared sizes and checked against their CRC-32.
// Sizes and CRCs come from the central directory, so entries written by streaming zip
// writers (general-purpose flag bit 3: zeros in the local header, a data descriptor after
// the data) read the same.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "io/mapped_file.h"

namespace sd::io {

struct ZipEntry {
  std::string name;
  uint16_t method = 0;  // 0: stored; 8: deflate (see ZipArchive::inflated())
  uint16_t flags = 0;
  uint32_t crc32 = 0;  // of the uncompressed bytes
  uint64_t compressed_size = 0;
  uint64_t size = 0;         // uncompressed
  uint64_t header = 0;       // file offset of the local header
  uint64_t data_offset = 0;  // file offset of the entry's (compressed) bytes
};

class ZipArchive {
 public:
  // "PK\3\4" at the start: the file is a zip archive (or claims to be).
  static bool looks_like_zip(const MappedFile& file);
  // Parses the directory; throws sd::Error "<path>: <what> (<hint>)".
  static ZipArchive parse(std::shared_ptr<const MappedFile> file);

  const std::vector<ZipEntry>& entries() const { return entries_; }
  const ZipEntry* find(std::string_view name) const;
  // The bytes of an uncompressed entry in the file (entry.size of them); throws sd::Error
  // for a compressed or encrypted one.
  const uint8_t* stored_data(const ZipEntry& entry) const;
  // True when some entry is deflated, so its bytes cannot be used in place.
  bool has_deflated_entries() const;
  // This archive with every entry's bytes copied into memory (one block, entries aligned
  // to 64 bytes, named as the file for messages) and deflated entries inflated, which
  // turns them into stored ones. Throws sd::Error naming the entry for a corrupt stream:
  // more or fewer bytes than declared, a CRC-32 mismatch, a size deflate cannot reach.
  // Other methods and encrypted entries are copied as they are: stored_data() refuses them.
  ZipArchive inflated() const;
  // The same for the entries named in `keep` only, each up to its given number of bytes:
  // the rest of a deflated entry is still inflated, to check its size and CRC-32, but not
  // held, so memory is bounded by what the caller asks for, not by what entries declare.
  // Entries not named are left out.
  ZipArchive inflated(const std::unordered_map<std::string, uint64_t>& keep) const;
  const MappedFile& file() const { return *file_; }
  const std::shared_ptr<const MappedFile>& shared_file() const { return file_; }

 private:
  std::shared_ptr<const MappedFile> file_;
  std::vector<ZipEntry> entries_;
  std::unordered_map<std::string, size_t> index_;
};

}  // namespace sd::io
