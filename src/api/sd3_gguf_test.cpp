// `-M convert` on SD3: the single checkpoint (-m) and the separate part files (--diffusion-
// model, --clip_l, --clip_g, --t5xxl, each converted with its own flag) to q8_0 and q4_K
// GGUF files, which load back the way the originals do and make the original's image up
// to the quantization's error.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>

#include "api/convert.h"
#include "image_psnr.h"
#include "io/gguf.h"
#include "io/io_test_util.h"
#include "pipeline/stable_diffusion.h"
#include "pipeline/tiny_sd3_test_util.h"
#include "test_support.h"

namespace sd::api {
namespace {

struct TypeBound {
  DType type;
  double min_psnr_db;  // against the f16 files' image
};

class Sd3Convert : public ::testing::TestWithParam<TypeBound> {
 protected:
  static void SetUpTestSuite() {
    dir_ = new io::test::TempDir;
    files_ = new pipeline::test::TinySd3Files(pipeline::test::write_tiny_sd3(dir_->file("sd3")));
  }
  static void TearDownTestSuite() {
    delete files_;
    delete dir_;
  }
  void SetUp() override {
    const std::string shared = sd::test::shared_dir();
    if (shared.empty()) GTEST_SKIP() << "needs ../shared/data/clip for the CLIP vocabulary";
    options_.clip_vocab = shared + "/data/clip/bpe_simple_vocab_16e6.txt.gz";
    options_.t5_tokenizer = dir_->file("sd3") + "/tokenizer.json";
    options_.threads = 2;
    request_.prompt = "a cat";
    request_.width = request_.height = 32;
    request_.steps = 2;
    request_.cfg_scale = 3.0f;
  }

  // `-M convert -m FILE`, or the part's flag when `part` names the ConvertParts field.
  std::string convert(const std::string& input, DType type,
                      std::string ConvertParts::*part = nullptr) {
    const std::string out =
        dir_->file(std::filesystem::path(input).stem().string() + "_" +
                   std::string(dtype_name(type)) + (part ? "_part" : "") + ".gguf");
    ConvertParts parts;
    if (part) parts.*part = input;
    convert_model({part ? "" : input, out, "", type, "", nullptr}, parts);
    return out;
  }

  io::Image generate(const pipeline::ModelOptions& o) {
    return pipeline::StableDiffusion(o).generate(request_)[0];
  }

  static io::test::TempDir* dir_;
  static pipeline::test::TinySd3Files* files_;
  pipeline::ModelOptions options_;
  pipeline::ImageRequest request_;
};
io::test::TempDir* Sd3Convert::dir_ = nullptr;
pipeline::test::TinySd3Files* Sd3Convert::files_ = nullptr;

TEST_P(Sd3Convert, TheSingleCheckpointMakesTheOriginalsImage) {
  pipeline::ModelOptions o = options_;
  o.model = files_->checkpoint;
  const io::Image original = generate(o);
  o.model = convert(files_->checkpoint, GetParam().type);
  // sd.cpp's names for every part, the T5 among them.
  size_t quantized = 0, t5 = 0;
  const io::GgufFile converted = io::GgufFile::open(o.model);
  for (const io::TensorInfo& t : converted.tensors()) {
    quantized += t.dtype == GetParam().type;
    t5 += t.name.rfind("text_encoders.t5xxl.transformer.encoder.", 0) == 0;
  }
  EXPECT_GT(quantized, 0u);
  EXPECT_GT(t5, 0u);
  const double db = sd::test::image_psnr(generate(o), original);
  std::printf("%s single file: %.1f dB against f16\n", dtype_name(GetParam().type).data(), db);
  EXPECT_GE(db, GetParam().min_psnr_db);
}

TEST_P(Sd3Convert, EachPartConvertedWithItsFlagMakesTheOriginalsImage) {
  pipeline::ModelOptions o = options_;
  o.diffusion_model = files_->dit;
  o.clip_l = files_->clip_l;
  o.clip_g = files_->clip_g;
  o.t5xxl = files_->t5;
  o.vae = files_->vae;
  const io::Image original = generate(o);
  const DType type = GetParam().type;
  o.diffusion_model = convert(files_->dit, type, &ConvertParts::diffusion_model);
  o.clip_l = convert(files_->clip_l, type, &ConvertParts::clip_l);
  o.clip_g = convert(files_->clip_g, type, &ConvertParts::clip_g);
  o.t5xxl = convert(files_->t5, type, &ConvertParts::t5xxl);
  const double db = sd::test::image_psnr(generate(o), original);
  std::printf("%s part files: %.1f dB against f16\n", dtype_name(type).data(), db);
  EXPECT_GE(db, GetParam().min_psnr_db);
}

INSTANTIATE_TEST_SUITE_P(Types, Sd3Convert,
                         ::testing::Values(TypeBound{DType::Q8_0, 36.0},   // measured 42 dB
                                           TypeBound{DType::Q4_K, 30.0}),  // measured 36 dB
                         [](const auto& info) { return std::string(dtype_name(info.param.type)); });

}  // namespace
}  // namespace sd::api
