#include "io/zip_archive.h"

#include <zlib.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <new>

#include "io/file_error.h"

namespace sd::io {

namespace {

// Record signatures and fixed sizes, from PKWARE's APPNOTE.TXT.
constexpr uint32_t kLocalSig = 0x04034b50;
constexpr uint32_t kCentralSig = 0x02014b50;
constexpr uint32_t kEocdSig = 0x06054b50;
constexpr uint32_t kZip64LocatorSig = 0x07064b50;
constexpr uint32_t kZip64EocdSig = 0x06064b50;
constexpr uint64_t kLocalSize = 30, kCentralSize = 46, kEocdSize = 22;
constexpr uint64_t kZip64LocatorSize = 20, kZip64EocdSize = 56;
constexpr uint64_t kMaxComment = 0xffff;
constexpr uint16_t kZip64ExtraId = 0x0001;
constexpr uint16_t kStored = 0, kDeflate = 8;
constexpr uint16_t kEncryptedFlag = 1;
// Deflate cannot expand past about 1032:1 (a 258-byte match per 2 bits at best); a
// declared size beyond that is a lie, refused before anything is allocated for it.
constexpr uint64_t kMaxDeflateRatio = 1032;
constexpr uint64_t kInflatedAlign = 64;  // as torch.save aligns stored entries
// zlib counts bytes in 32-bit uInt: larger entries are fed and drained in slices.
constexpr uint64_t kZlibSlice = uint64_t{1} << 30;

// Little-endian reads at offsets the caller has bounds-checked.
uint16_t u16(const uint8_t* p) {
  return static_cast<uint16_t>(p[0] | (p[1] << 8));
}
uint32_t u32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
uint64_t u64(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}

std::string hex(uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%08x", v);
  return buf;
}

class Parser {
 public:
  explicit Parser(const MappedFile& f) : f_(f), path_(f.path()), size_(f.size()) {}

  // True when [pos, pos + n) lies inside the file.
  bool fits(uint64_t pos, uint64_t n) const { return pos <= size_ && n <= size_ - pos; }
  const uint8_t* at(uint64_t pos) const { return f_.data() + pos; }

  [[noreturn]] void fail(const std::string& what) const { fail_file(path_, what); }

  struct Directory {
    uint64_t count = 0, offset = 0, size = 0;
  };

  Directory find_directory() const {
    if (size_ < kEocdSize) {
      fail("file is " + std::to_string(size_) +
           " bytes, too short for a zip archive (empty or truncated download?)");
    }
    // The EOCD record sits at the end, followed only by a comment of at most 64 KiB.
    uint64_t lowest = size_ - kEocdSize > kMaxComment ? size_ - kEocdSize - kMaxComment : 0;
    uint64_t eocd = UINT64_MAX;
    for (uint64_t pos = size_ - kEocdSize + 1; pos-- > lowest;) {
      if (u32(at(pos)) == kEocdSig && pos + kEocdSize + u16(at(pos + 20)) <= size_) {
        eocd = pos;
        break;
      }
    }
    if (eocd == UINT64_MAX) {
      fail(
          "no zip end-of-central-directory record in the last 64 KiB (truncated download, or "
          "not a zip archive?)");
    }
    const uint8_t* e = at(eocd);
    if (u16(e + 4) != 0 || u16(e + 6) != 0) {
      fail("zip archive spans several disks, which PyTorch never writes (corrupt file?)");
    }
    Directory d{u16(e + 10), u32(e + 16), u32(e + 12)};
    bool saturated = d.count == 0xffff || d.offset == 0xffffffff || d.size == 0xffffffff;
    if (eocd >= kZip64LocatorSize && u32(at(eocd - kZip64LocatorSize)) == kZip64LocatorSig) {
      d = read_zip64(eocd - kZip64LocatorSize);
    } else if (saturated) {
      fail(
          "zip end-of-central-directory record defers to a zip64 record that is missing "
          "(truncated or corrupt file?)");
    }
    if (!fits(d.offset, d.size)) {
      fail("zip central directory at byte " + std::to_string(d.offset) + " (" +
           std::to_string(d.size) + " bytes) runs past the end of the file (" +
           std::to_string(size_) + " bytes; truncated download?)");
    }
    if (d.count > d.size / kCentralSize) {
      fail("zip directory claims " + std::to_string(d.count) + " entries but holds only " +
           std::to_string(d.size) + " bytes (corrupt file?)");
    }
    return d;
  }

