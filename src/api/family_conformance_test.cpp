// The family conformance suite: what every model family must do the same way, asserted
// once over a tiny random model of each family (a trait below). Adding a family adds one
// trait; every test then runs on it:
//   - every residency of the weights (in memory, on disk, kept on another backend) gives
//     the same image, bit for bit;
//   - a LoRA merged on load, added at run time and merged into the file by hand agree;
//   - a LoRA of another family is refused, naming the file and this model;
//   - a missing part is named by its flag, before any work;
//   - the diffusion net converted to q8_0 (`-M convert`) runs from its blocks, close to the
//     f16 image;
//   - on a Vulkan device (lavapipe in CI) every module computes there and gives the CPU's
//     image, with the weights on the device, staged from host memory, or streamed within a
//     budget.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "api/convert.h"
#include "backend/registry.h"
#include "image_psnr.h"
#include "io/gguf.h"
#include "io/io_test_util.h"
#include "io/name_conversion.h"
#include "pipeline/lora_merge_test_util.h"
#include "pipeline/stable_diffusion.h"
#include "pipeline/tiny_flux2_dev_test_util.h"
#include "pipeline/tiny_flux2_test_util.h"
#include "pipeline/tiny_model_test_util.h"
#include "pipeline/tiny_qwen_image_test_util.h"
#include "pipeline/tiny_sd3_test_util.h"
#include "pipeline/tiny_wan_test_util.h"
#include "pipeline/tiny_z_image_test_util.h"
#include "tensor/error.h"
#include "test_support.h"
#include "weights/model_loader.h"

