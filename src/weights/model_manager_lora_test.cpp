// LoRA through the ModelManager: merged when a weight becomes resident, re-merged when the
// set changes, gone when it is dropped.
#include <gtest/gtest.h>

#include "backend/registry.h"
#include "io/io_test_util.h"
#include "nn/graph_runner.h"
#include "nn/random_weights.h"
#include "tensor/error.h"
#include "tensor/ops/cast.h"
#include "tensor/quant/quant.h"
#include "weights/model_manager.h"

namespace sd::weights {
namespace {

const char* kQ = "cond_stage_model.transformer.text_model.encoder.layers.0.self_attn.q_proj.weight";
constexpr int64_t kDim = 32, kLoraRank = 4;  // 32: a whole q8_0 block per row

class ManagerLora : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = dir_.file("model.safetensors");
    nn::RandomWeights w(DType::F16, 3);
    Context ctx;
    w.get(ctx, kQ, make_shape({kDim, kDim}));
    w.save_safetensors(model_);
    lora_ = dir_.file("style.safetensors");
    up_.resize(kDim * kLoraRank);
    down_.resize(kLoraRank * kDim);
    for (size_t i = 0; i < up_.size(); ++i) up_[i] = 0.01f * static_cast<float>(i % 11) - 0.05f;
    for (size_t i = 0; i < down_.size(); ++i) down_[i] = 0.02f * static_cast<float>(i % 7) - 0.06f;
    nn::RandomWeights l;
    const std::string stem = "lora_te_text_model_encoder_layers_0_self_attn_q_proj";
    l.set(stem + ".lora_up.weight", make_shape({kLoraRank, kDim}), up_);
    l.set(stem + ".lora_down.weight", make_shape({kDim, kLoraRank}), down_);
    l.set(stem + ".alpha", make_shape({1}), {2.0f});
    l.set("lora_unet_no_such_block.lora_up.weight", make_shape({1, 2}), {1.0f, 1.0f});
    l.set("lora_unet_no_such_block.lora_down.weight", make_shape({2, 1}), {1.0f, 1.0f});
    l.save_safetensors(lora_);
    loader_.add(model_);
  }
  // The weight as the manager gives it, as f32.
  std::vector<float> weight(ModelManager& m) {
    Context ctx;
    Tensor* t = m.get(ctx, kQ, make_shape({kDim, kDim}));
    std::vector<uint16_t> half(kDim * kDim);
    tensor_get(*t, half.data());
    std::vector<float> out(half.size());
    dequantize_row(DType::F16, half.data(), out.data(), static_cast<int64_t>(out.size()));
    return out;
  }
  // Merged by hand: W + multiplier * alpha / rank * up x down, rounded to f16.
  std::vector<float> merged(const std::vector<float>& original, float multiplier) {
    std::vector<float> w = original;
    for (int64_t o = 0; o < kDim; ++o)
      for (int64_t i = 0; i < kDim; ++i) {
        float d = 0;
        for (int64_t a = 0; a < kLoraRank; ++a) d += up_[o * kLoraRank + a] * down_[a * kDim + i];
        const float v = w[o * kDim + i] + multiplier * (2.0f / kLoraRank) * d;
        uint16_t h = 0;
        quantize_row(DType::F16, &v, &h, 1);
        dequantize_row(DType::F16, &h, &w[o * kDim + i], 1);
      }
    return w;
  }

  io::test::TempDir dir_;
  std::string model_, lora_;
  std::vector<float> up_, down_;
  ModelLoader loader_;
};

