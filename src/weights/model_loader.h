// The ModelLoader: opens every file a generation is given (checkpoint, separate VAE /
// text encoder / diffusion files, diffusers folders), maps every tensor name onto the
// canonical scheme (io/name_conversion.h) and records where each tensor's bytes are and
// what must be done to them (split, transpose, dtype conversion). Reads metadata only;
// bytes are read on request, one tensor at a time.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "io/model_version.h"
#include "io/name_conversion.h"
#include "tensor/context.h"
#include "weights/model_file.h"

namespace sd::weights {

// One canonical tensor and where its bytes come from.
struct WeightSource {
  const ModelFile* file = nullptr;
  io::TensorInfo info;  // as the file states it
  io::Transform transform = io::Transform::None;
  int qkv_part = 0;      // SplitQkv: which third of the fused tensor
  Shape ne{1, 1, 1, 1};  // canonical shape, engine order
  int n_dims = 1;
  DType stored = DType::F32;  // the engine dtype the bytes load as
};

class ModelLoader {
 public:
  ModelLoader() = default;
  ModelLoader(const ModelLoader&) = delete;
  ModelLoader& operator=(const ModelLoader&) = delete;

  // Adds a weight file or a diffusers folder. `role` says which flag gave it (-m, --vae,
  // --diffusion-model, --clip_l, ...) and so under which root its names go. A tensor of a
  // later file replaces an earlier one of the same name (--vae overrides the checkpoint's).
  void add(const std::string& path, io::FileRole role = io::FileRole::Model);

  const std::map<std::string, WeightSource>& tensors() const { return tensors_; }
  bool contains(const std::string& name) const { return tensors_.count(name) != 0; }
  // Throws an error naming the tensor and the files searched.
  const WeightSource& find(const std::string& name) const;

  // Every tensor's info under its canonical name and shape, for version detection.
  std::vector<io::TensorInfo> canonical_infos() const;
  // The model, detected from canonical names and shapes (io/model_version.h).
  io::ModelDescription describe() const { return io::describe_model(canonical_infos()); }
  // A diffusers folder's tokenizer/ folder, "" when none was given.
  const std::string& tokenizer_dir() const { return tokenizer_dir_; }
  // Every file or folder added, for messages.
  std::string sources() const;

  // The tensor's data converted to `type` (row_size(type, ne[0]) * rows bytes at dst),
  // after the mapping's transform. Block types are quantized as sd.cpp's convert does.
  void read(const std::string& name, DType type, void* dst) const;
  // The stored bytes in place when they can be used as `type` without any work (mapped
  // file, no transform, no conversion); nullptr otherwise.
  const uint8_t* mapped(const std::string& name, DType type) const;
  // Drops a mapped tensor's pages from this process's memory; the next read maps them
  // again (from the page cache when the kernel still has them).
  void evict(const std::string& name) const;

  // Checks that every file is still the one opened (same inode, size and modification
  // time). One replaced by a file with the same tensors at the same places is opened
  // again; one that is gone or whose tensors differ is an sd::Error naming it. Weights
  // kept on disk call this before a phase reads them again.
  void verify_files();

 private:
  struct FileStamp {
    uint64_t device = 0, inode = 0, size = 0;
    int64_t mtime_ns = 0;
    bool operator==(const FileStamp&) const = default;
  };
  static std::optional<FileStamp> stamp(const std::string& path);

  void add_file(std::unique_ptr<ModelFile> file, io::SourceLayout layout, std::string_view prefix);

  std::vector<std::unique_ptr<ModelFile>> files_;
  std::vector<FileStamp> stamps_;  // per file, as opened
  // Files replaced by verify_files(): weights resident from them may still point into
  // their mappings, so they stay open.
  std::vector<std::unique_ptr<ModelFile>> retired_;
  std::vector<std::string> paths_;
  std::map<std::string, WeightSource> tensors_;
  std::string tokenizer_dir_;
};

// Bytes of `n` elements of `type` in rows of `ne0` (block types pack whole rows).
size_t tensor_bytes(DType type, const Shape& ne);

}  // namespace sd::weights