namespace sd::api {
namespace {

using pipeline::ImageRequest;
using pipeline::ModelOptions;
using pipeline::test::f32_bytes;
using pipeline::test::LoraPair;

// A part the model cannot run without: the option that gives it, and the flag the error
// must name.
struct MissingPart {
  std::string ModelOptions::*option;
  std::string flag;
};

// A LoRA pair on one weight of the diffusion net: its two tensors' names, and the weight's
// name below the diffusion root with the rows it changes (all of them: rows = 0).
struct LoraTarget {
  std::string down, up, weight;
  int64_t row0 = 0, rows = 0;
};

// Kohya's names: lora_unet_<weight path with '_'>.lora_down/up.
LoraTarget kohya(const std::string& stem, const std::string& weight) {
  return {stem + ".lora_down.weight", stem + ".lora_up.weight", weight};
}

// Diffusers / PEFT names: <module>.lora_A/B, here on rows [row0, row0 + rows) of a fused
// weight.
LoraTarget peft(const std::string& module, const std::string& weight, int64_t row0, int64_t rows) {
  return {module + ".lora_A.weight", module + ".lora_B.weight", weight, row0, rows};
}

ImageRequest small_request() {
  ImageRequest r;
  r.prompt = "a cat";
  r.width = r.height = 16;
  r.steps = 2;
  r.cfg_scale = 1.0f;
  return r;
}

// A generation's images as one: a video's frames stacked top to bottom (so every check sees
// the whole clip), an image as it is.
io::Image joined(const std::vector<io::Image>& images) {
  io::Image all = images.at(0);
  for (size_t i = 1; i < images.size(); ++i) {
    all.height += images[i].height;
    all.pixels.insert(all.pixels.end(), images[i].pixels.begin(), images[i].pixels.end());
  }
  return all;
}

// The frames a family's requests ask for: video families make a clip (Trait::kVideoFrames).
template <typename Trait>
constexpr int video_frames_of() {
  if constexpr (requires { Trait::kVideoFrames; })
    return Trait::kVideoFrames;
  else
    return 0;
}

// Whether the family's diffusion net has conv kernels --quantize-convs holds in q8_0 (input
// channels in whole 32-value blocks): the UNets.
template <typename Trait>
constexpr bool has_quantizable_convs() {
  if constexpr (requires { Trait::kQuantizableConvs; })
    return Trait::kQuantizableConvs;
  else
    return false;
}

// The request's side: 16 pixels, or more where the family's latent needs it (Trait::kSide).
template <typename Trait>
constexpr int side_of() {
  if constexpr (requires { Trait::kSide; })
    return Trait::kSide;
  else
    return 16;
}

std::string clip_vocab() {
  return sd::test::shared_dir() + "/data/clip/bpe_simple_vocab_16e6.txt.gz";
}

// The UNet families come as one checkpoint (-m).
struct OneCheckpoint {
  static ModelOptions with_checkpoint(const std::string& path) {
    ModelOptions o;
    o.model = path;
    o.clip_vocab = clip_vocab();
    return o;
  }
  static constexpr auto kDiffusionFile = &ModelOptions::model;
  static constexpr io::FileRole kRole = io::FileRole::Model;
  static std::vector<MissingPart> missing() { return {{&ModelOptions::model, "-m MODEL"}}; }
  static constexpr double kQ8MinPsnr = 30.0;
};

// SD 1.x: its presets are not read from the file, so the tiny shapes are given.
struct Sd1 : OneCheckpoint {
  static constexpr bool kQuantizableConvs = true;
  static ModelOptions open(const io::test::TempDir&) {
    const pipeline::Architecture a = pipeline::test::tiny_architecture();
    ModelOptions o = with_checkpoint(pipeline::test::write_tiny_checkpoint(a));
    o.architecture = a;
    return o;
  }
  static std::vector<LoraTarget> lora() {
    return {kohya("lora_unet_input_blocks_1_1_transformer_blocks_0_attn1_to_q",
                  "input_blocks.1.1.transformer_blocks.0.attn1.to_q"),
            kohya("lora_unet_output_blocks_2_1_transformer_blocks_0_attn2_to_v",
                  "output_blocks.2.1.transformer_blocks.0.attn2.to_v")};
  }
  static std::string foreign_lora_stem() { return "lora_unet_double_blocks_0_img_attn_qkv"; }
};

// SDXL: every dimension read from the checkpoint.
struct Sdxl : OneCheckpoint {
  static constexpr bool kQuantizableConvs = true;
  static ModelOptions open(const io::test::TempDir&) {
    return with_checkpoint(pipeline::test::write_tiny_sdxl_checkpoint());
  }
  static std::vector<LoraTarget> lora() {
    return {kohya("lora_unet_input_blocks_3_1_transformer_blocks_0_attn1_to_q",
                  "input_blocks.3.1.transformer_blocks.0.attn1.to_q"),
            kohya("lora_unet_middle_block_1_transformer_blocks_1_ff_net_2",
                  "middle_block.1.transformer_blocks.1.ff.net.2")};
  }
  static std::string foreign_lora_stem() { return "lora_unet_joint_blocks_0_x_block_attn_qkv"; }
};

// SD3.5 Medium (the MMDiT-X blocks with a second attention): the separate files users pass.
struct Sd3 {
  static ModelOptions open(const io::test::TempDir& dir) {
    static const pipeline::test::TinySd3Files f =
        pipeline::test::write_tiny_sd3(dir.file("sd3"), {true});
    ModelOptions o;
    o.diffusion_model = f.dit;
    o.clip_l = f.clip_l;
    o.clip_g = f.clip_g;
    o.t5xxl = f.t5;
    o.vae = f.vae;
    o.t5_tokenizer = dir.file("sd3") + "/tokenizer.json";
    o.clip_vocab = clip_vocab();
    return o;
  }
  static constexpr auto kDiffusionFile = &ModelOptions::diffusion_model;
  static constexpr io::FileRole kRole = io::FileRole::DiffusionModel;
  static std::vector<MissingPart> missing() {
    return {{&ModelOptions::clip_l, "--clip_l"},
            {&ModelOptions::clip_g, "--clip_g"},
            {&ModelOptions::vae, "--vae"}};
  }
  static std::vector<LoraTarget> lora() {
    // Diffusers' separate q, k, v onto the fused qkv's rows (the second attention's too),
    // and kohya's names.
    const int64_t h = pipeline::test::tiny_mmdit_config(true).hidden;
    const std::string d0 = "transformer.transformer_blocks.0.";
    const std::string d1 = "transformer.transformer_blocks.1.";
    return {peft(d0 + "attn.to_k", "joint_blocks.0.x_block.attn.qkv", h, h),
            peft(d1 + "attn.add_v_proj", "joint_blocks.1.context_block.attn.qkv", 2 * h, h),
            peft(d0 + "attn2.to_q", "joint_blocks.0.x_block.attn2.qkv", 0, h),
            peft(d0 + "ff_context.net.0.proj", "joint_blocks.0.context_block.mlp.fc1", 0, 0),
            kohya("lora_unet_joint_blocks_1_x_block_mlp_fc2", "joint_blocks.1.x_block.mlp.fc2"),
            kohya("lora_unet_final_layer_adaLN_modulation_1", "final_layer.adaLN_modulation.1")};
  }
  static std::string foreign_lora_stem() { return "lora_unet_double_blocks_0_img_attn_qkv"; }
  static constexpr double kQ8MinPsnr = 30.0;
};

// FLUX.1 dev: its four files.
struct Flux {
  static ModelOptions with_files(const pipeline::test::TinyFluxFiles& f) {
    ModelOptions o;
    o.diffusion_model = f.dit;
    o.t5xxl = f.t5;
    o.clip_l = f.clip_l;
    o.vae = f.vae;
    o.t5_tokenizer = f.dir + "/tokenizer.json";
    o.clip_vocab = clip_vocab();
    return o;
  }
  static ModelOptions open(const io::test::TempDir& dir) {
    static const pipeline::test::TinyFluxFiles f =
        pipeline::test::write_tiny_flux(dir.file("flux"));
    return with_files(f);
  }
  static constexpr auto kDiffusionFile = &ModelOptions::diffusion_model;
  static constexpr io::FileRole kRole = io::FileRole::DiffusionModel;
  static std::vector<MissingPart> missing() {
    return {{&ModelOptions::t5xxl, "--t5xxl"},
            {&ModelOptions::clip_l, "--clip_l"},
            {&ModelOptions::vae, "--vae"}};
  }
  static std::vector<LoraTarget> lora() {
    // Diffusers / ai-toolkit's separate q, k, v and proj_mlp onto BFL's fused weights' rows,
    // and kohya's names.
    const models::FluxConfig c = pipeline::test::tiny_flux_config();
    const int64_t h = c.hidden;
    const std::string d = "transformer.transformer_blocks.0.attn.";
    const std::string s = "transformer.single_transformer_blocks.0.";
    return {peft(d + "to_k", "double_blocks.0.img_attn.qkv", h, h),
            peft(d + "add_v_proj", "double_blocks.0.txt_attn.qkv", 2 * h, h),
            peft(s + "proj_mlp", "single_blocks.0.linear1", 3 * h, c.mlp_hidden),
            kohya("lora_unet_single_blocks_0_linear2", "single_blocks.0.linear2")};
  }
  static std::string foreign_lora_stem() { return "lora_unet_joint_blocks_0_x_block_attn_qkv"; }
  static constexpr double kQ8MinPsnr = 40.0;
};

// Chroma: its transformer, T5 and the autoencoder.
struct Chroma {
  static ModelOptions open(const io::test::TempDir& dir) {
    static const pipeline::test::TinyFluxFiles f =
        pipeline::test::write_tiny_chroma(dir.file("chroma"));
    ModelOptions o = Flux::with_files(f);
    o.clip_l.clear();
    return o;
  }
  static constexpr auto kDiffusionFile = &ModelOptions::diffusion_model;
  static constexpr io::FileRole kRole = io::FileRole::DiffusionModel;
  static std::vector<MissingPart> missing() {
    return {{&ModelOptions::t5xxl, "--t5xxl"}, {&ModelOptions::vae, "--vae"}};
  }
  static std::vector<LoraTarget> lora() {
    return {kohya("lora_unet_double_blocks_1_txt_attn_proj", "double_blocks.1.txt_attn.proj"),
            kohya("lora_unet_single_blocks_0_linear1", "single_blocks.0.linear1")};
  }
  static std::string foreign_lora_stem() { return "lora_unet_joint_blocks_0_x_block_attn_qkv"; }
  static constexpr double kQ8MinPsnr = 40.0;
};

// Z-Image: its transformer, the Qwen3 text encoder (--llm, with its tokenizer.json beside it)
// and FLUX.1's autoencoder.
struct ZImage {
  static ModelOptions open(const io::test::TempDir& dir) {
    static const pipeline::test::TinyZImageFiles f =
        pipeline::test::write_tiny_z_image(dir.file("z_image"));
    ModelOptions o;
    o.diffusion_model = f.dit;
    o.llm = f.llm;
    o.vae = f.vae;
    o.llm_tokenizer = f.tokenizer;
    return o;
  }
  static constexpr auto kDiffusionFile = &ModelOptions::diffusion_model;
  static constexpr io::FileRole kRole = io::FileRole::DiffusionModel;
  static std::vector<MissingPart> missing() {
    return {{&ModelOptions::llm, "--llm"}, {&ModelOptions::vae, "--vae"}};
  }
  static std::vector<LoraTarget> lora() {
    // Diffusers' separate q, k, v onto the fused qkv's rows and to_out.0 onto out, and
    // kohya's names.
    const int64_t h = pipeline::test::tiny_z_image_config().hidden;
    const std::string d = "diffusion_model.";
    return {
        peft(d + "layers.0.attention.to_k", "layers.0.attention.qkv", h, h),
        peft(d + "noise_refiner.0.attention.to_v", "noise_refiner.0.attention.qkv", 2 * h, h),
        peft(d + "context_refiner.0.attention.to_out.0", "context_refiner.0.attention.out", 0, 0),
        peft(d + "all_final_layer.2-1.linear", "final_layer.linear", 0, 0),
        kohya("lora_unet_layers_0_adaLN_modulation_0", "layers.0.adaLN_modulation.0"),
        kohya("lora_unet_noise_refiner_0_feed_forward_w2", "noise_refiner.0.feed_forward.w2")};
  }
  static std::string foreign_lora_stem() { return "lora_unet_double_blocks_0_img_attn_qkv"; }
  static constexpr double kQ8MinPsnr = 30.0;
};

// FLUX.2 klein: its transformer, the Qwen3 text encoder (--llm, with its tokenizer.json) and
// the FLUX.2 autoencoder.
struct Flux2 {
  static ModelOptions open(const io::test::TempDir& dir) {
    static const pipeline::test::TinyFlux2Files f =
        pipeline::test::write_tiny_flux2(dir.file("flux2"));
    ModelOptions o;
    o.diffusion_model = f.dit;
    o.llm = f.llm;
    o.vae = f.vae;
    o.llm_tokenizer = f.tokenizer;
    return o;
  }
  static constexpr auto kDiffusionFile = &ModelOptions::diffusion_model;
  static constexpr io::FileRole kRole = io::FileRole::DiffusionModel;
  static std::vector<MissingPart> missing() {
    return {{&ModelOptions::llm, "--llm"}, {&ModelOptions::vae, "--vae"}};
  }
  static std::vector<LoraTarget> lora() {
    return {
        kohya("lora_unet_double_blocks_0_img_attn_qkv", "double_blocks.0.img_attn.qkv"),
        kohya("lora_unet_single_blocks_0_linear2", "single_blocks.0.linear2"),
        kohya("lora_unet_double_stream_modulation_txt_lin", "double_stream_modulation_txt.lin")};
  }
  static std::string foreign_lora_stem() { return "lora_unet_joint_blocks_0_x_block_attn_qkv"; }
  static constexpr double kQ8MinPsnr = 30.0;
};

// FLUX.2 dev: its transformer (guidance input, 48 single blocks), the Mistral text encoder
// (--llm, with its tokenizer.json beside it) and the FLUX.2 autoencoder.
struct Flux2Dev {
  static ModelOptions open(const io::test::TempDir& dir) {
    static const pipeline::test::TinyFlux2Files f =
        pipeline::test::write_tiny_flux2_dev(dir.file("flux2_dev"));
    ModelOptions o;
    o.diffusion_model = f.dit;
    o.llm = f.llm;
    o.vae = f.vae;
    return o;
  }
  static constexpr auto kDiffusionFile = &ModelOptions::diffusion_model;
  static constexpr io::FileRole kRole = io::FileRole::DiffusionModel;
  static std::vector<MissingPart> missing() {
    return {{&ModelOptions::llm, "--llm"}, {&ModelOptions::vae, "--vae"}};
  }
  static std::vector<LoraTarget> lora() {
    return {
        kohya("lora_unet_guidance_in_in_layer", "guidance_in.in_layer"),
        kohya("lora_unet_single_blocks_47_linear1", "single_blocks.47.linear1"),
        kohya("lora_unet_double_stream_modulation_img_lin", "double_stream_modulation_img.lin")};
  }
  static std::string foreign_lora_stem() { return "lora_unet_joint_blocks_0_x_block_attn_qkv"; }
  static constexpr double kQ8MinPsnr = 30.0;
};

// Qwen-Image: its MMDiT, the Qwen2.5-VL text model (--llm, with its tokenizer.json) and the
// Wan 2.1 autoencoder.
struct QwenImage {
  static ModelOptions open(const io::test::TempDir& dir) {
    static const pipeline::test::TinyQwenImageFiles f =
        pipeline::test::write_tiny_qwen_image(dir.file("qwen_image"));
    ModelOptions o;
    o.diffusion_model = f.dit;
    o.llm = f.llm;
    o.vae = f.vae;
    o.llm_tokenizer = f.tokenizer;
    return o;
  }
  static constexpr auto kDiffusionFile = &ModelOptions::diffusion_model;
  static constexpr io::FileRole kRole = io::FileRole::DiffusionModel;
  static std::vector<MissingPart> missing() {
    return {{&ModelOptions::llm, "--llm"}, {&ModelOptions::vae, "--vae"}};
  }
  static std::vector<LoraTarget> lora() {
    return {kohya("lora_unet_transformer_blocks_0_attn_to_q", "transformer_blocks.0.attn.to_q"),
            kohya("lora_unet_transformer_blocks_1_img_mlp_net_2",
                  "transformer_blocks.1.img_mlp.net.2")};
  }
  static std::string foreign_lora_stem() { return "lora_unet_joint_blocks_0_x_block_attn_qkv"; }
  static constexpr double kQ8MinPsnr = 30.0;
};

// Wan text to video: its transformer, umT5 (--t5xxl, with its tokenizer.json beside it) and
// the Wan 2.1 causal autoencoder; every check runs on a five-frame clip (two latent frames:
// the temporal upsamplers and the clip cache included).
struct Wan {
  static ModelOptions open(const io::test::TempDir& dir) {
    static const pipeline::test::TinyWanFiles f = pipeline::test::write_tiny_wan(dir.file("wan"));
    return options(f);
  }
  // The options that run a Wan model from its files (umT5's tokenizer beside them).
  static ModelOptions options(const pipeline::test::TinyWanFiles& f) {
    ModelOptions o;
    o.diffusion_model = f.dit;
    o.t5xxl = f.umt5;
    o.vae = f.vae;
    o.t5_tokenizer = f.dir + "/tokenizer.json";
    return o;
  }
  static constexpr auto kDiffusionFile = &ModelOptions::diffusion_model;
  static constexpr io::FileRole kRole = io::FileRole::DiffusionModel;
  static constexpr int kVideoFrames = 5;
  static std::vector<MissingPart> missing() {
    return {{&ModelOptions::t5xxl, "--t5xxl"}, {&ModelOptions::vae, "--vae"}};
  }
  static std::vector<LoraTarget> lora() {
    // ComfyUI's PEFT names (diffusion_model.<module>.lora_A/B) and kohya's.
    const std::string d = "diffusion_model.";
    return {peft(d + "blocks.0.self_attn.q", "blocks.0.self_attn.q", 0, 0),
            peft(d + "blocks.1.cross_attn.k", "blocks.1.cross_attn.k", 0, 0),
            kohya("lora_unet_blocks_0_ffn_2", "blocks.0.ffn.2"),
            kohya("lora_unet_head_head", "head.head")};
  }
  static std::string foreign_lora_stem() { return "lora_unet_double_blocks_0_img_attn_qkv"; }
  static constexpr double kQ8MinPsnr = 30.0;
};

// Wan 2.2 TI2V-5B in small: Wan's umT5, a transformer on Wan 2.2's 48 channels and Wan
// 2.2's autoencoder (16x per side, so 32 pixels are one 2x2 patch).
struct WanTI2V : Wan {
  static ModelOptions open(const io::test::TempDir& dir) {
    static const pipeline::test::TinyWanFiles f =
        pipeline::test::write_tiny_wan_ti2v(dir.file("wan_ti2v"));
    return options(f);
  }
  static constexpr int kSide = 32;
};

// The file's tensors as f32 under the names they are stored with.
struct FileWeights {
  std::map<std::string, std::vector<float>> values;
  std::map<std::string, Shape> shapes;
};

// A diffusion-model file stores names below the diffusion root; a checkpoint stores the
// canonical names themselves.
std::string stored_name(const std::string& canonical, io::FileRole role) {
  return role == io::FileRole::DiffusionModel ? canonical.substr(io::kUnetRoot.size()) : canonical;
}

FileWeights read_weights(const std::string& file, io::FileRole role) {
  weights::ModelLoader loader;
  loader.add(file, role);
  FileWeights w;
  for (const auto& [name, source] : loader.tensors()) {
    std::vector<float> v(
        static_cast<size_t>(source.ne[0] * source.ne[1] * source.ne[2] * source.ne[3]));
    loader.read(name, DType::F32, v.data());
    const std::string key = stored_name(name, role);
    w.values[key] = std::move(v);
    w.shapes[key] = source.ne;
  }
  return w;
}

void write_weights(const FileWeights& w, const std::string& path) {
  pipeline::test::write_f32_safetensors(w.values, w.shapes, path);
}

template <typename Trait>
class FamilyConformance : public ::testing::Test {
 protected:
  void SetUp() override {
    if (sd::test::shared_dir().empty())
      GTEST_SKIP() << "needs ../shared/data/clip for the CLIP vocabulary";
#if SD_TEST_ASAN
    // dev's 512 text rows through 48 blocks take minutes there; klein (FLUX2) runs the same
    // code under the sanitizers, dev in Release.
    if (std::is_same_v<Trait, Flux2Dev>) GTEST_SKIP() << "FLUX2 covers its code here";
#endif
    options_ = Trait::open(dir());
    options_.threads = 2;
    request_ = small_request();
    request_.width = request_.height = side_of<Trait>();
    request_.video_frames = video_frames_of<Trait>();
  }

