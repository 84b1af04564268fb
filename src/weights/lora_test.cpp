#include "weights/lora.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "io/io_test_util.h"
#include "io/name_conversion.h"
#include "tensor/error.h"
#include "tensor/quant/quant.h"
#include "weights/lora_names.h"
#include "weights/lora_test_util.h"

namespace sd::weights {
namespace {

using io::test::expect_error;

// A few weights of a tiny SD1-style model, LDM names, engine shapes.
const std::string kToQ =
    "model.diffusion_model.input_blocks.1.1.transformer_blocks.0.attn1.to_q.weight";
const std::string kToOut =
    "model.diffusion_model.input_blocks.1.1.transformer_blocks.0.attn1.to_out.0.weight";
const std::string kFf =
    "model.diffusion_model.input_blocks.1.1.transformer_blocks.0.ff.net.0.proj.weight";
const std::string kProjIn = "model.diffusion_model.input_blocks.1.1.proj_in.weight";
const std::string kProjInBias = "model.diffusion_model.input_blocks.1.1.proj_in.bias";
const std::string kConv = "model.diffusion_model.input_blocks.1.0.in_layers.2.weight";
const std::string kUpsample = "model.diffusion_model.output_blocks.2.1.conv.weight";
const std::string kTimeEmbed = "model.diffusion_model.time_embed.0.weight";
const std::string kTeQ =
    "cond_stage_model.transformer.text_model.encoder.layers.0.self_attn.q_proj.weight";
const std::string kVaeConv = "first_stage_model.decoder.conv_in.weight";

std::map<std::string, Shape> tiny_model() {
  return {
      {kToQ, {8, 8, 1, 1}},      {kToOut, {8, 8, 1, 1}},      {kFf, {8, 12, 1, 1}},
      {kProjIn, {1, 1, 6, 8}},   {kProjInBias, {8, 1, 1, 1}}, {kConv, {3, 3, 4, 6}},
      {kUpsample, {3, 3, 6, 6}}, {kTimeEmbed, {4, 10, 1, 1}}, {kTeQ, {5, 5, 1, 1}},
      {kVaeConv, {3, 3, 4, 5}},
  };
}

int64_t count(const Shape& ne) {
  return ne[0] * ne[1] * ne[2] * ne[3];
}

// Builds a LoRA file tensor by tensor, shapes given as PyTorch gives them (slowest first),
// and remembers the values as stored (f16 rounding included).
class LoraWriter {
 public:
  explicit LoraWriter(DType matrix_type = DType::F32) : type_(matrix_type) {}
  const std::vector<float>& add(const std::string& key, const std::vector<uint64_t>& shape,
                                uint32_t seed) {
    int64_t n = 1;
    for (uint64_t d : shape) n *= static_cast<int64_t>(d);
    std::vector<float> v = sd::test::lcg_values(n, seed);
    io::test::Bytes bytes(row_size(type_, n));
    quantize_row(type_, v.data(), bytes.data(), n);
    dequantize_row(type_, bytes.data(), v.data(), n);
    file_.add(key, type_ == DType::F16 ? "F16" : "F32", shape, bytes);
    return stored_[key] = v;
  }
  // A 0-dim tensor, as kohya stores alpha.
  void scalar(const std::string& key, float v) {
    io::test::Bytes bytes(4);
    std::memcpy(bytes.data(), &v, 4);
    file_.add(key, "F32", {}, bytes);
    stored_[key] = {v};
  }
  const std::vector<float>& operator[](const std::string& key) const { return stored_.at(key); }
  std::string save(const io::test::TempDir& dir, const std::string& name) const {
    const std::string path = dir.file(name);
    io::test::write_file(path, file_.bytes());
    return path;
  }

