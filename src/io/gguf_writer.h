// Writes GGUF v3 files. Tensor data is streamed: each tensor's bytes come from a callback
// when the writer reaches it, so a converter holds one tensor (or one row) at a time,
// never the whole model. The file appears whole or not at all: it is written to
// `path + ".tmp"` and renamed over `path` only after every byte is on disk.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

#include "io/gguf_value.h"
#include "tensor/dtype.h"

namespace sd::io {

// Receives one tensor's bytes, in as many pieces as the source likes.
class GgufSink {
 public:
  virtual ~GgufSink() = default;
  virtual void write(const void* data, size_t n) = 0;
};

// Must write exactly the tensor's byte size (row_size(dtype, ne[0]) * rows) to the sink.
using GgufTensorSource = std::function<void(GgufSink&)>;

class GgufWriter {
 public:
  // Metadata in the order added; a key may be added once. "general.alignment" must be a
  // u32 power of two and sets the data alignment (default 32).
  void add(std::string key, GgufValue value);
  void set_alignment(uint32_t alignment);
  uint32_t alignment() const { return alignment_; }

  // `ne` in engine order (ne[0] fastest), 1 to 4 dims, each > 0, ne[0] a multiple of the
  // dtype's block size.
  void add_tensor(std::string name, DType dtype, std::vector<int64_t> ne, GgufTensorSource source);

  // Writes everything; throws sd::Error "<path>: ..." (or whatever a source throws) and
  // leaves neither the temp file nor a partial `path` behind.
  void write(const std::string& path) const;

 private:
  struct Tensor {
    std::string name;
    DType dtype;
    std::vector<int64_t> ne;
    uint64_t size;
    GgufTensorSource source;
  };

  std::vector<std::pair<std::string, GgufValue>> metadata_;
  std::unordered_set<std::string> keys_;
  std::vector<Tensor> tensors_;
  std::unordered_set<std::string> names_;
  uint32_t alignment_ = 32;
};

}  // namespace sd::io
