#include "nn/random_weights.h"

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>

#include "backend/registry.h"
#include "tensor/error.h"
#include "tensor/quant/quant.h"
#include "tensor/uniform_float.h"

namespace sd::nn {

namespace {

uint32_t name_seed(const std::string& name, uint32_t seed) {
  uint32_t h = 2166136261u ^ seed;  // FNV-1a: a stable seed per name
  for (unsigned char c : name) h = (h ^ c) * 16777619u;
  return h;
}

int dims_of(const Shape& ne) {
  int n = kMaxDims;
  while (n > 1 && ne[n - 1] == 1) --n;
  return n;
}

const char* safetensors_dtype(DType t) {
  switch (t) {
    case DType::F32:
      return "F32";
    case DType::F16:
      return "F16";
    case DType::BF16:
      return "BF16";
    default:
      throw Error("[random weights] only f32/f16/bf16 can be saved as safetensors");
  }
}

}  // namespace

RandomWeights::RandomWeights(DType matrix_type, uint32_t seed)
    : matrix_type_(matrix_type), seed_(seed) {}

RandomWeights::~RandomWeights() = default;

RandomWeights::Entry& RandomWeights::create(const std::string& name, const Shape& ne) {
  Entry& e = entries_[name];
  const bool matrix = dims_of(ne) >= 2;
  e.tensor.type = matrix ? matrix_type_ : DType::F32;
  e.tensor.ne = ne;
  e.tensor.nb = contiguous_strides(e.tensor.type, ne);
  e.tensor.name = name;
  e.tensor.flags = kFlagParam;
  e.buffer = DeviceRegistry::instance().get("CPU").buffer_type().allocate(e.tensor.nbytes());
  bind_tensor(e.tensor, *e.buffer, 0);
  // Scaled so activations keep unit variance through a layer: uniform with variance
  // 1/fan_in for matrices and kernels; norm scales near 1; biases small.
  const int64_t n = e.tensor.nelements();
  std::vector<float> v(static_cast<size_t>(n));
  std::mt19937 rng(name_seed(name, seed_));
  const float fan_in = matrix ? static_cast<float>(n / ne[dims_of(ne) - 1]) : 1.0f;
  const float amplitude = matrix ? std::sqrt(3.0f / fan_in) : 0.1f;
  const float offset = !matrix && name.ends_with("weight") ? 1.0f : 0.0f;
  for (float& x : v) x = offset + amplitude * uniform_float(rng, -1.0f, 1.0f);
  std::vector<uint8_t> bytes(e.tensor.nbytes());
  quantize_rows(e.tensor.type, v.data(), bytes.data(), e.tensor.nrows(), ne[0]);
  tensor_set(e.tensor, bytes.data());
  return e;
}

Tensor* RandomWeights::get(Context& ctx, const std::string& name, const Shape& ne) {
  auto it = entries_.find(name);
  Entry& e = it != entries_.end() ? it->second : create(name, ne);
  SD_CHECK(e.tensor.ne == ne, "[weights] '%s' is %s, the model expects a different shape",
           name.c_str(), e.tensor.shape_string().c_str());
  Tensor* leaf = ctx.new_tensor(e.tensor.type, ne, name);
  leaf->flags |= kFlagParam;
  leaf->buffer = e.tensor.buffer;
  leaf->data = e.tensor.data;
  return leaf;
}

void RandomWeights::set(const std::string& name, const Shape& ne,
                        const std::vector<float>& values) {
  auto it = entries_.find(name);
  Entry& e = it != entries_.end() ? it->second : create(name, ne);
  SD_CHECK(e.tensor.ne == ne && static_cast<int64_t>(values.size()) == e.tensor.nelements(),
           "[weights] set('%s'): shape or value count does not match %s", name.c_str(),
           e.tensor.shape_string().c_str());
  std::vector<uint8_t> bytes(e.tensor.nbytes());
  quantize_rows(e.tensor.type, values.data(), bytes.data(), e.tensor.nrows(), ne[0]);
  tensor_set(e.tensor, bytes.data());
}

std::vector<float> RandomWeights::values(const std::string& name) const {
  auto it = entries_.find(name);
  SD_CHECK(it != entries_.end(), "[weights] no tensor '%s'", name.c_str());
  const Tensor& t = it->second.tensor;
  std::vector<float> v(static_cast<size_t>(t.nelements()));
  const size_t row_bytes = t.nb[1];
  for (int64_t r = 0; r < t.nrows(); ++r)
    dequantize_row(t.type, static_cast<const char*>(t.data) + r * row_bytes, v.data() + r * t.ne[0],
                   t.ne[0]);
  return v;
}

std::vector<std::string> RandomWeights::names() const {
  std::vector<std::string> out;
  for (const auto& [name, e] : entries_) out.push_back(name);
  return out;
}

void RandomWeights::save_safetensors(const std::string& path) const {
  // Header: {"name":{"dtype":..,"shape":[outer..inner],"data_offsets":[a,b]},...}
  std::string header = "{";
  uint64_t offset = 0;
  for (const auto& [name, e] : entries_) {
    const Tensor& t = e.tensor;
    std::string shape;
    for (int d = dims_of(t.ne) - 1; d >= 0; --d) shape += std::to_string(t.ne[d]) + (d ? "," : "");
    if (header.size() > 1) header += ",";
    header += "\"" + name + "\":{\"dtype\":\"" + safetensors_dtype(t.type) + "\",\"shape\":[" +
              shape + "],\"data_offsets\":[" + std::to_string(offset) + "," +
              std::to_string(offset + t.nbytes()) + "]}";
    offset += t.nbytes();
  }
  header += "}";
  while (header.size() % 8) header += ' ';
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    SD_CHECK(out.good(), "[random weights] cannot write '%s'", tmp.c_str());
    const uint64_t n = header.size();
    out.write(reinterpret_cast<const char*>(&n), 8);
    out.write(header.data(), static_cast<std::streamsize>(n));
    for (const auto& [name, e] : entries_)
      out.write(static_cast<const char*>(e.tensor.data),
                static_cast<std::streamsize>(e.tensor.nbytes()));
    SD_CHECK(out.good(), "[random weights] writing '%s' failed", tmp.c_str());
  }
  std::filesystem::rename(tmp, path);
}

}  // namespace sd::nn