TEST_F(ManagerLora, MergesWhenLoadedAndFollowsTheSet) {
  ModelManager m(loader_, DeviceRegistry::instance().get("CPU"));
  const std::vector<float> original = weight(m);
  EXPECT_GT(m.mapped_bytes(), 0u);

  bool changed = false;
  std::vector<std::string> warnings = m.set_loras({{lora_, 0.5f, ""}}, &changed);
  EXPECT_TRUE(changed);  // the resident weight went back to the file
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("lora_unet_no_such_block"), std::string::npos) << warnings[0];
  const std::vector<float> half = weight(m);
  EXPECT_EQ(half, merged(original, 0.5f));
  EXPECT_EQ(m.mapped_bytes(), 0u);  // a merged weight is a copy, the file stays as it is

  m.set_loras({{lora_, 0.5f, ""}}, &changed);
  EXPECT_FALSE(changed);  // same set: nothing to redo
  m.set_loras({{lora_, 1.0f, ""}}, &changed);
  EXPECT_TRUE(changed);
  EXPECT_EQ(weight(m), merged(original, 1.0f));

  m.set_loras({}, &changed);  // dropped: the plain weight again
  EXPECT_TRUE(changed);
  EXPECT_EQ(weight(m), original);
}

TEST_F(ManagerLora, MergedWeightsReloadAfterADiskPhase) {
  ModelManager m(loader_);
  m.add_module({"te",
                {"cond_stage_model."},
                &DeviceRegistry::instance().get("CPU"),
                {Residency::Kind::Disk, nullptr}});
  const std::vector<float> original = weight(m);
  m.set_loras({{lora_, 1.0f, ""}});
  const std::vector<float> first = weight(m);
  m.phase_done("te");
  EXPECT_EQ(m.resident_bytes(), 0u);
  EXPECT_EQ(weight(m), first);
  EXPECT_EQ(first, merged(original, 1.0f));
}

// The weight a graph computes with: at runtime the manager gives a node, not a leaf.
std::vector<float> computed(Tensor* w, nn::GraphCall& call) {
  auto backend = DeviceRegistry::instance().get("CPU").create_backend(BackendOptions{2});
  nn::GraphRunner runner(*backend);
  return runner.run(call, cast(call.ctx(), w, DType::F32));
}

TEST_F(ManagerLora, AtRuntimeLeavesTheWeightAsStoredAndAddsTheProductInTheGraph) {
  ModelManagerOptions o;
  o.lora_mode = ModelManagerOptions::LoraMode::AtRuntime;
  ModelManager m(loader_, DeviceRegistry::instance().get("CPU"), o);
  const std::vector<float> original = weight(m);
  m.set_loras({{lora_, 0.75f, ""}});
  nn::GraphCall call;
  Tensor* w = m.get(call.ctx(), kQ, make_shape({kDim, kDim}));
  EXPECT_EQ(w->op != Op::None, true);  // a node of the graph
  EXPECT_GT(m.mapped_bytes(), 0u);     // the stored weight is used as it is
  const std::vector<float> got = computed(w, call);
  ASSERT_EQ(got.size(), original.size());
  for (int64_t o = 0; o < kDim; ++o)
    for (int64_t i = 0; i < kDim; ++i) {
      float d = 0;
      for (int64_t a = 0; a < kLoraRank; ++a) d += up_[o * kLoraRank + a] * down_[a * kDim + i];
      EXPECT_NEAR(got[o * kDim + i], original[o * kDim + i] + 0.75f * 0.5f * d, 1e-5f);
    }
}

// --fa with a LoRA added at runtime: the projection is a node of the graph, and the
// precision still follows the module of the weight under it.
TEST_F(ManagerLora, AttentionPrecisionLooksThroughARuntimeLora) {
  ModelManagerOptions o;
  o.lora_mode = ModelManagerOptions::LoraMode::AtRuntime;
  for (const bool bf16 : {false, true}) {
    ModelManager m(loader_, o);
    ModuleSpec te{"te", {"cond_stage_model."}, &DeviceRegistry::instance().get("CPU"), {}};
    te.bf16_attention = bf16;
    m.add_module(te);
    m.set_loras({{lora_, 1.0f, ""}});
    Context ctx;
    Tensor* w = m.get(ctx, kQ, make_shape({kDim, kDim}));
    ASSERT_NE(w->op, Op::None);
    EXPECT_EQ(m.attention_precision(w), bf16 ? AttentionPrecision::BF16 : AttentionPrecision::F32);
  }
}

