// FLUX.1 LoRAs: kohya's names (BFL weights, '.' as '_') and diffusers/ai-toolkit names
// ("transformer.transformer_blocks.N.attn.to_q.lora_A"), whose separate q, k, v (and a
// single block's proj_mlp) change runs of rows of BFL's fused qkv / linear1 weights.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "io/io_test_util.h"
#include "tensor/quant/quant.h"
#include "weights/lora.h"
#include "weights/lora_flux_names.h"
#include "weights/lora_test_util.h"

namespace sd::weights {
namespace {

constexpr int64_t kHidden = 8, kMlp = 12, kRank = 2;
const std::string kRoot = "model.diffusion_model.";
const std::string kQkv = kRoot + "double_blocks.0.img_attn.qkv.weight";
const std::string kTxtQkv = kRoot + "double_blocks.0.txt_attn.qkv.weight";
const std::string kProj = kRoot + "double_blocks.0.img_attn.proj.weight";
const std::string kLinear1 = kRoot + "single_blocks.1.linear1.weight";
const std::string kLinear1Bias = kRoot + "single_blocks.1.linear1.bias";
const std::string kLinear2 = kRoot + "single_blocks.1.linear2.weight";
const std::string kImgIn = kRoot + "img_in.weight";

std::map<std::string, Shape> tiny_flux() {
  return {
      {kQkv, {kHidden, 3 * kHidden, 1, 1}},
      {kTxtQkv, {kHidden, 3 * kHidden, 1, 1}},
      {kProj, {kHidden, kHidden, 1, 1}},
      {kLinear1, {kHidden, 3 * kHidden + kMlp, 1, 1}},
      {kLinear1Bias, {3 * kHidden + kMlp, 1, 1, 1}},
      {kLinear2, {kHidden + kMlp, kHidden, 1, 1}},
      {kImgIn, {4, kHidden, 1, 1}},
  };
}

// A LoRA file in f32, remembering what it holds.
struct Writer {
  io::test::SafetensorsBuilder file;
  std::map<std::string, std::vector<float>> held;
  const std::vector<float>& add(const std::string& key, std::vector<uint64_t> shape,
                                uint32_t seed) {
    int64_t n = 1;
    for (uint64_t d : shape) n *= static_cast<int64_t>(d);
    std::vector<float> v = sd::test::lcg_values(n, seed);
    io::test::Bytes bytes(static_cast<size_t>(n) * 4);
    std::memcpy(bytes.data(), v.data(), bytes.size());
    file.add(key, "F32", shape, bytes);
    return held[key] = v;
  }
  void scalar(const std::string& key, float v) {
    io::test::Bytes bytes(4);
    std::memcpy(bytes.data(), &v, 4);
    file.add(key, "F32", {}, bytes);
  }
  std::string save(const io::test::TempDir& dir, const std::string& name) const {
    io::test::write_file(dir.file(name), file.bytes());
    return dir.file(name);
  }
};

// Adds scale * up x down into rows [row0, row0 + out) of a weight with `in` columns, as
// merging by hand does.
void add_product(std::vector<float>& w, int64_t in, int64_t row0, const std::vector<float>& up,
                 const std::vector<float>& down, int64_t out, float scale) {
  for (int64_t o = 0; o < out; ++o)
    for (int64_t i = 0; i < in; ++i) {
      double s = 0;
      for (int64_t r = 0; r < kRank; ++r) s += double(up[o * kRank + r]) * down[r * in + i];
      w[static_cast<size_t>((row0 + o) * in + i)] += static_cast<float>(scale * s);
    }
}

std::vector<float> merged(const LoraFile& f, const std::string& target, float multiplier) {
  const Shape ne = tiny_flux().at(target);
  std::vector<float> w(static_cast<size_t>(ne[0] * ne[1] * ne[2] * ne[3]), 0.0f);
  for (const LoraUpdate& u : f.updates)
    if (u.target == target) add_lora_delta(u, multiplier, ne, w.data());
  return w;
}

void expect_near_all(const std::vector<float>& got, const std::vector<float>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_NEAR(got[i], want[i], 1e-4f * (1.0f + std::fabs(want[i]))) << "at " << i;
}

TEST(FluxLora, KohyaNamesChangeTheFusedWeightsWhole) {
  Writer w;
  const auto& up =
      w.add("lora_unet_double_blocks_0_img_attn_qkv.lora_up.weight", {3 * kHidden, kRank}, 1);
  const auto& down =
      w.add("lora_unet_double_blocks_0_img_attn_qkv.lora_down.weight", {kRank, kHidden}, 2);
  w.scalar("lora_unet_double_blocks_0_img_attn_qkv.alpha", 1.0f);
  const auto& up2 = w.add("lora_unet_single_blocks_1_linear2.lora_up.weight", {kHidden, kRank}, 3);
  const auto& down2 =
      w.add("lora_unet_single_blocks_1_linear2.lora_down.weight", {kRank, kHidden + kMlp}, 4);
  const io::test::TempDir dir;
  const LoraFile f = read_lora(w.save(dir, "kohya.safetensors"), tiny_flux());
  EXPECT_TRUE(f.unmatched.empty());
  ASSERT_EQ(f.updates.size(), 2u);
  std::vector<float> want(3 * kHidden * kHidden, 0.0f);
  add_product(want, kHidden, 0, up, down, 3 * kHidden, 0.5f * 0.7f);  // alpha / rank
  expect_near_all(merged(f, kQkv, 0.7f), want);
  std::vector<float> want2(kHidden * (kHidden + kMlp), 0.0f);
  add_product(want2, kHidden + kMlp, 0, up2, down2, kHidden, 1.0f);
  expect_near_all(merged(f, kLinear2, 1.0f), want2);
}

TEST(FluxLora, DiffusersQkvAndMlpChangeTheirRowsOfTheFusedWeights) {
  Writer w;
  const std::string d = "transformer.transformer_blocks.0.attn.";
  const std::string s = "transformer.single_transformer_blocks.1.";
  struct Part {
    std::string stem;
    int64_t row0, rows;
  };
  const Part double_parts[] = {
      {d + "to_q", 0, kHidden}, {d + "to_k", kHidden, kHidden}, {d + "to_v", 2 * kHidden, kHidden}};
  const Part single_parts[] = {{s + "attn.to_q", 0, kHidden},
                               {s + "attn.to_k", kHidden, kHidden},
                               {s + "attn.to_v", 2 * kHidden, kHidden},
                               {s + "proj_mlp", 3 * kHidden, kMlp}};
  std::vector<float> want_qkv(3 * kHidden * kHidden, 0.0f);
  std::vector<float> want_l1((3 * kHidden + kMlp) * kHidden, 0.0f);
  uint32_t seed = 10;
  for (const Part& p : double_parts) {
    const auto& down = w.add(p.stem + ".lora_A.weight", {kRank, kHidden}, seed++);
    const auto& up =
        w.add(p.stem + ".lora_B.weight", {static_cast<uint64_t>(p.rows), kRank}, seed++);
    add_product(want_qkv, kHidden, p.row0, up, down, p.rows, 1.0f);
  }
  for (const Part& p : single_parts) {
    const auto& down = w.add(p.stem + ".lora_A.weight", {kRank, kHidden}, seed++);
    const auto& up =
        w.add(p.stem + ".lora_B.weight", {static_cast<uint64_t>(p.rows), kRank}, seed++);
    w.scalar(p.stem + ".alpha", 4.0f);  // scale alpha / rank = 2
    add_product(want_l1, kHidden, p.row0, up, down, p.rows, 2.0f);
  }
  // A whole weight under its diffusers name, and the model's input embedding.
  const auto& pd = w.add(d + "to_out.0.lora_A.weight", {kRank, kHidden}, 40);
  const auto& pu = w.add(d + "to_out.0.lora_B.weight", {kHidden, kRank}, 41);
  w.add("transformer.x_embedder.lora_A.weight", {kRank, 4}, 42);
  w.add("transformer.x_embedder.lora_B.weight", {kHidden, kRank}, 43);
  const io::test::TempDir dir;
  const LoraFile f = read_lora(w.save(dir, "diffusers.safetensors"), tiny_flux());
  EXPECT_TRUE(f.unmatched.empty()) << f.unmatched.front();
  EXPECT_EQ(f.updates.size(), 3u + 4u + 2u);
  expect_near_all(merged(f, kQkv, 1.0f), want_qkv);
  expect_near_all(merged(f, kLinear1, 1.0f), want_l1);
  std::vector<float> want_proj(kHidden * kHidden, 0.0f);
  add_product(want_proj, kHidden, 0, pu, pd, kHidden, 1.0f);
  expect_near_all(merged(f, kProj, 1.0f), want_proj);
  // The other rows of the fused weight: untouched by the to_k part alone.
  for (const LoraUpdate& u : f.updates) {
    if (u.target != kQkv || u.keys.front().find("to_k") == std::string::npos) continue;
    const std::vector<float> delta = lora_delta(u);
    for (int64_t i = 0; i < kHidden * kHidden; ++i) EXPECT_EQ(delta[static_cast<size_t>(i)], 0.0f);
    for (int64_t i = 2 * kHidden * kHidden; i < 3 * kHidden * kHidden; ++i)
      EXPECT_EQ(delta[static_cast<size_t>(i)], 0.0f);
  }
}

TEST(FluxLora, AStableDiffusionLoraChangesNothingAndIsReported) {
  Writer w;
  w.add("lora_unet_down_blocks_0_attentions_0_proj_in.lora_up.weight", {8, kRank}, 1);
  w.add("lora_unet_down_blocks_0_attentions_0_proj_in.lora_down.weight", {kRank, 8}, 2);
  w.add("lora_te_text_model_encoder_layers_0_self_attn_q_proj.lora_up.weight", {8, kRank}, 3);
  w.add("lora_te_text_model_encoder_layers_0_self_attn_q_proj.lora_down.weight", {kRank, 8}, 4);
  const io::test::TempDir dir;
  const LoraFile f = read_lora(w.save(dir, "sd1.safetensors"), tiny_flux());
  EXPECT_TRUE(f.updates.empty());
  EXPECT_EQ(f.unmatched.size(), 4u);
}

TEST(FluxLora, APartOfTheWrongWidthNamesTheKey) {
  Writer w;
  w.add("transformer.transformer_blocks.0.attn.to_k.lora_A.weight", {kRank, kHidden}, 1);
  w.add("transformer.transformer_blocks.0.attn.to_k.lora_B.weight", {kHidden + 1, kRank}, 2);
  const io::test::TempDir dir;
  io::test::expect_error([&] { read_lora(w.save(dir, "bad.safetensors"), tiny_flux()); },
                         {"to_k.lora_B.weight"});
}

TEST(FluxLoraNames, DiffusersSpellingsOfBflWeights) {
  const auto q = flux_diffusers_spellings("double_blocks.3.img_attn.qkv");
  ASSERT_EQ(q.size(), 3u);
  EXPECT_EQ(q[1].diffusers, "transformer_blocks.3.attn.to_k");
  EXPECT_EQ(q[1].part, 1);
  const auto l1 = flux_diffusers_spellings("single_blocks.12.linear1");
  ASSERT_EQ(l1.size(), 4u);
  EXPECT_EQ(l1[3].diffusers, "single_transformer_blocks.12.proj_mlp");
  EXPECT_EQ(flux_diffusers_spellings("final_layer.adaLN_modulation.1")[0].diffusers,
            "norm_out.linear");
  EXPECT_EQ(flux_diffusers_spellings("double_blocks.0.txt_mod.lin")[0].part, -1);
  EXPECT_TRUE(flux_diffusers_spellings("input_blocks.1.1.proj_in").empty());
  EXPECT_EQ(flux_fused_rows(3, 8, 36).begin, 24);
  EXPECT_EQ(flux_fused_rows(3, 8, 36).count, 12);
}

}  // namespace
}  // namespace sd::weights
