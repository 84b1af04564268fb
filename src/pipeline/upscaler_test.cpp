#include "pipeline/upscaler.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "io/io_test_util.h"
#include "io/torch_test_util.h"
#include "nn/param_recorder.h"
#include "nn/random_weights.h"
#include "tensor/error.h"
#include "test_support.h"

namespace sd::pipeline {
namespace {

namespace fs = std::filesystem;

// One folder per test process: ctest runs this binary's tests side by side.
std::string temp_path(const std::string& name) {
  static const io::test::TempDir dir;
  return dir.file("upscaler_test_" + name);
}

models::EsrganConfig tiny(int blocks, int upsample, int unshuffle = 1) {
  models::EsrganConfig c;
  c.num_block = blocks;
  c.num_upsample = upsample;
  c.unshuffle = unshuffle;
  c.num_in_ch = 3 * unshuffle * unshuffle;
  c.num_feat = 16;
  c.num_grow_ch = 8;
  return c;
}

// Writes random weights for `c` as a safetensors file, each tensor under rename(name).
std::string write_model(const std::string& file, const models::EsrganConfig& c,
                        const std::function<std::string(const std::string&)>& rename = {}) {
  nn::RandomWeights w(DType::F32, 11);
  nn::ParamRecorder recorder(w);
  Context ctx;
  models::rrdbnet(nn::Scope(ctx, recorder), c, ctx.new_tensor(DType::F32, {8, 8, c.num_in_ch, 1}));
  nn::RandomWeights out;
  for (const nn::ParamDecl& p : recorder.params()) {
    w.get(ctx, p.name, p.ne);
    out.set(rename ? rename(p.name) : p.name, p.ne, w.values(p.name));
  }
  const std::string path = temp_path(file);
  out.save_safetensors(path);
  return path;
}

UpscalerOptions options(const std::string& model, int tile_size = 0) {
  UpscalerOptions o;
  o.model = model;
  o.threads = 1;  // one thread: no OpenMP barriers to wait on when the machine is busy
  o.tile_size = tile_size;
  return o;
}

std::vector<float> image(int64_t w, int64_t h) {
  return sd::test::random_values(w * h * 3, 5, 0.0f, 1.0f);
}

double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, double(std::fabs(a[i] - b[i])));
  return m;
}

TEST(Upscaler, DetectsScaleBlocksAndWidthsFromTheFile) {
  struct Case {
    models::EsrganConfig config;
    int scale;
  };
  for (const Case& k : {Case{tiny(3, 2), 4}, Case{tiny(1, 1), 2}, Case{tiny(2, 0), 1},
                        Case{tiny(1, 2, 2), 2}, Case{tiny(1, 2, 4), 1}}) {
    const models::EsrganConfig& c = k.config;
    Upscaler up(options(write_model("detect.safetensors", c)));
    EXPECT_EQ(up.scale(), k.scale);
    EXPECT_EQ(up.config().num_block, c.num_block);
    EXPECT_EQ(up.config().num_upsample, c.num_upsample);
    EXPECT_EQ(up.config().unshuffle, c.unshuffle);
    EXPECT_EQ(up.config().num_feat, 16);
    EXPECT_EQ(up.config().num_grow_ch, 8);
    // Odd sides: pixel-unshuffled inputs are padded by reflection and the output cropped.
    io::Image in;
    in.width = 9;
    in.height = 7;
    in.channels = 3;
    in.pixels.assign(in.size(), 100);
    const io::Image out = up.upscale(in);
    EXPECT_EQ(out.width, 9 * k.scale);
    EXPECT_EQ(out.height, 7 * k.scale);
    EXPECT_EQ(out.channels, 3);
  }
}

