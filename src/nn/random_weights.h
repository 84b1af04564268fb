// Weights made up on request: the first get() of a name creates a tensor of the asked
// shape with deterministic random values (seeded by the name), so model code can be run
// and tested without a file. Records what was asked, so a test can write the same
// weights out as a checkpoint and load it back through the real loader.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "nn/weights.h"

namespace sd::nn {

class RandomWeights final : public Weights {
 public:
  // Matrices and kernels (2+ dims) get `matrix_type`; vectors stay f32. `seed` varies
  // every value.
  explicit RandomWeights(DType matrix_type = DType::F32, uint32_t seed = 1);
  ~RandomWeights() override;

  Tensor* get(Context& ctx, const std::string& name, const Shape& ne) override;
  bool contains(const std::string&) const override { return true; }

  // Overrides a tensor's values (f32, converted to its dtype), creating it if needed.
  void set(const std::string& name, const Shape& ne, const std::vector<float>& values);
  // Current values of a created tensor as f32.
  std::vector<float> values(const std::string& name) const;

  // Names of every tensor created so far, sorted.
  std::vector<std::string> names() const;

  // Writes every created tensor as a safetensors file (tensor names as given, so
  // canonical LDM names make a checkpoint the loader reads as one).
  void save_safetensors(const std::string& path) const;

 private:
  struct Entry {
    Tensor tensor;  // the stored tensor; get() returns per-context leaves aliasing it
    std::unique_ptr<Buffer> buffer;
  };
  Entry& create(const std::string& name, const Shape& ne);

  DType matrix_type_;
  uint32_t seed_;
  std::map<std::string, Entry> entries_;
};

}  // namespace sd::nn
