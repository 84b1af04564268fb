#include "io/gguf_writer.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "io/file_error.h"
#include "io/gguf.h"
#include "tensor/error.h"

namespace sd::io {

namespace {

constexpr uint32_t kGgufWriteVersion = 3;

// Appends little-endian encodings to a byte vector (the header is built in memory first).
class HeaderBytes {
 public:
  std::vector<uint8_t> bytes;

  template <typename T>
  void put(T v) {
    const auto* p = reinterpret_cast<const uint8_t*>(&v);
    bytes.insert(bytes.end(), p, p + sizeof(T));
  }
  void put_string(const std::string& s) {
    put<uint64_t>(s.size());
    bytes.insert(bytes.end(), s.begin(), s.end());
  }
  void put_value(const GgufValue& v) {
    switch (v.type()) {
      case GgufType::String:
        return put_string(v.as_string());
      case GgufType::Array: {
        put<uint32_t>(static_cast<uint32_t>(v.elem_type()));
        put<uint64_t>(v.array_size());
        if (v.elem_type() == GgufType::String || v.elem_type() == GgufType::Array) {
          for (const GgufValue& item : v.items()) put_value(item);
        } else {
          const auto& p = v.packed_bytes();
          bytes.insert(bytes.end(), p.begin(), p.end());
        }
        return;
      }
      default: {
        uint8_t b[8];
        v.scalar_to_bytes(b);
        bytes.insert(bytes.end(), b, b + gguf_scalar_size(v.type()));
        return;
      }
    }
  }
};

// Buffered output to the temp file; write errors name it.
class FileOut : public GgufSink {
 public:
  FileOut(int fd, const std::string& path) : fd_(fd), path_(path) { buf_.reserve(kBufSize); }

  void write(const void* data, size_t n) override {
    const auto* p = static_cast<const uint8_t*>(data);
    written_ += n;
    if (buf_.size() + n <= kBufSize) {
      buf_.insert(buf_.end(), p, p + n);
      return;
    }
    flush();
    if (n >= kBufSize) {
      write_fd(p, n);
    } else {
      buf_.insert(buf_.end(), p, p + n);
    }
  }
  void pad_to(uint64_t alignment) {
    static const uint8_t zeros[256] = {};
    uint64_t pad = (alignment - written_ % alignment) % alignment;
    while (pad > 0) {
      size_t n = static_cast<size_t>(std::min<uint64_t>(pad, sizeof(zeros)));
      write(zeros, n);
      pad -= n;
    }
  }
  void flush() {
    write_fd(buf_.data(), buf_.size());
    buf_.clear();
  }

 private:
  static constexpr size_t kBufSize = 4u << 20;

  void write_fd(const uint8_t* p, size_t n) {
    while (n > 0) {
      ssize_t w = ::write(fd_, p, n);
      if (w < 0) {
        if (errno == EINTR) continue;
        fail_file(path_, std::string("cannot write (") + std::strerror(errno) + ")");
      }
      p += w;
      n -= static_cast<size_t>(w);
    }
  }

  int fd_;
  const std::string& path_;
  std::vector<uint8_t> buf_;
  uint64_t written_ = 0;
};

// Counts a source's bytes so a short or long tensor is caught at the tensor, not as a
// shifted file.
class TensorSink : public GgufSink {
 public:
  TensorSink(FileOut& out, const std::string& path, const std::string& name, uint64_t size)
      : out_(out), path_(path), name_(name), size_(size) {}
  void write(const void* data, size_t n) override {
    if (n > size_ - done_) {
      fail_file(path_, "source of tensor '" + name_ + "' wrote more than its " +
                           std::to_string(size_) + " bytes (bug in the converter)");
    }
    out_.write(data, n);
    done_ += n;
  }
  uint64_t done() const { return done_; }