TEST(Upscaler, TiledMatchesWholeWithLessMemory) {
  const std::string model = write_model("tiles.safetensors", tiny(2, 2));
  const int64_t w = 44, h = 36;
  const std::vector<float> in = image(w, h);
  Upscaler whole(options(model, 0));
  const std::vector<float> a = whole.upscale_planes(in, w, h);
  Upscaler tiled(options(model, 16));
  const std::vector<float> b = tiled.upscale_planes(in, w, h);
  ASSERT_EQ(a.size(), static_cast<size_t>(w * h * 16 * 3));
  ASSERT_EQ(a.size(), b.size());
  // Tiles see less context near their edges; the blend hides the seams. Most pixels agree
  // closely, none far off.
  double mean = 0;
  for (size_t i = 0; i < a.size(); ++i) mean += std::fabs(a[i] - b[i]);
  mean /= static_cast<double>(a.size());
  EXPECT_LT(mean, 0.02);
  EXPECT_LT(max_abs_diff(a, b), 0.5);
}

TEST(Upscaler, TileMemoryDoesNotGrowWithTheImage) {
  const std::string model = write_model("memory.safetensors", tiny(1, 2));
  // A 16-pixel tile: the graph's working memory is that of one tile, whatever the image.
  Upscaler small_image(options(model, 16));
  Upscaler large_image(options(model, 16));
  small_image.upscale_planes(image(24, 24), 24, 24);
  large_image.upscale_planes(image(80, 72), 80, 72);
  EXPECT_EQ(small_image.last_peak_compute_buffer(), large_image.last_peak_compute_buffer());
  Upscaler whole(options(model, 0));
  whole.upscale_planes(image(80, 72), 80, 72);
  EXPECT_GT(whole.last_peak_compute_buffer(), 8 * large_image.last_peak_compute_buffer());
}

// --type bf16: the f32 file's weights become bf16 as they load (the bf16 kernels where
// the CPU has them); the image stays within bf16 rounding of the f32 one.
TEST(Upscaler, ConvertsWeightsToTheTypeAsked) {
  const std::string model = write_model("bf16.safetensors", tiny(1, 1));
  const std::vector<float> in = image(20, 12);
  const std::vector<float> f32 = Upscaler(options(model)).upscale_planes(in, 20, 12);
  UpscalerOptions o = options(model);
  o.weight_type = DType::BF16;
  const std::vector<float> bf16 = Upscaler(o).upscale_planes(in, 20, 12);
  ASSERT_EQ(bf16.size(), f32.size());
  EXPECT_NE(bf16, f32);  // rounded weights: not the f32 result
  EXPECT_LT(max_abs_diff(bf16, f32), 0.05);
}

TEST(Upscaler, ReadsOriginalEsrganNamesAndTrainingCheckpointWrappers) {
  const models::EsrganConfig c = tiny(2, 2);
  const std::vector<float> in = image(12, 10);
  const std::vector<float> want =
      Upscaler(options(write_model("plain.safetensors", c))).upscale_planes(in, 12, 10);

  auto original = [&](const std::string& name) -> std::string {
    // conv_first -> model.0; body.N.rdbR.convC -> model.1.sub.N.RDBR.convC.0;
    // conv_body -> model.1.sub.<blocks>; then 3, 6 (upsampling), 8 (HR), 10 (last).
    const std::pair<const char*, std::string> top[] = {
        {"conv_first.", "model.0."}, {"conv_body.", "model.1.sub.2."}, {"conv_up1.", "model.3."},
        {"conv_up2.", "model.6."},   {"conv_hr.", "model.8."},         {"conv_last.", "model.10."}};
    for (const auto& [from, to] : top)
      if (name.rfind(from, 0) == 0) return to + name.substr(std::string(from).size());
    // body.N.rdbR.convC.P
    std::string rest = name.substr(5);
    const size_t dot = rest.find('.');
    const std::string block = rest.substr(0, dot);
    rest = rest.substr(dot + 1);                 // rdbR.convC.P
    const std::string rdb = rest.substr(3, 1);   // R
    const std::string conv = rest.substr(9, 1);  // C
    const std::string param = rest.substr(11);   // P
    return "model.1.sub." + block + ".RDB" + rdb + ".conv" + conv + ".0." + param;
  };
  EXPECT_EQ(Upscaler(options(write_model("original.safetensors", c, original)))
                .upscale_planes(in, 12, 10),
            want);
  EXPECT_EQ(Upscaler(options(write_model("ema.safetensors", c,
                                         [](const std::string& n) { return "params_ema." + n; })))
                .upscale_planes(in, 12, 10),
            want);
}