  static const io::test::TempDir& dir() {
    static const io::test::TempDir d;
    return d;
  }
  std::string& diffusion_file(ModelOptions& o) {
    return o.*Trait::kDiffusionFile;
  }

  io::Image generate(const ModelOptions& o, const ImageRequest& r) {
    return joined(pipeline::StableDiffusion(o).generate(r));
  }

  // An opt-in that changes the arithmetic (`opted` is options_ with it): the same image
  // twice; where it `applies` (this family, this CPU) an image that differs from the plain
  // one by no more than Trait::kQ8MinPsnr allows, elsewhere the plain image itself.
  void expect_close_image(const ModelOptions& opted, bool applies, const char* what) {
    const io::Image plain = generate(options_, request_);
    pipeline::StableDiffusion sd(opted);
    const io::Image got = joined(sd.generate(request_));
    EXPECT_EQ(joined(sd.generate(request_)).pixels, got.pixels) << "same seed, same image";
    if (!applies) {
      EXPECT_EQ(got.pixels, plain.pixels);
      return;
    }
    EXPECT_NE(got.pixels, plain.pixels) << what << " changed nothing";
    const double db = sd::test::image_psnr(got, plain);
    std::printf("%s: %.1f dB against the plain image\n", what, db);
    EXPECT_GE(db, Trait::kQ8MinPsnr);
  }

