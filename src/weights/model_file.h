// One opened weight file, whichever its format (safetensors, GGUF, PyTorch zip or legacy
// pickle), behind one interface: its tensors' metadata and their stored bytes.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "io/tensor_info.h"

namespace sd::weights {

class ModelFile {
 public:
  virtual ~ModelFile() = default;
  virtual const std::string& path() const = 0;
  virtual const std::vector<io::TensorInfo>& tensors() const = 0;
  // The stored bytes (info.size) in place, when the file is mapped and the tensor is
  // stored contiguously; nullptr otherwise (then use read()).
  virtual const uint8_t* mapped(const io::TensorInfo& info) const = 0;
  // Copies the tensor's stored bytes (info.size) into dst.
  virtual void read(const io::TensorInfo& info, uint8_t* dst) const = 0;
  // Drops the tensor's mapped pages from this process's memory (io::MappedFile::evict).
  virtual void evict(const io::TensorInfo& info) const = 0;
};

// Chooses the reader by magic bytes first (files get renamed), then by extension. Throws
// sd::Error naming the file when it cannot be opened or parsed.
std::unique_ptr<ModelFile> open_model_file(const std::string& path);

}  // namespace sd::weights
