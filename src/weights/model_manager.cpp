#include "weights/model_manager.h"

#include <cstring>

#include "tensor/error.h"
#include "weights/weight_type.h"

namespace sd::weights {
namespace {

// A read-only window onto a mapped weight file: weights alias it without a copy.
class MappedBuffer final : public Buffer {
 public:
  MappedBuffer(BufferType& type, const uint8_t* data, size_t size)
      : Buffer(type, size), data_(data) {}
  void* base() override { return const_cast<uint8_t*>(data_); }
  bool is_host() const override { return true; }
  void set(Tensor& t, const void*, size_t, size_t) override {
    sd::fail("[weights] '%s' is mapped from its file and read-only", t.name.c_str());
  }
  void get(const Tensor& t, void* data, size_t offset, size_t size) const override {
    std::memcpy(data, static_cast<const uint8_t*>(t.data) + offset, size);
  }
  void clear(uint8_t) override { sd::fail("[weights] a mapped weight buffer is read-only"); }

 private:
  const uint8_t* data_;
};

std::string shape_text(const Shape& ne) {
  int n = kMaxDims;
  while (n > 1 && ne[n - 1] == 1) --n;
  std::string s = "[";
  for (int d = 0; d < n; ++d) s += (d ? ", " : "") + std::to_string(ne[d]);
  return s + "]";
}

}  // namespace

ModelManager::ModelManager(const ModelLoader& loader, Device& device, ModelManagerOptions options)
    : loader_(loader), device_(device), options_(options) {}

ModelManager::~ModelManager() = default;

DType ModelManager::resident_type(const std::string& name) const {
  const WeightSource& s = loader_.find(name);
  DType type = s.stored;
  if (options_.weight_type && takes_weight_type(name, s.ne[0], s.stored, *options_.weight_type)) {
    type = *options_.weight_type;
  }
  // Vectors (norm weights, biases) are f32 in sd.cpp's models whatever the file or --type
  // says, and the norm ops take float weights: a q8_0 norm weight, as sd.cpp's convert
  // writes one, is dequantized on load.
  if (s.n_dims == 1 && is_quantized(type)) type = DType::F32;
  return type;
}

ModelManager::Resident& ModelManager::load(const std::string& name) {
  const WeightSource& s = loader_.find(name);
  Resident& r = resident_[name];
  Tensor& t = r.tensor;
  t.type = resident_type(name);
  t.ne = s.ne;
  t.nb = contiguous_strides(t.type, s.ne);
  t.name = name;
  t.flags = kFlagParam;
  const uint8_t* mapped =
      options_.use_mmap && device_.caps().host_addressable ? loader_.mapped(name, t.type) : nullptr;
  if (mapped) {
    r.buffer = std::make_unique<MappedBuffer>(device_.buffer_type(), mapped, t.nbytes());
    r.mapped = true;
    bind_tensor(t, *r.buffer, 0);
    return r;
  }
  r.buffer = device_.buffer_type().allocate(t.nbytes());
  bind_tensor(t, *r.buffer, 0);
  if (r.buffer->is_host()) {
    loader_.read(name, t.type, t.data);
  } else {
    std::vector<uint8_t> staging(t.nbytes());
    loader_.read(name, t.type, staging.data());
    tensor_set(t, staging.data());
  }
  return r;
}

Tensor* ModelManager::get(Context& ctx, const std::string& name, const Shape& ne) {
  const WeightSource* s = loader_.contains(name) ? &loader_.find(name) : nullptr;
  SD_CHECK(s,
           "tensor '%s' %s is missing from %s; the file is not a complete model of the "
           "detected type (or a part was not given, e.g. --vae)",
           name.c_str(), shape_text(ne).c_str(), loader_.sources().c_str());
  SD_CHECK(s->ne == ne, "tensor '%s' in '%s' is %s, the model expects %s", name.c_str(),
           s->file->path().c_str(), shape_text(s->ne).c_str(), shape_text(ne).c_str());
  auto it = resident_.find(name);
  Resident& r = it != resident_.end() ? it->second : load(name);
  Tensor* leaf = ctx.new_tensor(r.tensor.type, ne, name);
  leaf->flags |= kFlagParam;
  leaf->buffer = r.tensor.buffer;
  leaf->data = r.tensor.data;
  return leaf;
}

void ModelManager::release(const std::string& prefix) {
  for (auto it = resident_.begin(); it != resident_.end();) {
    if (it->first.compare(0, prefix.size(), prefix) == 0)
      it = resident_.erase(it);
    else
      ++it;
  }
}

size_t ModelManager::resident_bytes() const {
  size_t n = 0;
  for (const auto& [name, r] : resident_)
    if (!r.mapped) n += r.tensor.nbytes();
  return n;
}

size_t ModelManager::mapped_bytes() const {
  size_t n = 0;
  for (const auto& [name, r] : resident_)
    if (r.mapped) n += r.tensor.nbytes();
  return n;
}

}  // namespace sd::weights
