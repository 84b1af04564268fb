// Reader for safetensors files: an 8-byte little-endian header length, a JSON header
// mapping tensor names to {dtype, shape, data_offsets} (plus an optional string map
// "__metadata__"), then the raw little-endian tensor bytes. Only the header is parsed at
// open; tensor bytes stay in the (mapped) file until a loader asks for them.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "io/mapped_file.h"
#include "io/tensor_info.h"

namespace sd::io {

// Headers of real checkpoints are well under 10 MiB; a larger one is corrupt or hostile
// and would only make the JSON parser allocate without bound.
constexpr uint64_t kMaxSafetensorsHeader = 100ull << 20;

class SafetensorsFile {
 public:
  // Opens and validates the file; throws sd::Error "<path>: <what> (<hint>)".
  static SafetensorsFile open(const std::string& path, MapMode mode = MapMode::Auto);
  // Validates a file already in memory or mapped.
  static SafetensorsFile parse(std::shared_ptr<const MappedFile> file);

  const std::string& path() const { return file_->path(); }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  // In header order.
  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  const TensorInfo* find(const std::string& name) const;
  // The tensor's bytes as stored (info.size of them).
  const uint8_t* data(const TensorInfo& info) const { return file_->data() + info.offset; }
  // Offset of the data section (8 + header length).
  uint64_t data_offset() const { return data_offset_; }
  const MappedFile& file() const { return *file_; }

 private:
  std::shared_ptr<const MappedFile> file_;
  std::map<std::string, std::string> metadata_;
  std::vector<TensorInfo> tensors_;
  std::unordered_map<std::string, size_t> index_;
  uint64_t data_offset_ = 0;
};

}  // namespace sd::io