 private:
  FileOut& out_;
  const std::string& path_;
  const std::string& name_;
  uint64_t size_;
  uint64_t done_ = 0;
};

bool is_pow2(uint64_t v) {
  return v != 0 && (v & (v - 1)) == 0;
}

}  // namespace

void GgufWriter::add(std::string key, GgufValue value) {
  if (key == "general.alignment") {
    SD_CHECK(value.type() == GgufType::U32 && is_pow2(value.as_u64()),
             "[gguf_writer] general.alignment must be a u32 power of two, not %s %s",
             std::string(gguf_type_name(value.type())).c_str(), value.to_string().c_str());
    alignment_ = static_cast<uint32_t>(value.as_u64());
  }
  SD_CHECK(keys_.insert(key).second, "[gguf_writer] metadata key '%s' added twice", key.c_str());
  metadata_.emplace_back(std::move(key), std::move(value));
}

void GgufWriter::set_alignment(uint32_t alignment) {
  SD_CHECK(is_pow2(alignment), "[gguf_writer] alignment %u is not a power of two", alignment);
  alignment_ = alignment;
  for (auto& [k, v] : metadata_) {
    if (k == "general.alignment") {
      v = GgufValue::u32(alignment);
      return;
    }
  }
  add("general.alignment", GgufValue::u32(alignment));
}

void GgufWriter::add_tensor(std::string name, DType dtype, std::vector<int64_t> ne,
                            GgufTensorSource source) {
  SD_CHECK(!ne.empty() && ne.size() <= 4, "[gguf_writer] tensor '%s' has %zu dims (1 to 4)",
           name.c_str(), ne.size());
  SD_CHECK(dtype != DType::Count, "[gguf_writer] tensor '%s' has no dtype", name.c_str());
  uint64_t rows = 1;
  for (size_t i = 0; i < ne.size(); ++i) {
    // A zero dimension is legal (an empty tensor has no bytes); GGUF readers accept it.
    SD_CHECK(ne[i] >= 0, "[gguf_writer] tensor '%s' has ne[%zu] = %lld (must not be negative)",
             name.c_str(), i, static_cast<long long>(ne[i]));
    if (i > 0) {
      SD_CHECK(!__builtin_mul_overflow(rows, static_cast<uint64_t>(ne[i]), &rows),
               "[gguf_writer] tensor '%s' is too large", name.c_str());
    }
  }
  SD_CHECK(ne[0] % block_size(dtype) == 0,
           "[gguf_writer] tensor '%s' has ne[0] = %lld, not a multiple of %s's block size %lld",
           name.c_str(), static_cast<long long>(ne[0]), std::string(dtype_name(dtype)).c_str(),
           static_cast<long long>(block_size(dtype)));
  uint64_t size = 0;
  SD_CHECK(!__builtin_mul_overflow(static_cast<uint64_t>(row_size(dtype, ne[0])), rows, &size),
           "[gguf_writer] tensor '%s' is too large", name.c_str());
  SD_CHECK(names_.insert(name).second, "[gguf_writer] tensor '%s' added twice", name.c_str());
  SD_CHECK(static_cast<bool>(source), "[gguf_writer] tensor '%s' has no data source", name.c_str());
  tensors_.push_back({std::move(name), dtype, std::move(ne), size, std::move(source)});
}

void GgufWriter::write(const std::string& path) const {
  HeaderBytes h;
  h.bytes.reserve(4096);
  uint32_t magic;
  std::memcpy(&magic, kGgufMagic, 4);
  h.put<uint32_t>(magic);
  h.put<uint32_t>(kGgufWriteVersion);
  h.put<uint64_t>(tensors_.size());
  h.put<uint64_t>(metadata_.size());
  for (const auto& [key, value] : metadata_) {
    h.put_string(key);
    h.put<uint32_t>(static_cast<uint32_t>(value.type()));
    h.put_value(value);
  }
  uint64_t offset = 0;
  for (const Tensor& t : tensors_) {
    h.put_string(t.name);
    h.put<uint32_t>(static_cast<uint32_t>(t.ne.size()));
    for (int64_t d : t.ne) h.put<uint64_t>(static_cast<uint64_t>(d));
    h.put<uint32_t>(dtype_info(t.dtype).gguf_id);
    h.put<uint64_t>(offset);
    offset += (t.size + alignment_ - 1) / alignment_ * alignment_;
  }

  const std::string tmp = path + ".tmp";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) fail_file(tmp, std::string("cannot create (") + std::strerror(errno) + ")");
  try {
    FileOut out(fd, tmp);
    out.write(h.bytes.data(), h.bytes.size());
    out.pad_to(alignment_);
    for (const Tensor& t : tensors_) {
      TensorSink sink(out, path, t.name, t.size);
      t.source(sink);
      if (sink.done() != t.size) {
        fail_file(path, "source of tensor '" + t.name + "' wrote " + std::to_string(sink.done()) +
                            " of its " + std::to_string(t.size) + " bytes (bug in the converter)");
      }
      out.pad_to(alignment_);
    }
    out.flush();
    if (::fsync(fd) != 0) fail_file(tmp, std::string("cannot sync (") + std::strerror(errno) + ")");
    int rc = ::close(fd);
    fd = -1;
    if (rc != 0) fail_file(tmp, std::string("cannot close (") + std::strerror(errno) + ")");
    if (std::rename(tmp.c_str(), path.c_str()) != 0) {
      fail_file(path, "cannot rename " + tmp + " to it (" + std::strerror(errno) + ")");
    }
  } catch (...) {
    if (fd >= 0) ::close(fd);
    ::unlink(tmp.c_str());
    throw;
  }
}

}  // namespace sd::io