  Directory read_zip64(uint64_t locator) const {
    const uint8_t* l = at(locator);
    uint64_t pos = u64(l + 8);
    if (u32(l + 4) != 0 || u32(l + 16) > 1) {
      fail("zip64 archive spans several disks, which PyTorch never writes (corrupt file?)");
    }
    if (!fits(pos, kZip64EocdSize) || pos > locator - kZip64EocdSize) {
      fail("zip64 end-of-central-directory record at byte " + std::to_string(pos) +
           " lies outside the file (corrupt or truncated file?)");
    }
    const uint8_t* e = at(pos);
    if (u32(e) != kZip64EocdSig) {
      fail("no zip64 end-of-central-directory record at byte " + std::to_string(pos) +
           " (corrupt file?)");
    }
    if (u32(e + 16) != 0 || u32(e + 20) != 0) {
      fail("zip64 archive spans several disks, which PyTorch never writes (corrupt file?)");
    }
    return {u64(e + 32), u64(e + 48), u64(e + 40)};
  }

  // One central-directory entry at `pos`; returns the offset of the next one.
  uint64_t read_entry(uint64_t pos, uint64_t end, size_t i, ZipEntry& z) const {
    auto where = "zip directory entry " + std::to_string(i);
    if (pos > end || end - pos < kCentralSize || u32(at(pos)) != kCentralSig) {
      fail(where + " at byte " + std::to_string(pos) + " is missing or damaged (corrupt file?)");
    }
    const uint8_t* c = at(pos);
    z.flags = u16(c + 8);
    z.method = u16(c + 10);
    z.crc32 = u32(c + 16);
    z.compressed_size = u32(c + 20);
    z.size = u32(c + 24);
    uint64_t name_len = u16(c + 28), extra_len = u16(c + 30), comment_len = u16(c + 32);
    z.header = u32(c + 42);
    uint64_t var = name_len + extra_len + comment_len;
    if (end - pos - kCentralSize < var) {
      fail(where + " runs past the end of the directory (corrupt file?)");
    }
    z.name.assign(reinterpret_cast<const char*>(c + kCentralSize), name_len);
    read_zip64_extra(c + kCentralSize + name_len, extra_len, where, z);
    return pos + kCentralSize + var;
  }

  // Values saturated at 0xffff'ffff in the fixed fields are given here, in this order.
  void read_zip64_extra(const uint8_t* p, uint64_t len, const std::string& where,
                        ZipEntry& z) const {
    bool need_size = z.size == 0xffffffff, need_csize = z.compressed_size == 0xffffffff;
    bool need_header = z.header == 0xffffffff;
    while (len >= 4) {
      uint16_t id = u16(p), n = u16(p + 2);
      if (n > len - 4) fail(where + " has an extra field past its end (corrupt file?)");
      if (id == kZip64ExtraId) {
        const uint8_t* q = p + 4;
        uint64_t left = n;
        auto take = [&](bool need, uint64_t& v) {
          if (!need) return;
          if (left < 8) fail(where + " has a short zip64 extra field (corrupt file?)");
          v = u64(q);
          q += 8;
          left -= 8;
        };
        take(need_size, z.size);
        take(need_csize, z.compressed_size);
        take(need_header, z.header);
        return;
      }
      p += 4 + n;
      len -= 4 + n;
    }
    if (need_size || need_csize || need_header) {
      fail(where + " ('" + z.name + "') lacks the zip64 field its sizes refer to (corrupt file?)");
    }
  }

  void locate_data(ZipEntry& z) const {
    auto where = "zip entry '" + z.name + "'";
    if (!fits(z.header, kLocalSize) || u32(at(z.header)) != kLocalSig) {
      fail(where + " has no local header at byte " + std::to_string(z.header) +
           " (corrupt or truncated file?)");
    }
    const uint8_t* h = at(z.header);
    uint64_t name_len = u16(h + 26), extra_len = u16(h + 28);
    if (name_len != z.name.size() || (fits(z.header + kLocalSize, name_len) &&
                                      std::memcmp(h + kLocalSize, z.name.data(), name_len) != 0)) {
      fail(where + "'s local header names another entry (corrupt file?)");
    }
    z.data_offset = z.header + kLocalSize + name_len + extra_len;
    if (!fits(z.data_offset, z.compressed_size)) {
      fail(where + " (" + std::to_string(z.compressed_size) + " bytes at byte " +
           std::to_string(z.data_offset) + ") runs past the end of the file (" +
           std::to_string(size_) + " bytes; truncated download?)");
    }
  }

