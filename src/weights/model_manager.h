// The ModelManager: the production nn::Weights. Model code asks for a tensor by canonical
// name and shape; the manager checks the shape against the file, makes the weight
// resident the first time a graph needs it and binds it to that graph's leaf.
//
// Residency here is the default one (weights live on the compute device once loaded);
// where the file's bytes can be used as they are (same dtype, no transform, host device)
// the weight aliases the memory-mapped file instead of being copied, so loading costs no
// RAM beyond the page cache. `release(prefix)` drops a module's weights (a later get()
// reloads them), which is what disk residency builds on.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>

#include "backend/backend.h"
#include "nn/weights.h"
#include "weights/model_loader.h"

namespace sd::weights {

struct ModelManagerOptions {
  // --type: convert weights to this type on load, with convert's rules (weight_type.h).
  std::optional<DType> weight_type;
  bool use_mmap = true;
};

class ModelManager final : public nn::Weights {
 public:
  ModelManager(const ModelLoader& loader, Device& device, ModelManagerOptions options = {});
  ~ModelManager() override;

  Tensor* get(Context& ctx, const std::string& name, const Shape& ne) override;
  bool contains(const std::string& name) const override { return loader_.contains(name); }

  // The dtype `name` has (or will have) once resident.
  DType resident_type(const std::string& name) const;
  // Drops every resident weight whose name starts with `prefix`.
  void release(const std::string& prefix);
  // Bytes held in device buffers (mapped weights not counted) and mapped.
  size_t resident_bytes() const;
  size_t mapped_bytes() const;

 private:
  struct Resident {
    Tensor tensor;
    std::unique_ptr<Buffer> buffer;
    bool mapped = false;
  };
  Resident& load(const std::string& name);

  const ModelLoader& loader_;
  Device& device_;
  ModelManagerOptions options_;
  std::map<std::string, Resident> resident_;
};

}  // namespace sd::weights