// Real-ESRGAN's training checkpoints: a .pth holding "params" and "params_ema"; the EMA
// weights are the ones inference uses.
TEST(Upscaler, ReadsTheEmaWeightsOfAPthCheckpoint) {
  const models::EsrganConfig c = tiny(1, 2);
  const std::vector<float> in = image(10, 8);
  const std::vector<float> want =
      Upscaler(options(write_model("ema_source.safetensors", c))).upscale_planes(in, 10, 8);

  nn::RandomWeights w(DType::F32, 11);  // write_model's weights
  nn::ParamRecorder recorder(w);
  Context ctx;
  models::rrdbnet(nn::Scope(ctx, recorder), c, ctx.new_tensor(DType::F32, {8, 8, 3, 1}));
  io::test::TorchFileBuilder pth;
  int key = 0;
  for (const nn::ParamDecl& p : recorder.params()) {
    w.get(ctx, p.name, p.ne);
    std::vector<float> values = w.values(p.name);
    std::vector<int64_t> size;  // PyTorch order: the engine's reversed
    for (int d = p.ne[3] > 1 ? 3 : 0; d >= 0; --d) size.push_back(p.ne[d]);
    for (const char* wrapper : {"params_ema.", "params."}) {
      const std::string k = std::to_string(key++);
      pth.storage(k, "FloatStorage", io::test::bytes_of(values), 4);
      pth.tensor(wrapper + p.name, k, 0, size);
      for (float& v : values) v = -v;  // "params" gets other weights
    }
  }
  const std::string path = temp_path("ema.pth");
  const io::test::Bytes bytes = pth.zip_bytes();
  std::FILE* f = std::fopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  ASSERT_EQ(std::fwrite(bytes.data(), 1, bytes.size(), f), bytes.size());
  std::fclose(f);
  EXPECT_EQ(Upscaler(options(path)).upscale_planes(in, 10, 8), want);
}

TEST(Upscaler, RefusesFilesThatAreNotEsrgan) {
  nn::RandomWeights w;
  Context ctx;
  w.get(ctx, "first_stage_model.decoder.conv_in.weight", make_shape({3, 3, 4, 8}));
  const std::string path = temp_path("vae.safetensors");
  w.save_safetensors(path);
  try {
    Upscaler up(options(path));
    FAIL() << "a VAE was accepted as an upscaler";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("is not an ESRGAN upscaler model"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(Upscaler(options(temp_path("no_such_file.safetensors"))), Error);
}

// The layout Real-ESRGAN releases (64 features, growth 32), from the project's shared
// generator when it is present.
TEST(Upscaler, ReleasedLayoutFromTheSharedGenerator) {
  const std::string shared = sd::test::shared_dir();
  const std::string script = shared + "/tools/make_random_esrgan.py";
  if (shared.empty() || !fs::exists(script) || !fs::exists("/usr/bin/python3"))
    GTEST_SKIP() << "../shared/tools/make_random_esrgan.py is not available";
  const std::string path = temp_path("released.safetensors");
  const std::string command =
      "/usr/bin/python3 '" + script + "' --blocks 2 --out '" + path + "' > /dev/null";
  ASSERT_EQ(std::system(command.c_str()), 0) << command;
  Upscaler whole(options(path, 0));
  EXPECT_EQ(whole.scale(), 4);
  EXPECT_EQ(whole.config().num_block, 2);
  EXPECT_EQ(whole.config().num_feat, 64);
  EXPECT_EQ(whole.config().num_grow_ch, 32);
  const std::vector<float> in = image(20, 12);
  const std::vector<float> a = whole.upscale_planes(in, 20, 12);
  ASSERT_EQ(a.size(), size_t{80 * 48 * 3});
  Upscaler tiled(options(path, 8));
  const std::vector<float> b = tiled.upscale_planes(in, 20, 12);
  double mean = 0;
  for (size_t i = 0; i < a.size(); ++i) mean += std::fabs(a[i] - b[i]);
  EXPECT_LT(mean / static_cast<double>(a.size()), 0.02);
}

}  // namespace
}  // namespace sd::pipeline