  // A rank-2 LoRA on Trait::lora()'s weights, and the diffusion file with the same
  // change merged by hand (f32). Returns {lora, merged file}.
  std::pair<std::string, std::string> write_lora(float multiplier) {
    const std::string lora_path = dir().file("lora.safetensors");
    const std::string merged_path = dir().file("merged.safetensors");
    FileWeights w = read_weights(diffusion_file(options_), Trait::kRole);
    pipeline::test::DitWeights dit;
    std::vector<LoraPair> pairs;
    for (const LoraTarget& t : Trait::lora()) {
      const std::string stored =
          stored_name(std::string(io::kUnetRoot) + t.weight + ".weight", Trait::kRole);
      EXPECT_TRUE(w.values.count(stored)) << stored;
      if (!w.values.count(stored)) continue;
      const std::string key = t.weight;  // DitWeights' keys: the target's name + ".weight"
      dit.values[key + ".weight"] = w.values.at(stored);
      dit.shapes[key + ".weight"] = w.shapes.at(stored);
      const int64_t rows = t.rows ? t.rows : w.shapes.at(stored)[1];
      pairs.push_back({t.down, t.up, key, t.row0, rows});
    }
    const std::string unused = dir().file("dit_only.safetensors");
    pipeline::test::write_lora_and_merged(dit, pairs, multiplier, 0.5f, lora_path, unused);
    for (const LoraTarget& t : Trait::lora()) {
      const std::string stored =
          stored_name(std::string(io::kUnetRoot) + t.weight + ".weight", Trait::kRole);
      if (w.values.count(stored)) w.values[stored] = dit.values.at(t.weight + ".weight");
    }
    write_weights(w, merged_path);
    return {lora_path, merged_path};
  }

