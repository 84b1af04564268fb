// Component checks against the reference implementation, stage by stage, so a mismatch
// in the final image points at its cause: token ids, text embeddings, one UNet call, one
// VAE decode. Needs a dump directory of a reference run (raw little-endian f32/i32 files
// named as below, made with a debug build of the reference on the same checkpoint) in
// SD_TEST_REF_DIR, the checkpoint in SD_TEST_SD15_MODEL and ../shared for the vocabulary;
// skips otherwise.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include "backend/registry.h"
#include "models/clip_tokenizer.h"
#include "models/vae.h"
#include "pipeline/text_conditioner.h"
#include "pipeline/unet_runner.h"
#include "pipeline/vae_runner.h"
#include "sampling/schedule.h"
#include "test_support.h"
#include "weights/model_loader.h"
#include "weights/model_manager.h"

namespace sd::pipeline {
namespace {

template <class T>
std::vector<T> read_raw(const std::string& path) {
  std::ifstream f(path, std::ios::binary | std::ios::ate);
  if (!f) return {};
  std::vector<T> v(static_cast<size_t>(f.tellg()) / sizeof(T));
  f.seekg(0);
  f.read(reinterpret_cast<char*>(v.data()), static_cast<std::streamsize>(v.size() * sizeof(T)));
  return v;
}

struct Diff {
  double max_abs = 0, rms = 0, ref_rms = 0;
};

Diff diff(const std::vector<float>& a, const std::vector<float>& b) {
  Diff d;
  for (size_t i = 0; i < a.size(); ++i) {
    const double e = static_cast<double>(a[i]) - b[i];
    d.max_abs = std::max(d.max_abs, std::fabs(e));
    d.rms += e * e;
    d.ref_rms += static_cast<double>(b[i]) * b[i];
  }
  d.rms = std::sqrt(d.rms / a.size());
  d.ref_rms = std::sqrt(d.ref_rms / b.size());
  return d;
}

class ReferenceDump : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* dir = std::getenv("SD_TEST_REF_DIR");
    const char* model = std::getenv("SD_TEST_SD15_MODEL");
    shared_ = sd::test::shared_dir();
    if (!dir || !model || shared_.empty()) GTEST_SKIP() << "no reference dump";
    dir_ = dir;
    loader_.add(model);
    Device& cpu = DeviceRegistry::instance().get("CPU");
    backend_ = cpu.create_backend(BackendOptions{2});
    weights_ = std::make_unique<weights::ModelManager>(loader_, cpu);
  }
  std::vector<float> f32(const std::string& name) { return read_raw<float>(dir_ + "/" + name); }

  std::string shared_, dir_;
  weights::ModelLoader loader_;
  std::unique_ptr<Backend> backend_;
  std::unique_ptr<weights::ModelManager> weights_;
};

TEST_F(ReferenceDump, TokensAndTextEmbedding) {
  auto tokenizer = std::make_shared<const models::ClipTokenizer>(
      models::ClipTokenizer::from_file(shared_ + "/data/clip/bpe_simple_vocab_16e6.txt.gz"));
  TextConditioner text(tokenizer, models::ClipTextConfig::vit_l14(), *weights_, *backend_);
  const std::string prompt = "a photograph of an astronaut riding a horse";
  const std::vector<int> ref_ids = read_raw<int>(dir_ + "/cond_tokens_chunk0.i32");
  EXPECT_EQ(text.tokenize(prompt).ids, ref_ids);
  const Conditioning c = text.encode(prompt);
  const std::vector<float> ref = f32("cond_c_crossattn.f32");
  ASSERT_EQ(c.context.size(), ref.size());
  const Diff d = diff(c.context, ref);
  std::printf("text embedding: max |diff| %.3g, rms diff %.3g, rms %.3g\n", d.max_abs, d.rms,
              d.ref_rms);
  EXPECT_LT(d.rms, 1e-2 * d.ref_rms);
  // The empty negative prompt is encoded too (BOS, EOS, padding).
  EXPECT_EQ(text.tokenize("").ids, read_raw<int>(dir_ + "/uncond_tokens_chunk0.i32"));
  const Diff du = diff(text.encode("").context, f32("uncond_c_crossattn.f32"));
  std::printf("empty prompt embedding: max |diff| %.3g, rms diff %.3g, rms %.3g\n", du.max_abs,
              du.rms, du.ref_rms);
  EXPECT_LT(du.rms, 1e-2 * du.ref_rms);
}

TEST_F(ReferenceDump, FirstUnetCall) {
  const std::vector<float> x = f32("x_t_start.f32"), cond_ctx = f32("cond_c_crossattn.f32"),
                           ref = f32("call000_cond_out.f32"), sigmas = f32("sigmas.f32");
  if (ref.empty()) GTEST_SKIP() << "no call000_cond_out.f32 in the dump";
  sampling::DiscreteSchedule schedule;
  const sampling::ModelStep ms = schedule.model_step(sigmas[0]);
  std::vector<float> scaled(x);
  for (float& v : scaled) v *= ms.scalings.c_in;
  Conditioning c{cond_ctx, 768, 77, {}, {}, {}};
  UnetRunner unet(*weights_, models::UnetConfig::sd1(), *backend_);
  const std::vector<float> out = unet.predict(scaled, 32, 32, ms.timestep, {&c})[0];
  const Diff d = diff(out, ref);
  std::printf("UNet call: max |diff| %.3g, rms diff %.3g, rms %.3g\n", d.max_abs, d.rms, d.ref_rms);
  EXPECT_LT(d.rms, 1e-2 * d.ref_rms);
}

TEST_F(ReferenceDump, VaeDecode) {
  const std::vector<float> latent = f32("final_latent.f32"), ref = f32("vae_decode_raw.f32");
  if (latent.empty() || ref.empty()) GTEST_SKIP() << "no final latent / decoded image in the dump";
  VaeRunner vae(*weights_, models::VaeConfig::sd(), *backend_);
  std::vector<float> img = vae.decode(latent, 32, 32);
  for (float& v : img) v = v * 2.0f - 1.0f;  // back to the decoder's range
  ASSERT_EQ(img.size(), ref.size());
  const Diff d = diff(img, ref);
  std::printf("VAE decode: max |diff| %.3g, rms diff %.3g, rms %.3g\n", d.max_abs, d.rms,
              d.ref_rms);
  EXPECT_LT(d.rms, 1e-2 * d.ref_rms);
}

}  // namespace
}  // namespace sd::pipeline