 private:
  const MappedFile& f_;
  const std::string& path_;
  uint64_t size_;
};

}  // namespace

bool ZipArchive::looks_like_zip(const MappedFile& file) {
  return file.size() >= 4 && u32(file.data()) == kLocalSig;
}

ZipArchive ZipArchive::parse(std::shared_ptr<const MappedFile> file) {
  Parser p(*file);
  Parser::Directory d = p.find_directory();
  ZipArchive z;
  // Entries are appended as they are read, so a lying count cannot make us allocate.
  z.entries_.reserve(static_cast<size_t>(std::min<uint64_t>(d.count, 4096)));
  uint64_t pos = d.offset, end = d.offset + d.size;
  for (size_t i = 0; i < d.count; ++i) {
    pos = p.read_entry(pos, end, i, z.entries_.emplace_back());
    if (!z.index_.emplace(z.entries_[i].name, i).second) {
      p.fail("zip entry '" + z.entries_[i].name + "' appears twice (corrupt file?)");
    }
  }
  for (ZipEntry& e : z.entries_) p.locate_data(e);
  z.file_ = std::move(file);
  return z;
}

const ZipEntry* ZipArchive::find(std::string_view name) const {
  auto it = index_.find(std::string(name));
  return it == index_.end() ? nullptr : &entries_[it->second];
}

const uint8_t* ZipArchive::stored_data(const ZipEntry& e) const {
  if (e.flags & kEncryptedFlag) {
    fail_file(file_->path(),
              "zip entry '" + e.name + "' is encrypted (PyTorch never encrypts; re-save the file)");
  }
  if (e.method != kStored) {
    fail_file(file_->path(),
              "zip entry '" + e.name + "' is compressed (method " + std::to_string(e.method) +
                  "); only stored entries, as torch.save writes them, and deflated ones can be "
                  "read (re-zip with no compression, e.g. `zip -0`, or convert the checkpoint "
                  "to safetensors)");
  }
  if (e.compressed_size != e.size) {
    fail_file(file_->path(), "zip entry '" + e.name + "' is stored with " +
                                 std::to_string(e.compressed_size) + " bytes but claims " +
                                 std::to_string(e.size) + " (corrupt file?)");
  }
  return file_->data() + e.data_offset;
}

// Deflated entries.

namespace {

bool is_inflatable(const ZipEntry& e) {
  return e.method == kDeflate && !(e.flags & kEncryptedFlag);
}

// Inflates the raw deflate stream `in` (e.compressed_size bytes) and checks what comes out
// against the directory: exactly e.size bytes, and their CRC-32. The first `keep` of them
// go to `out`; the rest pass through a small buffer, counted and checked, never held.
void inflate_entry(const std::string& path, const ZipEntry& e, const uint8_t* in, uint8_t* out,
                   uint64_t keep) {
  auto fail = [&](const std::string& what) {
    fail_file(path, "zip entry '" + e.name + "' " + what);
  };
  z_stream zs{};
  if (inflateInit2(&zs, -MAX_WBITS) != Z_OK) fail("could not start zlib (out of memory?)");
  struct End {
    z_stream* zs;
    ~End() { inflateEnd(zs); }
  } end{&zs};

  std::vector<uint8_t> scratch(static_cast<size_t>(std::min<uint64_t>(e.size - keep, 1 << 16)));
  uint64_t in_left = e.compressed_size, out_done = 0;
  uint32_t crc = 0;
  uint8_t spare;  // one byte past the declared size, to catch a stream that runs longer
  for (;;) {
    if (zs.avail_in == 0 && in_left > 0) {
      const uint64_t n = std::min(in_left, kZlibSlice);
      zs.next_in = const_cast<Bytef*>(in);  // zlib's API is not const-correct
      zs.avail_in = static_cast<uInt>(n);
      in += n;
      in_left -= n;
    }
    const bool probing = out_done == e.size;
    uint8_t* dest = probing ? &spare : out_done < keep ? out + out_done : scratch.data();
    const uint64_t room = probing           ? 1
                          : out_done < keep ? std::min(keep - out_done, kZlibSlice)
                                            : std::min<uint64_t>(e.size - out_done, scratch.size());
    zs.next_out = dest;
    zs.avail_out = static_cast<uInt>(room);
    const int r = inflate(&zs, Z_NO_FLUSH);
    const uInt produced = static_cast<uInt>(room) - zs.avail_out;
    if (probing && produced > 0) {
      fail("inflates to more than the " + std::to_string(e.size) +
           " bytes its directory entry declares " + "(corrupt file?)");
    }
    crc = static_cast<uint32_t>(crc32_z(crc, dest, produced));
    out_done += produced;
    if (r == Z_STREAM_END) break;
    if (r == Z_DATA_ERROR || r == Z_NEED_DICT) {
      fail("holds a corrupt deflate stream (" + std::string(zs.msg ? zs.msg : "bad data") +
           " after " + std::to_string(out_done) + " bytes; corrupt file?)");
    }
    if (r == Z_MEM_ERROR) fail("could not be inflated: zlib ran out of memory");
    if (r == Z_BUF_ERROR && zs.avail_in == 0 && in_left == 0) {
      fail("has a deflate stream that ends early, after " + std::to_string(out_done) + " of " +
           std::to_string(e.size) + " bytes (truncated or corrupt file?)");
    }
  }
  const uint64_t unused = zs.avail_in + in_left;
  if (out_done != e.size || unused != 0) {
    fail("inflates to " + std::to_string(out_done) + " bytes from " +
         std::to_string(e.compressed_size - unused) +
         " compressed, but its directory entry declares " + std::to_string(e.size) + " from " +
         std::to_string(e.compressed_size) + " (corrupt file?)");
  }
  if (crc != e.crc32) {
    fail("fails its CRC-32 check (" + hex(crc) + ", directory says " + hex(e.crc32) +
         "; corrupt file?)");
  }
}

}  // namespace

bool ZipArchive::has_deflated_entries() const {
  return std::any_of(entries_.begin(), entries_.end(), is_inflatable);
}

ZipArchive ZipArchive::inflated() const {
  std::unordered_map<std::string, uint64_t> keep;
  for (const ZipEntry& e : entries_) keep[e.name] = e.size;
  return inflated(keep);
}

ZipArchive ZipArchive::inflated(const std::unordered_map<std::string, uint64_t>& keep) const {
  const std::string& path = file_->path();
  // Lay out the kept entries first, so that one allocation of a known size holds them all.
  std::vector<ZipEntry> out;
  std::vector<const ZipEntry*> from;
  uint64_t total = 0;
  for (const ZipEntry& e : entries_) {
    auto it = keep.find(e.name);
    if (it == keep.end()) continue;
    if (is_inflatable(e) && e.size / kMaxDeflateRatio > e.compressed_size) {
      fail_file(path, "zip entry '" + e.name + "' declares " + std::to_string(e.size) +
                          " bytes from " + std::to_string(e.compressed_size) +
                          " compressed, more than deflate can produce (corrupt file?)");
    }
    ZipEntry& to = out.emplace_back(e);
    from.push_back(&e);
    // A stored entry is copied as it is (stored_data() checks its sizes later).
    const uint64_t bytes = is_inflatable(e) ? std::min(e.size, it->second) : e.compressed_size;
    if (is_inflatable(e)) to.size = to.compressed_size = bytes;
    total = (total + kInflatedAlign - 1) / kInflatedAlign * kInflatedAlign;
    to.data_offset = total;
    if (__builtin_add_overflow(total, bytes, &total)) {
      fail_file(path, "zip entries declare more bytes than memory can hold (corrupt file?)");
    }
  }
  std::vector<uint8_t> block;
  try {
    block.resize(static_cast<size_t>(total));
  } catch (const std::bad_alloc&) {
    fail_file(path, "zip entries need " + std::to_string(total) +
                        " bytes of memory once inflated, which could not be allocated "
                        "(re-zip the checkpoint uncompressed, e.g. `zip -0`, or convert it "
                        "to safetensors, so it can be mapped instead)");
  }
  ZipArchive z;
  for (size_t i = 0; i < out.size(); ++i) {
    const ZipEntry& e = *from[i];
    ZipEntry& to = out[i];
    const uint8_t* src = file_->data() + e.data_offset;
    if (is_inflatable(e)) {
      inflate_entry(path, e, src, block.data() + to.data_offset, to.size);
      to.method = kStored;
    } else if (e.compressed_size > 0) {
      std::memcpy(block.data() + to.data_offset, src, static_cast<size_t>(e.compressed_size));
    }
    z.index_.emplace(to.name, i);
  }
  z.file_ = MappedFile::from_memory(path, std::move(block));
  z.entries_ = std::move(out);
  return z;
}

}  // namespace sd::io
