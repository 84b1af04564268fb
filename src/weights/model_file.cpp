#include "weights/model_file.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "io/gguf.h"
#include "io/safetensors.h"
#include "io/torch_checkpoint.h"
#include "tensor/error.h"

namespace sd::weights {
namespace {

// safetensors and GGUF files are always mapped and store every tensor contiguously.
template <class File>
class MappedModelFile final : public ModelFile {
 public:
  explicit MappedModelFile(const std::string& path) : f_(File::open(path)) {}
  const std::string& path() const override { return f_.path(); }
  const std::vector<io::TensorInfo>& tensors() const override { return f_.tensors(); }
  const uint8_t* mapped(const io::TensorInfo& info) const override { return f_.data(info); }
  void read(const io::TensorInfo& info, uint8_t* dst) const override {
    std::memcpy(dst, f_.data(info), info.size);
  }
  void evict(const io::TensorInfo& info) const override {
    f_.file().evict(f_.data(info), info.size);
  }

 private:
  File f_;
};

class TorchModelFile final : public ModelFile {
 public:
  explicit TorchModelFile(const std::string& path) : f_(io::TorchCheckpoint::open(path)) {}
  const std::string& path() const override { return f_.path(); }
  const std::vector<io::TensorInfo>& tensors() const override { return f_.tensors(); }
  const uint8_t* mapped(const io::TensorInfo& info) const override {
    return f_.is_contiguous(info) ? f_.data(info) : nullptr;
  }
  void read(const io::TensorInfo& info, uint8_t* dst) const override { f_.read(info, dst); }
  void evict(const io::TensorInfo& info) const override {
    if (f_.is_contiguous(info)) f_.file().evict(f_.data(info), info.size);
  }

 private:
  io::TorchCheckpoint f_;
};

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

}  // namespace

std::unique_ptr<ModelFile> open_model_file(const std::string& path) {
  std::error_code ec;
  SD_CHECK(std::filesystem::exists(path, ec), "model file '%s' not found; check the path",
           path.c_str());
  SD_CHECK(!std::filesystem::is_directory(path, ec),
           "'%s' is a folder, not a weight file (a diffusers pipeline folder needs "
           "model_index.json or unet/)",
           path.c_str());
  // Reading a FIFO or a device would wait for a writer, or never end.
  SD_CHECK(std::filesystem::is_regular_file(path, ec),
           "'%s' is not a regular file (a pipe, device or socket); give the model file",
           path.c_str());
  char magic[9] = {};
  {
    std::ifstream f(path, std::ios::binary);
    if (!f) sd::fail("cannot open '%s': %s", path.c_str(), std::strerror(errno));
    f.read(magic, sizeof magic);
  }
  if (std::memcmp(magic, io::kGgufMagic, 4) == 0)
    return std::make_unique<MappedModelFile<io::GgufFile>>(path);
  // A safetensors header whose length ends in byte 0x80 starts like a pickle; its JSON
  // opens at byte 8.
  const bool safetensors_json = magic[8] == '{';
  // A zip archive (torch.save since 1.6) or a raw pickle stream (legacy torch.save).
  if (std::memcmp(magic, "PK\x03\x04", 4) == 0 ||
      (static_cast<uint8_t>(magic[0]) == 0x80 && !safetensors_json)) {
    return std::make_unique<TorchModelFile>(path);
  }
  const std::string ext = lower(std::filesystem::path(path).extension().string());
  if (ext == ".ckpt" || ext == ".pt" || ext == ".pth" || ext == ".bin") {
    return std::make_unique<TorchModelFile>(path);
  }
  return std::make_unique<MappedModelFile<io::SafetensorsFile>>(path);
}

}  // namespace sd::weights