  ModelOptions options_;
  ImageRequest request_;
};

using Families = ::testing::Types<Sd1, Sdxl, Sd3, Flux, Chroma, ZImage, Flux2, Flux2Dev, QwenImage,
                                  Wan, WanTI2V>;
class FamilyNames {
 public:
  template <typename T>
  static std::string GetName(int) {
    if (std::is_same_v<T, Sd1>) return "SD1";
    if (std::is_same_v<T, Sdxl>) return "SDXL";
    if (std::is_same_v<T, Sd3>) return "SD3";
    if (std::is_same_v<T, Flux>) return "FLUX";
    if (std::is_same_v<T, Chroma>) return "Chroma";
    if (std::is_same_v<T, Flux2>) return "FLUX2";
    if (std::is_same_v<T, Flux2Dev>) return "FLUX2dev";
    if (std::is_same_v<T, QwenImage>) return "QwenImage";
    if (std::is_same_v<T, Wan>) return "Wan";
    if (std::is_same_v<T, WanTI2V>) return "WanTI2V";
    return "ZImage";
  }
};
TYPED_TEST_SUITE(FamilyConformance, Families, FamilyNames);

TYPED_TEST(FamilyConformance, EveryResidencyGivesTheSameImage) {
  pipeline::StableDiffusion kept(this->options_);
  const io::Image in_memory = joined(kept.generate(this->request_));
  EXPECT_GT(kept.resident_weight_bytes(), 0u);  // the default keeps the weights
  for (const char* params : {"disk", "cpu", "diffusion=disk,te=cpu,vae=cpu", "*=cpu,te=disk"}) {
    for (bool eager : {false, true}) {
      ModelOptions o = this->options_;
      o.params_backend = params;
      o.eager_load = eager;
      pipeline::StableDiffusion sd(o);
      EXPECT_EQ(joined(sd.generate(this->request_)).pixels, in_memory.pixels)
          << "--params-backend " << params << (eager ? " --eager-load" : "");
      if (std::string(params) == "disk") {
        // Everything was freed as its phase ended, and reads back the same.
        EXPECT_EQ(sd.resident_weight_bytes(), 0u);
        EXPECT_EQ(joined(sd.generate(this->request_)).pixels, in_memory.pixels)
            << "second generation";
      }
    }
  }
}

TYPED_TEST(FamilyConformance, LoraMergedAtRunTimeAndByHandAgree) {
  const float multiplier = 0.8f;
  const auto [lora, merged] = this->write_lora(multiplier);
  ImageRequest with_lora = this->request_;
  with_lora.loras = {{lora, multiplier}};
  std::vector<std::string> warnings;
  with_lora.warn = [&](const std::string& text) { warnings.push_back(text); };

  ModelOptions merge = this->options_;
  merge.lora_mode = weights::ModelManagerOptions::LoraMode::Merge;
  pipeline::StableDiffusion sd(merge);
  const io::Image plain = joined(sd.generate(this->request_));
  const io::Image merged_on_load = joined(sd.generate(with_lora));
  EXPECT_TRUE(warnings.empty()) << warnings.front();  // every key found its weight

  ModelOptions at_runtime = this->options_;
  at_runtime.lora_mode = weights::ModelManagerOptions::LoraMode::AtRuntime;
  const io::Image runtime = this->generate(at_runtime, with_lora);
  ModelOptions by_hand = this->options_;
  this->diffusion_file(by_hand) = merged;
  const io::Image hand = this->generate(by_hand, this->request_);

  const double changed = sd::test::image_psnr(merged_on_load, plain);
  const double merge_vs_hand = sd::test::image_psnr(merged_on_load, hand);
  const double runtime_vs_hand = sd::test::image_psnr(runtime, hand);
  std::printf("LoRA vs none %.1f dB; merged vs by hand %.1f dB; at run time vs by hand %.1f dB\n",
              changed, merge_vs_hand, runtime_vs_hand);
  EXPECT_LT(changed, 40.0) << "the LoRA should change the image";
  EXPECT_GE(merge_vs_hand, 50.0);
  EXPECT_GE(runtime_vs_hand, 50.0);
}

TYPED_TEST(FamilyConformance, ALoraOfAnotherFamilyIsRefused) {
  io::test::SafetensorsBuilder lora;
  const std::vector<float> v = pipeline::test::lora_values(16, 1, 0.3f);
  const std::string stem = TypeParam::foreign_lora_stem();
  lora.add(stem + ".lora_down.weight", "F32", {2, 8}, f32_bytes(v));
  lora.add(stem + ".lora_up.weight", "F32", {8, 2}, f32_bytes(v));
  const std::string path = this->dir().file("foreign_lora.safetensors");
  io::test::write_file(path, lora.bytes());
  pipeline::StableDiffusion sd(this->options_);
  ImageRequest r = this->request_;
  r.loras = {{path, 1.0f}};
  std::string error;
  try {
    sd.generate(r);
  } catch (const Error& e) {
    error = e.what();
  }
  EXPECT_NE(error.find(path), std::string::npos) << error;
  const std::string model = std::string("this ") + io::version_name(sd.version()) + " model";
  EXPECT_NE(error.find(model), std::string::npos) << error;
  EXPECT_EQ(error.find('\n'), std::string::npos) << error;
}

TYPED_TEST(FamilyConformance, AMissingPartIsNamedByItsFlag) {
  for (const MissingPart& part : TypeParam::missing()) {
    ModelOptions o = this->options_;
    (o.*part.option).clear();
    std::string error;
    try {
      pipeline::StableDiffusion sd(o);
    } catch (const Error& e) {
      error = e.what();
    }
    EXPECT_NE(error.find(part.flag), std::string::npos) << part.flag << ": " << error;
    EXPECT_EQ(error.find('\n'), std::string::npos) << error;
  }
}

TYPED_TEST(FamilyConformance, Q8_0DiffusionNetRunsFromItsBlocks) {
  const std::string f16_file = this->diffusion_file(this->options_);
  const std::string q8 = this->dir().file("q8_0.gguf");
  if (!std::filesystem::exists(q8)) {
    ConvertParts parts;
    ConvertOptions c{"", q8, "", DType::Q8_0, "", nullptr};
    if (TypeParam::kRole == io::FileRole::DiffusionModel)
      parts.diffusion_model = f16_file;
    else
      c.input = f16_file;
    convert_model(c, parts);
  }
  size_t quantized = 0;
  const io::GgufFile gguf = io::GgufFile::open(q8);
  for (const io::TensorInfo& t : gguf.tensors()) quantized += t.dtype == DType::Q8_0;
  EXPECT_GT(quantized, 0u);

  const io::Image f16 = this->generate(this->options_, this->request_);
  ModelOptions o = this->options_;
  this->diffusion_file(o) = q8;
  pipeline::StableDiffusion sd(o);
  const io::Image a = joined(sd.generate(this->request_));
  EXPECT_EQ(joined(sd.generate(this->request_)).pixels, a.pixels) << "same seed, same image";
  const double db = sd::test::image_psnr(a, f16);
  std::printf("q8_0 (%zu tensors): %.1f dB against f16\n", quantized, db);
  EXPECT_GE(db, TypeParam::kQ8MinPsnr);
}

// --quantize-convs: a UNet's convolutions in q8_0 on the int8 kernel give an image close
// to the f16 one, and the same one again; a family without such kernels (or a CPU without
// the instructions) gives the f16 image itself.
TYPED_TEST(FamilyConformance, QuantizedConvolutionsKeepTheImage) {
  ModelOptions o = this->options_;
  o.quantize_convs = true;
  const bool int8 = DeviceRegistry::instance().get("CPU").caps().int8_convolutions;
  this->expect_close_image(o, has_quantizable_convs<TypeParam>() && int8, "--quantize-convs");
}

// --fa: every module's attention on bf16 operands gives an image close to the f32 one, and
// the same one again; a CPU without bf16 dot products runs it in f32 (the same image).
TYPED_TEST(FamilyConformance, FlashAttentionKeepsTheImage) {
  ModelOptions o = this->options_;
  o.flash_attn = true;
  this->expect_close_image(o, __builtin_cpu_supports("avx512bf16"), "--fa");
}

TYPED_TEST(FamilyConformance, OnAVulkanDeviceTheImageIsTheCpus) {
#if SD_TEST_ASAN
  // A whole generation on a software Vulkan device under the sanitizers takes minutes: this
  // runs in Release (where vulkan_tests check every op with the validation layers).
  GTEST_SKIP() << "runs in the Release pass";
#endif
  if (!DeviceRegistry::instance().find("vulkan0")) GTEST_SKIP() << "no Vulkan device here";
  // dev is klein's transformer and decoder code with other switches, and 512 text rows
  // through 48 blocks take lavapipe most of a minute.
  if (std::is_same_v<TypeParam, Flux2Dev>) GTEST_SKIP() << "FLUX2's run covers its code";
  const io::Image cpu = this->generate(this->options_, this->request_);
  // Every module on the device with its weights there. Then, for one UNet and one DiT
  // family (the other families' modules are the same code there): the weights kept in host
  // memory and staged, and streamed within a budget (the text encoder on the CPU: tiny
  // models' embedding tables are larger than the budget that splits their diffusion nets).
  struct Run {
    const char* backend;
    const char* params_backend;
    const char* max_vram;
  };
  std::vector<Run> runs{{"vulkan0", "", ""}};
  if (std::is_same_v<TypeParam, Sd1> || std::is_same_v<TypeParam, Flux>) {
    runs.push_back({"all=vulkan0,te=cpu", "cpu", ""});
    runs.push_back({"all=vulkan0,te=cpu", "", "vulkan0=0.008"});
  }
  for (const Run& run : runs) {
    ModelOptions o = this->options_;
    o.backend = run.backend;
    o.params_backend = run.params_backend;
    o.max_vram = run.max_vram;
    const io::Image vulkan = this->generate(o, this->request_);
    const double db = sd::test::image_psnr(vulkan, cpu);
    std::printf("--backend %s --params-backend '%s' --max-vram '%s': %.1f dB against the CPU\n",
                run.backend, run.params_backend, run.max_vram, db);
    // f32 throughout on both; only the order of additions differs.
    EXPECT_GE(db, 45.0) << "--backend " << run.backend << " --params-backend '"
                        << run.params_backend << "' --max-vram '" << run.max_vram << "'";
  }
}

}  // namespace
}  // namespace sd::api