 private:
  DType type_;
  io::test::SafetensorsBuilder file_;
  std::map<std::string, std::vector<float>> stored_;
};

// PyTorch-index reference: delta[o][k] = scale * sum_r up[o][r] * down[r][k], k running
// over the flattened (in, kh, kw).
std::vector<float> reference_product(const std::vector<float>& up, const std::vector<float>& down,
                                     int64_t out, int64_t rank, float scale) {
  const int64_t k = static_cast<int64_t>(down.size()) / rank;
  std::vector<float> d(static_cast<size_t>(out * k));
  for (int64_t o = 0; o < out; ++o)
    for (int64_t i = 0; i < k; ++i) {
      double s = 0;
      for (int64_t r = 0; r < rank; ++r) s += double(up[o * rank + r]) * down[r * k + i];
      d[o * k + i] = static_cast<float>(scale * s);
    }
  return d;
}

const LoraUpdate& update_for(const LoraFile& f, const std::string& target) {
  for (const LoraUpdate& u : f.updates)
    if (u.target == target) return u;
  throw std::runtime_error("no update for " + target);
}

void expect_near_all(const std::vector<float>& got, const std::vector<float>& want,
                     float tol = 1e-5f) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_NEAR(got[i], want[i], tol * (1.0f + std::fabs(want[i]))) << "at " << i;
}

// Merges into a copy of `base` and checks the change is multiplier * want.
void expect_merge(const LoraUpdate& u, float multiplier, const std::vector<float>& want) {
  const std::vector<float> base = sd::test::lcg_values(count(u.target_ne), 99);
  std::vector<float> w = base;
  add_lora_delta(u, multiplier, u.target_ne, w.data());
  std::vector<float> change(w.size());
  for (size_t i = 0; i < w.size(); ++i) change[i] = w[i] - base[i];
  std::vector<float> expected = want;
  for (float& x : expected) x *= multiplier;
  expect_near_all(change, expected, 1e-4f);
}

bool contains(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

// ---------------------------------------------------------------------------------------
// Names.

TEST(LoraNames, DiffusersNamesRoundTripThroughTheLoaderRules) {
  const std::vector<std::string> sd = {
      "conv_in.weight",
      "time_embedding.linear_1.weight",
      "time_embedding.linear_2.bias",
      "down_blocks.0.resnets.0.norm1.weight",
      "down_blocks.0.resnets.1.conv1.weight",
      "down_blocks.1.resnets.0.conv_shortcut.weight",
      "down_blocks.2.resnets.1.time_emb_proj.weight",
      "down_blocks.3.resnets.1.conv2.bias",
      "down_blocks.0.attentions.1.proj_in.weight",
      "down_blocks.2.attentions.0.transformer_blocks.0.attn2.to_k.weight",
      "down_blocks.1.downsamplers.0.conv.weight",
      "mid_block.resnets.0.norm2.weight",
      "mid_block.resnets.1.conv2.weight",
      "mid_block.attentions.0.transformer_blocks.0.ff.net.0.proj.weight",
      "up_blocks.0.resnets.2.conv1.weight",
      "up_blocks.0.upsamplers.0.conv.weight",
      "up_blocks.1.upsamplers.0.conv.weight",
      "up_blocks.3.attentions.2.proj_out.weight",
      "up_blocks.2.resnets.0.conv_shortcut.bias",
      "conv_norm_out.weight",
      "conv_out.weight",
  };
  for (const std::string& d : sd) {
    const std::string ldm = io::to_canonical(d, io::SourceLayout::DiffusersUnet, "");
    const std::string rel = ldm.substr(io::kUnetRoot.size());
    EXPECT_EQ(ldm_to_diffusers_unet(rel).value_or("<none>"), d) << ldm;
  }
  // SDXL: attention in the two deeper up levels, so the upsampler index differs.
  const std::vector<std::string> xl = {
      "add_embedding.linear_1.weight",
      "up_blocks.0.upsamplers.0.conv.weight",
      "up_blocks.1.upsamplers.0.conv.weight",
      "up_blocks.0.attentions.2.transformer_blocks.9.attn1.to_v.weight",
      "down_blocks.2.attentions.1.proj_in.weight",
  };
  for (const std::string& d : xl) {
    const std::string ldm = io::to_canonical(d, io::SourceLayout::DiffusersUnetXl, "");
    const std::string rel = ldm.substr(io::kUnetRoot.size());
    EXPECT_EQ(ldm_to_diffusers_unet(rel).value_or("<none>"), d) << ldm;
  }
  EXPECT_FALSE(ldm_to_diffusers_unet("input_blocks.3.1.proj_in.weight"));  // a Downsample slot
  EXPECT_FALSE(ldm_to_diffusers_unet("something.else.weight"));
}

TEST(LoraNames, IndexFindsEveryTrainersSpelling) {
  const LoraNameIndex index(tiny_model());
  const std::string to_q = kToQ.substr(0, kToQ.size() - 7);
  for (const char* stem : {
           "lora_unet_down_blocks_0_attentions_0_transformer_blocks_0_attn1_to_q",
           "lora_unet_input_blocks_1_1_transformer_blocks_0_attn1_to_q",
           "unet.down_blocks.0.attentions.0.transformer_blocks.0.attn1.to_q",
           "down_blocks.0.attentions.0.transformer_blocks.0.attn1.to_q",
           "model.diffusion_model.input_blocks.1.1.transformer_blocks.0.attn1.to_q",
           "diffusion_model.input_blocks.1.1.transformer_blocks.0.attn1.to_q",
       })
    EXPECT_EQ(index.find(stem).value_or("<none>"), to_q) << stem;
  const std::string te_q = kTeQ.substr(0, kTeQ.size() - 7);
  for (const char* stem : {"lora_te_text_model_encoder_layers_0_self_attn_q_proj",
                           "lora_te1_text_model_encoder_layers_0_self_attn_q_proj",
                           "text_encoder.text_model.encoder.layers.0.self_attn.q_proj",
                           "te1.text_model.encoder.layers.0.self_attn.q_proj"})
    EXPECT_EQ(index.find(stem).value_or("<none>"), te_q) << stem;
  EXPECT_EQ(index.find("lora_unet_up_blocks_0_upsamplers_0_conv").value_or("<none>"),
            "model.diffusion_model.output_blocks.2.1.conv");
  EXPECT_EQ(index.find("lora_unet_time_embedding_linear_1").value_or("<none>"),
            "model.diffusion_model.time_embed.0");
  EXPECT_EQ(index.find("lora_vae_decoder_conv_in").value_or("<none>"),
            "first_stage_model.decoder.conv_in");
  // Old attention processors call the output projection to_out.
  EXPECT_EQ(index.find("unet.down_blocks.0.attentions.0.transformer_blocks.0.attn1.to_out")
                .value_or("<none>"),
            kToOut.substr(0, kToOut.size() - 7));
  // The second (SDXL) text encoder is not in this model; a text stem is not a UNet one.
  EXPECT_FALSE(index.find("lora_te2_text_model_encoder_layers_0_self_attn_q_proj"));
  EXPECT_FALSE(index.find("lora_unet_text_model_encoder_layers_0_self_attn_q_proj"));
  EXPECT_FALSE(index.find("lora_unet_down_blocks_0_attentions_0_transformer_blocks_0_attn1_to_k"));
}

// SDXL's LoRAs: kohya's lora_te1_/lora_te2_ for CLIP-L and OpenCLIP-bigG (after the
// loader's rename to HF names), lora_unet_ in LDM or diffusers spelling over SDXL's blocks
// (3 levels, 10 transformer blocks at the last), PEFT's unet./text_encoder_2. prefixes.
TEST(LoraNames, SdxlSpellingsReachBothEncodersAndTheDeepBlocks) {
  const std::string te1 =
      "cond_stage_model.transformer.text_model.encoder.layers.0.self_attn.q_proj";
  const std::string te2 = "cond_stage_model.1.transformer.text_model.encoder.layers.31.mlp.fc1";
  const std::string in = "model.diffusion_model.input_blocks.8.1.transformer_blocks.9.attn2.to_k";
  const std::string out = "model.diffusion_model.output_blocks.2.1.transformer_blocks.9.ff.net.2";
  const std::string label = "model.diffusion_model.label_emb.0.0";
  const std::string mid = "model.diffusion_model.middle_block.1.transformer_blocks.3.attn1.to_v";
  const LoraNameIndex index({{te1 + ".weight", {768, 768, 1, 1}},
                             {te2 + ".weight", {1280, 5120, 1, 1}},
                             {in + ".weight", {2048, 1280, 1, 1}},
                             {out + ".weight", {5120, 1280, 1, 1}},
                             {label + ".weight", {2816, 1280, 1, 1}},
                             {mid + ".weight", {1280, 1280, 1, 1}}});
  const std::pair<const char*, std::string> cases[] = {
      {"lora_te1_text_model_encoder_layers_0_self_attn_q_proj", te1},
      {"text_encoder.text_model.encoder.layers.0.self_attn.q_proj", te1},
      {"lora_te2_text_model_encoder_layers_31_mlp_fc1", te2},
      {"text_encoder_2.text_model.encoder.layers.31.mlp.fc1", te2},
      {"lora_unet_input_blocks_8_1_transformer_blocks_9_attn2_to_k", in},
      {"lora_unet_down_blocks_2_attentions_1_transformer_blocks_9_attn2_to_k", in},
      {"unet.down_blocks.2.attentions.1.transformer_blocks.9.attn2.to_k", in},
      {"lora_unet_output_blocks_2_1_transformer_blocks_9_ff_net_2", out},
      {"lora_unet_up_blocks_0_attentions_2_transformer_blocks_9_ff_net_2", out},
      {"lora_unet_add_embedding_linear_1", label},
      {"lora_unet_mid_block_attentions_0_transformer_blocks_3_attn1_to_v", mid},
  };
  for (const auto& [stem, want] : cases)
    EXPECT_EQ(index.find(stem).value_or("<none>"), want) << stem;
  // CLIP-L's keys do not reach bigG.
  EXPECT_FALSE(index.find("lora_te2_text_model_encoder_layers_0_self_attn_q_proj"));
}

// ---------------------------------------------------------------------------------------
// Formats.

class Lora : public ::testing::Test {
 protected:
  io::test::TempDir dir;
  std::map<std::string, Shape> model = tiny_model();
};

TEST_F(Lora, KohyaFileMapsLinearConvAndTextEncoderKeys) {
  LoraWriter w;
  const std::string q = "lora_unet_down_blocks_0_attentions_0_transformer_blocks_0_attn1_to_q";
  w.add(q + ".lora_up.weight", {8, 2}, 1);    // [out 8, r 2]
  w.add(q + ".lora_down.weight", {2, 8}, 2);  // [r 2, in 8]
  w.scalar(q + ".alpha", 1.0f);
  // LDM underscore spelling; a Linear LoRA on SD1's 1x1-conv proj_in.
  const std::string p = "lora_unet_input_blocks_1_1_proj_in";
  w.add(p + ".lora_up.weight", {8, 4}, 3);
  w.add(p + ".lora_down.weight", {4, 6}, 4);
  w.scalar(p + ".alpha", 8.0f);
  // LoCon: 3x3 down, 1x1 up, on a ResBlock conv.
  const std::string c = "lora_unet_down_blocks_0_resnets_0_conv1";
  w.add(c + ".lora_up.weight", {6, 3, 1, 1}, 5);
  w.add(c + ".lora_down.weight", {3, 4, 3, 3}, 6);
  // Text encoder.
  const std::string t = "lora_te_text_model_encoder_layers_0_self_attn_q_proj";
  w.add(t + ".lora_up.weight", {5, 2}, 7);
  w.add(t + ".lora_down.weight", {2, 5}, 8);
  w.scalar(t + ".alpha", 3.0f);
  // Keys the model does not have.
  w.add("lora_te2_text_model_encoder_layers_0_self_attn_q_proj.lora_up.weight", {5, 2}, 9);
  w.add("lora_unet_down_blocks_9_resnets_0_conv1.lora_up.weight", {5, 2}, 10);
  w.add("lora_unet_something_weird", {2}, 11);
  const std::string path = w.save(dir, "kohya.safetensors");

  const LoraFile f = read_lora(path, model);
  EXPECT_EQ(f.path, path);
  ASSERT_EQ(f.updates.size(), 4u);
  EXPECT_EQ(f.unmatched.size(), 3u);
  EXPECT_TRUE(contains(f.unmatched, "lora_unet_something_weird"));
  EXPECT_TRUE(contains(f.unmatched, "lora_unet_down_blocks_9_resnets_0_conv1.lora_up.weight"));

  const LoraUpdate& uq = update_for(f, kToQ);
  EXPECT_EQ(uq.kind, LoraKind::LowRank);
  EXPECT_EQ(uq.rank, 2);
  EXPECT_FLOAT_EQ(uq.alpha, 1.0f);
  EXPECT_FLOAT_EQ(uq.scale, 0.5f);
  expect_merge(uq, 0.7f,
               reference_product(w[q + ".lora_up.weight"], w[q + ".lora_down.weight"], 8, 2, 0.5f));

  const LoraUpdate& up = update_for(f, kProjIn);
  EXPECT_FLOAT_EQ(up.scale, 2.0f);
  expect_merge(up, 1.0f,
               reference_product(w[p + ".lora_up.weight"], w[p + ".lora_down.weight"], 8, 4, 2.0f));

  const LoraUpdate& uc = update_for(f, kConv);
  EXPECT_EQ(uc.rank, 3);
  EXPECT_FLOAT_EQ(uc.alpha, 3.0f);  // no alpha stored: alpha = rank
  EXPECT_FLOAT_EQ(uc.scale, 1.0f);
  expect_merge(uc, -1.0f,
               reference_product(w[c + ".lora_up.weight"], w[c + ".lora_down.weight"], 6, 3, 1.0f));

  const LoraUpdate& ut = update_for(f, kTeQ);
  EXPECT_FLOAT_EQ(ut.scale, 1.5f);
  expect_merge(ut, 1.0f,
               reference_product(w[t + ".lora_up.weight"], w[t + ".lora_down.weight"], 5, 2, 1.5f));
}

TEST_F(Lora, DiffusersAndPeftKeysMapToTheSameWeights) {
  LoraWriter w(DType::F16);  // factors stored as f16 are read as f32
  const std::string q = "unet.down_blocks.0.attentions.0.transformer_blocks.0.attn1.to_q";
  w.add(q + ".lora_B.weight", {8, 3}, 1);
  w.add(q + ".lora_A.weight", {3, 8}, 2);
  const std::string t = "text_encoder.text_model.encoder.layers.0.self_attn.q_proj";
  w.add(t + ".lora_B.weight", {5, 1}, 3);
  w.add(t + ".lora_A.weight", {1, 5}, 4);
  w.scalar(t + ".alpha", 0.25f);
  // Old attention-processor style.
  const std::string o =
      "unet.down_blocks.0.attentions.0.transformer_blocks.0.attn1.processor.to_out_lora";
  w.add(o + ".up.weight", {8, 2}, 5);
  w.add(o + ".down.weight", {2, 8}, 6);
  // LoRACompatible layers.
  const std::string ff = "unet.down_blocks.0.attentions.0.transformer_blocks.0.ff.net.0.proj";
  w.add(ff + ".lora.up.weight", {12, 2}, 7);
  w.add(ff + ".lora.down.weight", {2, 8}, 8);
  const LoraFile f = read_lora(w.save(dir, "peft.safetensors"), model);
  ASSERT_EQ(f.updates.size(), 4u);
  EXPECT_TRUE(f.unmatched.empty());

  const LoraUpdate& uq = update_for(f, kToQ);
  EXPECT_FLOAT_EQ(uq.scale, 1.0f);
  expect_merge(uq, 1.0f,
               reference_product(w[q + ".lora_B.weight"], w[q + ".lora_A.weight"], 8, 3, 1.0f));
  const LoraUpdate& ut = update_for(f, kTeQ);
  EXPECT_EQ(ut.rank, 1);
  EXPECT_FLOAT_EQ(ut.scale, 0.25f);
  expect_merge(ut, 2.0f,
               reference_product(w[t + ".lora_B.weight"], w[t + ".lora_A.weight"], 5, 1, 0.25f));
  const LoraUpdate& uo = update_for(f, kToOut);
  expect_merge(uo, 1.0f, reference_product(w[o + ".up.weight"], w[o + ".down.weight"], 8, 2, 1.0f));
  const LoraUpdate& uf = update_for(f, kFf);
  expect_merge(
      uf, 1.0f,
      reference_product(w[ff + ".lora.up.weight"], w[ff + ".lora.down.weight"], 12, 2, 1.0f));
}

TEST_F(Lora, LoconTuckerCoreRebuildsTheConv) {
  LoraWriter w;
  const std::string c = "lora_unet_up_blocks_0_upsamplers_0_conv";     // {3, 3, 6, 6}
  const auto& up = w.add(c + ".lora_up.weight", {6, 2, 1, 1}, 1);      // [out 6, r 2, 1, 1]
  const auto& mid = w.add(c + ".lora_mid.weight", {2, 3, 3, 3}, 2);    // [r_up 2, r_down 3, 3, 3]
  const auto& down = w.add(c + ".lora_down.weight", {3, 6, 1, 1}, 3);  // [r 3, in 6, 1, 1]
  w.scalar(c + ".alpha", 1.5f);
  const LoraFile f = read_lora(w.save(dir, "tucker.safetensors"), model);
  const LoraUpdate& u = update_for(f, kUpsample);
  EXPECT_EQ(u.rank, 3);
  EXPECT_FLOAT_EQ(u.scale, 0.5f);
  // delta[o][i][y][x] = sum_ab up[o][a] * mid[a][b][y][x] * down[b][i]
  std::vector<float> want(6 * 6 * 9);
  for (int o = 0; o < 6; ++o)
    for (int i = 0; i < 6; ++i)
      for (int s = 0; s < 9; ++s) {
        double v = 0;
        for (int a = 0; a < 2; ++a)
          for (int b = 0; b < 3; ++b)
            v += double(up[o * 2 + a]) * mid[(a * 3 + b) * 9 + s] * down[b * 6 + i];
        want[(o * 6 + i) * 9 + s] = static_cast<float>(0.5 * v);
      }
  expect_merge(u, 1.0f, want);
}

TEST_F(Lora, LohaIsTheHadamardProductOfTwoLowRankProducts) {
  LoraWriter w;
  const std::string c = "lora_unet_down_blocks_0_resnets_0_conv1";  // {3, 3, 4, 6}
  const auto& w1a = w.add(c + ".hada_w1_a", {6, 2}, 1);
  const auto& w1b = w.add(c + ".hada_w1_b", {2, 36}, 2);
  const auto& w2a = w.add(c + ".hada_w2_a", {6, 2}, 3);
  const auto& w2b = w.add(c + ".hada_w2_b", {2, 36}, 4);
  w.scalar(c + ".alpha", 1.0f);
  const LoraFile f = read_lora(w.save(dir, "loha.safetensors"), model);
  const LoraUpdate& u = update_for(f, kConv);
  EXPECT_EQ(u.kind, LoraKind::Hadamard);
  EXPECT_FLOAT_EQ(u.scale, 0.5f);
  std::vector<float> want = reference_product(w1a, w1b, 6, 2, 0.5f);
  const std::vector<float> second = reference_product(w2a, w2b, 6, 2, 1.0f);
  for (size_t i = 0; i < want.size(); ++i) want[i] *= second[i];
  expect_merge(u, 1.0f, want);
}

// torch.kron of w1 [a, b] and w2 [c, d, s] (s: the flattened kernel, 1 for a Linear).
std::vector<float> reference_kron(const std::vector<float>& w1, int64_t a, int64_t b,
                                  const std::vector<float>& w2, int64_t c, int64_t d, int64_t s,
                                  float scale) {
  std::vector<float> k(static_cast<size_t>(a * c * b * d * s));
  for (int64_t i1 = 0; i1 < a; ++i1)
    for (int64_t i2 = 0; i2 < c; ++i2)
      for (int64_t j1 = 0; j1 < b; ++j1)
        for (int64_t j2 = 0; j2 < d; ++j2)
          for (int64_t x = 0; x < s; ++x)
            k[(((i1 * c + i2) * b + j1) * d + j2) * s + x] =
                scale * w1[i1 * b + j1] * w2[(i2 * d + j2) * s + x];
  return k;
}

TEST_F(Lora, LokrIsTheKroneckerProductOfItsFactors) {
  LoraWriter w;
  // Linear [12, 8] = w1 [3, 2] (x) (w2_a [4, 2] x w2_b [2, 4]).
  const std::string ff = "lora_unet_down_blocks_0_attentions_0_transformer_blocks_0_ff_net_0_proj";
  const auto& w1 = w.add(ff + ".lokr_w1", {3, 2}, 1);
  const auto& w2a = w.add(ff + ".lokr_w2_a", {4, 2}, 2);
  const auto& w2b = w.add(ff + ".lokr_w2_b", {2, 4}, 3);
  w.scalar(ff + ".alpha", 1.0f);
  // Conv [6, 4, 3, 3] = (w1_a [2, 1] x w1_b [1, 2]) (x) w2 [3, 2, 3, 3].
  const std::string c = "lora_unet_down_blocks_0_resnets_0_conv1";
  const auto& w1a = w.add(c + ".lokr_w1_a", {2, 1}, 4);
  const auto& w1b = w.add(c + ".lokr_w1_b", {1, 2}, 5);
  const auto& w2 = w.add(c + ".lokr_w2", {3, 2, 3, 3}, 6);
  w.scalar(c + ".alpha", 4.0f);
  const LoraFile f = read_lora(w.save(dir, "lokr.safetensors"), model);
  ASSERT_EQ(f.updates.size(), 2u);

  const LoraUpdate& uf = update_for(f, kFf);
  EXPECT_EQ(uf.kind, LoraKind::Kronecker);
  EXPECT_EQ(uf.rank, 2);
  EXPECT_FLOAT_EQ(uf.scale, 0.5f);
  expect_merge(uf, 1.0f,
               reference_kron(w1, 3, 2, reference_product(w2a, w2b, 4, 2, 1.0f), 4, 4, 1, 0.5f));

  const LoraUpdate& uc = update_for(f, kConv);
  EXPECT_FLOAT_EQ(uc.scale, 1.0f);  // rank 1: alpha is not used (sd.cpp's rule)
  expect_merge(uc, 1.0f,
               reference_kron(reference_product(w1a, w1b, 2, 1, 1.0f), 2, 2, w2, 3, 2, 9, 1.0f));
}

TEST_F(Lora, FullDifferencesChangeWeightsAndBiases) {
  LoraWriter w;
  const auto& dw = w.add("lora_unet_time_embedding_linear_1.diff", {10, 4}, 1);
  const auto& db = w.add("lora_unet_input_blocks_1_1_proj_in.diff_b", {8}, 2);
  const LoraFile f = read_lora(w.save(dir, "diff.safetensors"), model);
  ASSERT_EQ(f.updates.size(), 2u);
  EXPECT_EQ(update_for(f, kTimeEmbed).kind, LoraKind::Full);
  expect_merge(update_for(f, kTimeEmbed), 0.5f, dw);
  expect_merge(update_for(f, kProjInBias), 1.0f, db);
}

// ---------------------------------------------------------------------------------------
// Errors.

TEST_F(Lora, FactorsThatDoNotFitTheirWeightNameTheKeyAndFile) {
  LoraWriter w;
  const std::string q = "lora_unet_down_blocks_0_attentions_0_transformer_blocks_0_attn1_to_q";
  w.add(q + ".lora_up.weight", {8, 2}, 1);
  w.add(q + ".lora_down.weight", {2, 16}, 2);  // in 16, the weight's is 8
  const std::string path = w.save(dir, "misfit.safetensors");
  expect_error([&] { read_lora(path, model); }, {path, q + ".lora_down.weight", "does not fit"});

  LoraWriter up_wrong;
  up_wrong.add(q + ".lora_up.weight", {4, 2}, 1);  // out 4, the weight's is 8
  up_wrong.add(q + ".lora_down.weight", {2, 8}, 2);
  const std::string p2 = up_wrong.save(dir, "misfit_up.safetensors");
  expect_error([&] { read_lora(p2, model); }, {p2, q + ".lora_up.weight"});

  LoraWriter diff_wrong;
  diff_wrong.add("lora_unet_time_embedding_linear_1.diff", {4, 4}, 1);
  const std::string p3 = diff_wrong.save(dir, "misfit_diff.safetensors");
  expect_error([&] { read_lora(p3, model); }, {p3, "lora_unet_time_embedding_linear_1.diff"});
}

TEST_F(Lora, AFactorWithoutItsPartnerIsAnError) {
  LoraWriter w;
  w.add("lora_unet_down_blocks_0_resnets_0_conv1.lora_up.weight", {6, 3, 1, 1}, 1);
  const std::string path = w.save(dir, "half.safetensors");
  expect_error([&] { read_lora(path, model); },
               {path, "lora_unet_down_blocks_0_resnets_0_conv1.lora_up.weight", "partner"});
}

TEST_F(Lora, MissingOrCorruptFilesNameTheFile) {
  const std::string missing = dir.file("nope.safetensors");
  expect_error([&] { read_lora(missing, model); }, {missing, "LoRA"});
  const std::string corrupt = dir.file("corrupt.safetensors");
  io::test::write_file(corrupt, io::test::random_bytes(300, 7));
  expect_error([&] { read_lora(corrupt, model); }, {corrupt, "LoRA"});
}

TEST_F(Lora, MergingIntoAWeightOfAnotherShapeIsRefused) {
  LoraWriter w;
  const std::string t = "lora_te_text_model_encoder_layers_0_self_attn_q_proj";
  w.add(t + ".lora_up.weight", {5, 2}, 1);
  w.add(t + ".lora_down.weight", {2, 5}, 2);
  const LoraFile f = read_lora(w.save(dir, "te.safetensors"), model);
  std::vector<float> wrong(36);
  expect_error([&] { add_lora_delta(f.updates.at(0), 1.0f, {6, 6, 1, 1}, wrong.data()); }, {kTeQ});
}

}  // namespace
}  // namespace sd::weights