TEST_F(ManagerLora, AutoAddsAtRuntimeOnlyToQuantizedWeights) {
  ModelManager merged(loader_, DeviceRegistry::instance().get("CPU"));
  merged.set_loras({{lora_, 1.0f, ""}});
  Context ctx;
  EXPECT_EQ(merged.get(ctx, kQ, make_shape({kDim, kDim}))->op, Op::None);
  ModelManagerOptions o;
  o.weight_type = DType::Q8_0;
  ModelManager quantized(loader_, DeviceRegistry::instance().get("CPU"), o);
  quantized.set_loras({{lora_, 1.0f, ""}});
  EXPECT_NE(quantized.get(ctx, kQ, make_shape({kDim, kDim}))->op, Op::None);
}

// A LoRA made for a diffusion transformer (SD3 here) on a UNet model (SD 1.x/SDXL) is
// refused, though its CLIP-L part fits, and the LoRAs in force stay as they were.
TEST_F(ManagerLora, ALoraForAnotherFamilysNetworkIsRefusedAndChangesNothing) {
  ModelManager m(loader_, DeviceRegistry::instance().get("CPU"));
  const std::vector<float> original = weight(m);
  m.set_loras({{lora_, 1.0f, ""}});
  const std::string sd3 = dir_.file("sd3.safetensors");
  nn::RandomWeights l;
  const std::string stem = "lora_te1_text_model_encoder_layers_0_self_attn_q_proj";
  l.set(stem + ".lora_up.weight", make_shape({kLoraRank, kDim}), up_);
  l.set(stem + ".lora_down.weight", make_shape({kDim, kLoraRank}), down_);
  l.set("lora_unet_joint_blocks_0_x_block_attn_qkv.lora_up.weight", make_shape({1, 2}), {1, 1});
  l.set("lora_unet_joint_blocks_0_x_block_attn_qkv.lora_down.weight", make_shape({2, 1}), {1, 1});
  l.save_safetensors(sd3);
  try {
    m.set_loras({{sd3, 1.0f, ""}}, nullptr, "SDXL");
    FAIL();
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find(sd3), std::string::npos) << what;
    EXPECT_NE(what.find("made for SD3"), std::string::npos) << what;
    EXPECT_NE(what.find("this SDXL model"), std::string::npos) << what;
  }
  EXPECT_EQ(weight(m), merged(original, 1.0f));
}

// Names of the model's own network that miss (an SDXL LoRA's deeper blocks on SD 1.x) are
// a warning, not another family's LoRA.
TEST_F(ManagerLora, MissingNamesOfTheModelsOwnNetworkAreAWarning) {
  const std::string unet = dir_.file("unet.safetensors");
  nn::RandomWeights w(DType::F16, 4);
  Context ctx;
  w.get(ctx, kQ, make_shape({kDim, kDim}));
  w.get(ctx, "model.diffusion_model.input_blocks.1.1.proj_in.weight", make_shape({kDim, kDim}));
  w.save_safetensors(unet);
  ModelLoader loader;
  loader.add(unet);
  ModelManager m(loader, DeviceRegistry::instance().get("CPU"));
  const std::string sdxl = dir_.file("sdxl.safetensors");
  nn::RandomWeights l;
  const std::string stem = "lora_te1_text_model_encoder_layers_0_self_attn_q_proj";
  l.set(stem + ".lora_up.weight", make_shape({kLoraRank, kDim}), up_);
  l.set(stem + ".lora_down.weight", make_shape({kDim, kLoraRank}), down_);
  l.set("lora_unet_input_blocks_7_1_proj_in.lora_up.weight", make_shape({1, 2}), {1, 1});
  l.set("lora_unet_input_blocks_7_1_proj_in.lora_down.weight", make_shape({2, 1}), {1, 1});
  l.save_safetensors(sdxl);
  const std::vector<std::string> warnings = m.set_loras({{sdxl, 1.0f, ""}}, nullptr, "SD 1.x");
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("input_blocks_7"), std::string::npos) << warnings[0];
}

TEST_F(ManagerLora, MissingLoraFileIsNamed) {
  ModelManager m(loader_, DeviceRegistry::instance().get("CPU"));
  const std::string missing = dir_.file("nope.safetensors");
  try {
    m.set_loras({{missing, 1.0f, ""}});
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(missing), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace sd::weights
