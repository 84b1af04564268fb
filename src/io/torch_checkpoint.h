// Reader for PyTorch checkpoints (.ckpt, .pt, .pth) without Python and without running any
// of the file's pickled code. Two layouts:
//  - zip (torch.save since PyTorch 1.6): "<top>/data.pkl" holds the pickled object, and
//    each tensor storage is the stored entry "<top>/data/<key>", used in place (archives
//    re-zipped with deflate are inflated into memory first);
//  - legacy (older torch.save): five pickles in a row (magic number, protocol version,
//    system info, the object, the storage keys), then each storage as an 8-byte element
//    count and its raw bytes.
// The object is a dict of tensors: the dict under "state_dict" when the top level has one
// (Lightning / SD training checkpoints), else the top level itself. Nested dicts are
// flattened with '.'-joined names ({"model": {...}} gives "model.x"); stripping such
// prefixes ("model.", "module." from DataParallel) is left to name conversion.
// Values that are not tensors (step counters, optimizer opaque objects) are skipped, and
// the ones that look like they might have held a tensor are listed in notes().
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "io/mapped_file.h"
#include "io/tensor_info.h"

namespace sd::io {

// How a tensor's elements lie in its storage. Tensors saved from views of larger tensors
// (slices, transposes) keep the view's strides, so their bytes may not be contiguous.
struct TorchLayout {
  bool contiguous = true;
  // Strides in elements, engine order (stride[0] goes with ne[0]); as saved.
  std::array<int64_t, kMaxTensorDims> stride{0, 0, 0, 0};
  uint64_t storage_offset = 0;  // file offset of the storage's first byte
  uint64_t storage_size = 0;    // bytes of the storage
};

class TorchCheckpoint {
 public:
  // Opens and validates the file; throws sd::Error "<path>: <what> (<hint>)".
  static TorchCheckpoint open(const std::string& path, MapMode mode = MapMode::Auto);
  static TorchCheckpoint parse(std::shared_ptr<const MappedFile> file);

  const std::string& path() const { return file_->path(); }
  // In the pickled dict's order. For a contiguous tensor, `offset` and `size` are its
  // bytes in the file; for a strided one, `offset` is its first element and `size` the
  // bytes it takes once gathered (use read()).
  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  const TensorInfo* find(const std::string& name) const;
  const TorchLayout& layout(const TensorInfo& info) const;
  bool is_contiguous(const TensorInfo& info) const { return layout(info).contiguous; }
  // The tensor's bytes in the file (info.size of them). Throws sd::Error for a
  // non-contiguous tensor, whose bytes are not in one piece: use read().
  const uint8_t* data(const TensorInfo& info) const;
  // Copies the tensor's bytes as stored (info.size bytes, file dtype, contiguous) into dst,
  // gathering strided views. Then load_tensor_data() converts them as for any file.
  void read(const TensorInfo& info, void* dst) const;
  // Entries skipped while collecting tensors, one line each, for debug logs.
  const std::vector<std::string>& notes() const { return notes_; }
  bool is_legacy() const { return legacy_; }
  const MappedFile& file() const { return *file_; }

 private:
  friend class TorchCheckpointBuilder;

  std::shared_ptr<const MappedFile> file_;
  std::vector<TensorInfo> tensors_;
  std::vector<TorchLayout> layouts_;
  std::unordered_map<std::string, size_t> index_;
  std::vector<std::string> notes_;
  bool legacy_ = false;
};

}  // namespace sd::io
