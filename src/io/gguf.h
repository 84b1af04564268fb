// Reader for GGUF v2 and v3 files (the llama.cpp / ggml weight format): a header, typed
// metadata key/values, tensor infos, then the tensor data section, aligned to
// general.alignment. Only little-endian files are read. Everything the file states is
// checked against the file's size before it is used or allocated for, so a truncated or
// hostile file fails with an sd::Error naming the file, never a crash.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "io/gguf_value.h"
#include "io/mapped_file.h"
#include "io/tensor_info.h"

namespace sd::io {

inline constexpr char kGgufMagic[4] = {'G', 'G', 'U', 'F'};
constexpr uint32_t kGgufDefaultAlignment = 32;
// Arrays of arrays deeper than this are refused: real files nest at most twice, and the
// reader recurses per level.
constexpr int kGgufMaxArrayDepth = 8;

class GgufFile {
 public:
  static GgufFile open(const std::string& path, MapMode mode = MapMode::Auto);
  static GgufFile parse(std::shared_ptr<const MappedFile> file);

  const std::string& path() const { return file_->path(); }
  uint32_t version() const { return version_; }
  uint32_t alignment() const { return alignment_; }
  uint64_t data_offset() const { return data_offset_; }

  // In file order.
  const std::vector<std::pair<std::string, GgufValue>>& metadata() const { return metadata_; }
  const GgufValue* find_value(const std::string& key) const;
  // Throw "<path>: metadata 'key' ..." when the key is missing or has another type.
  const GgufValue& value(const std::string& key) const;
  std::string get_string(const std::string& key) const;
  uint64_t get_u64(const std::string& key) const;
  int64_t get_i64(const std::string& key) const;
  double get_f64(const std::string& key) const;
  bool get_bool(const std::string& key) const;

  // In file order.
  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  const TensorInfo* find(const std::string& name) const;
  const uint8_t* data(const TensorInfo& info) const { return file_->data() + info.offset; }
  const MappedFile& file() const { return *file_; }

 private:
  std::shared_ptr<const MappedFile> file_;
  uint32_t version_ = 0;
  uint32_t alignment_ = kGgufDefaultAlignment;
  uint64_t data_offset_ = 0;
  std::vector<std::pair<std::string, GgufValue>> metadata_;
  std::unordered_map<std::string, size_t> key_index_;
  std::vector<TensorInfo> tensors_;
  std::unordered_map<std::string, size_t> tensor_index_;
};

}  // namespace sd::io
