// Test helpers for LoRA on a diffusion transformer: its weights as the engine reads them,
// and a random LoRA written beside the same weights merged into a checkpoint by hand, so a
// test can check that the LoRA gives the merged checkpoint's image.
#pragma once

#include <cstdint>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "io/io_test_util.h"
#include "io/name_conversion.h"
#include "weights/model_loader.h"

namespace sd::pipeline::test {

// Deterministic values in [-amplitude, amplitude).
inline std::vector<float> lora_values(size_t n, uint32_t seed, float amplitude) {
  std::vector<float> v(n);
  uint32_t s = seed * 2654435761u + 7u;
  for (float& x : v) {
    s = s * 1664525u + 1013904223u;
    x = amplitude * (static_cast<float>((s >> 8) & 0xffff) / 32768.0f - 1.0f);
  }
  return v;
}

inline io::test::Bytes f32_bytes(const std::vector<float>& v) {
  io::test::Bytes b(v.size() * 4);
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

// The diffusion model file's weights as f32, by name below the diffusion root.
struct DitWeights {
  std::map<std::string, std::vector<float>> values;
  std::map<std::string, Shape> shapes;
};

inline DitWeights read_dit_weights(const std::string& file) {
  weights::ModelLoader loader;
  loader.add(file, io::FileRole::DiffusionModel);
  DitWeights w;
  for (const auto& [name, source] : loader.tensors()) {
    std::vector<float> v(
        static_cast<size_t>(source.ne[0] * source.ne[1] * source.ne[2] * source.ne[3]));
    loader.read(name, DType::F32, v.data());
    const std::string key = name.substr(io::kUnetRoot.size());
    w.values[key] = std::move(v);
    w.shapes[key] = source.ne;
  }
  return w;
}

// One low-rank pair of a LoRA: its two tensors' names, changing rows [row0, row0 + rows)
// of the weight `target` [out, in] (a fused weight's slice, or all of it).
struct LoraPair {
  std::string down_key, up_key, target;
  int64_t row0, rows;
};

// Tensors by name with their shapes (ne, fastest first), written as f32 safetensors.
inline void write_f32_safetensors(const std::map<std::string, std::vector<float>>& values,
                                  const std::map<std::string, Shape>& shapes,
                                  const std::string& path) {
  io::test::SafetensorsBuilder out;
  for (const auto& [name, v] : values) {
    const Shape& ne = shapes.at(name);
    std::vector<uint64_t> torch_shape;
    for (int dim = 3; dim >= 0; --dim)
      if (ne[dim] > 1 || !torch_shape.empty() || dim == 0)
        torch_shape.push_back(static_cast<uint64_t>(ne[dim]));
    out.add(name, "F32", torch_shape, f32_bytes(v));
  }
  io::test::write_file(path, out.bytes());
}

// Writes a rank-2 LoRA with factors in [-amplitude, amplitude) to `lora_path` and `w`, with
// multiplier * up * down added where each pair says, as a checkpoint to `merged_path`.
inline void write_lora_and_merged(DitWeights& w, const std::vector<LoraPair>& pairs,
                                  float multiplier, float amplitude, const std::string& lora_path,
                                  const std::string& merged_path) {
  constexpr int64_t kRank = 2;
  io::test::SafetensorsBuilder lora;
  uint32_t seed = 1;
  for (const LoraPair& p : pairs) {
    std::vector<float>& weight = w.values.at(p.target + ".weight");
    const int64_t in = w.shapes.at(p.target + ".weight")[0];
    const std::vector<float> down = lora_values(static_cast<size_t>(kRank * in), seed++, amplitude);
    const std::vector<float> up =
        lora_values(static_cast<size_t>(p.rows * kRank), seed++, amplitude);
    lora.add(p.down_key, "F32", {kRank, static_cast<uint64_t>(in)}, f32_bytes(down));
    lora.add(p.up_key, "F32", {static_cast<uint64_t>(p.rows), kRank}, f32_bytes(up));
    for (int64_t o = 0; o < p.rows; ++o)
      for (int64_t i = 0; i < in; ++i) {
        float sum = 0;
        for (int64_t r = 0; r < kRank; ++r) sum += up[o * kRank + r] * down[r * in + i];
        weight[static_cast<size_t>((p.row0 + o) * in + i)] += multiplier * sum;
      }
  }
  io::test::write_file(lora_path, lora.bytes());
  write_f32_safetensors(w.values, w.shapes, merged_path);
}

}  // namespace sd::pipeline::test
