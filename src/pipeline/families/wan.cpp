// Wan 2.1 / 2.2 text-to-video (Wan team 2025, "Wan: Open and Advanced Large-Scale Video
// Generative Models"): umT5-XXL's last hidden states over 512 tokens with the padding masked
// in umT5 and zeroed after it (pipeline/t5_only_conditioner.h, as sd.cpp's T5 embedder runs
// for Wan), the transformer (models/wan.h) on a video latent [w, h, frames, 16], Wan 2.1's
// causal autoencoder decoding the clip frame by frame (models/wan_vae.h). Euler on the
// discrete flow schedule shifted by 5, as sd.cpp runs it. A latent frame is four video
// frames after the first. Dimensions from the files.
//
// Image to video (Wan 2.1 I2V and FLF2V, Wan 2.2 I2V): the transformer also reads a clip
// holding the first frame (-i) and for FLF2V the last (--end-img), grey between, encoded
// by the VAE, behind a mask of the given frames (4 channels per latent frame: a latent
// frame covers 4 video frames); Wan 2.1's also attend to CLIP ViT-H's tokens of those
// frames (--clip_vision, pipeline/clip_vision_runner.h).
//
// Wan 2.2 TI2V-5B: Wan 2.2's autoencoder (48 channels, 16x per side) and a transformer that
// reads and predicts its latent; text to video, or from a first frame (-i, and --end-img
// for the last) encoded into the latent's first frame and kept there while the rest is
// sampled (ImageInput::PinnedFrames), the transformer seeing it clean at timestep 0.
//
// Wan 2.1 VACE: the T2V transformer with a second stream of VACE blocks (models/wan.h)
// reading a control video (--control-video) and a reference image (-i), each encoded by the
// VAE (ImageInput::ControlVideo); the reference is a latent frame of its own before the
// clip's, sampled with them and cut before decoding, as the reference implementation does.
//
// Wan 2.2 A14B is two such transformers, "experts" of one shape: the high-noise one
// (--high-noise-diffusion-model) samples the noisiest steps, the low-noise one the rest
// (the orchestrator splits the sigmas; ImageRequest::HighNoise).
#include <algorithm>

#include "pipeline/families/registry.h"
#include "pipeline/families/tokenizers.h"
#include "pipeline/flux_conditioner.h"
#include "pipeline/t5_only_conditioner.h"
#include "pipeline/wan_runner.h"
#include "tensor/error.h"
#include "weights/model_manager.h"

namespace sd::pipeline {

namespace {

using io::ModelVersion;

// Present when a high-noise expert's file was given.
const std::string kExpertPatchEmbedding =
    std::string(io::kHighNoiseUnetRoot) + "patch_embedding.weight";

class Wan final : public Family {
 public:
  static constexpr int64_t kMaskChannels = 4;  // video frames per latent frame

  Wan() : Family(io::ModelFamily::Wan, defaults()) {}

  void require_files(const ModelFiles& files) const override {
    SD_CHECK(files.contains(std::string(FluxConditioner::kT5Scope) + "shared.weight"),
             "Wan needs its umT5 text encoder: pass --t5xxl FILE (umt5_xxl_fp16.safetensors, or "
             "a umT5-XXL GGUF)");
    SD_CHECK(files.contains(std::string(io::kVaeRoot) + "decoder.conv1.weight"),
             "Wan needs its autoencoder: pass --vae FILE (wan_2.1_vae.safetensors)");
    SD_CHECK(files.contains(std::string(io::kVaeRoot) + "decoder.head.0.gamma"),
             "the --vae file is not a Wan causal autoencoder (no decoder.head.0.gamma): Wan "
             "2.1 and Wan 2.2 A14B take wan_2.1_vae.safetensors, Wan 2.2 TI2V-5B "
             "wan2.2_vae.safetensors");
    const std::string vision =
        std::string(io::kClipVisionRoot) + "vision_model.embeddings.patch_embedding.weight";
    if (files.contains(std::string(io::kUnetRoot) + "img_emb.proj.1.weight")) {
      SD_CHECK(!files.options.clip_vision.empty(),
               "this Wan image-to-video model attends to CLIP vision tokens: pass --clip_vision "
               "FILE (clip_vision_h.safetensors)");
      SD_CHECK(files.contains(vision),
               "the --clip_vision file %s holds no CLIP vision tower (no "
               "vision_model.embeddings.patch_embedding.weight): Wan takes CLIP ViT-H/14, "
               "clip_vision_h.safetensors",
               files.options.clip_vision.c_str());
    } else if (files.contains(vision))
      files.note(
          "warning: this Wan model reads no CLIP vision tokens; the --clip_vision file is "
          "not used");
    if (!files.options.high_noise_diffusion_model.empty())
      SD_CHECK(files.contains(kExpertPatchEmbedding),
               "the --high-noise-diffusion-model file %s holds no Wan transformer (no "
               "patch_embedding.weight): give Wan 2.2 A14B's high-noise expert",
               files.options.high_noise_diffusion_model.c_str());
    for (const char* clip : {"clip_l", "clip_g"})
      if (files.contains(std::string("text_encoders.") + clip +
                         ".transformer.text_model.embeddings.token_embedding.weight"))
        files.note(std::string("warning: Wan reads no CLIP text encoder; the --") + clip +
                   " file is not used");
  }

  Architecture architecture(ModelVersion version, const ModelFiles& files) const override {
    if (version != ModelVersion::Wan && version != ModelVersion::WanI2V &&
        version != ModelVersion::WanTI2V && version != ModelVersion::WanVace)
      fail_unsupported(version);
    Architecture arch;
    arch.version = version;
    const ShapeOf shape_of = files.shape_of();
    arch.wan = models::wan_config_from_shapes(
        io::kUnetRoot, [&](const std::string& name) { return shape_of(name); });
    arch.t5 = t5_config_from_shapes(models::T5Config::xxl(), FluxConditioner::kT5Scope, shape_of);
    arch.vae = wan_vae_config_from_shapes(vae_config(), io::kVaeRoot, shape_of);
    SD_CHECK(arch.t5->model_dim == arch.wan->text_dim,
             "the --t5xxl encoder gives %lld-wide tokens but the Wan transformer reads %lld (Wan "
             "takes umT5-XXL)",
             static_cast<long long>(arch.t5->model_dim),
             static_cast<long long>(arch.wan->text_dim));
    // Image to video reads the mask's 4 channels and the clip's latent besides the latent.
    const int64_t latent = arch.vae.latent_channels();
    const int64_t expected = version == ModelVersion::WanI2V ? 2 * latent + kMaskChannels : latent;
    SD_CHECK(arch.wan->in_channels == expected && arch.wan->out_channels == latent,
             "the --vae autoencoder has %lld latent channels but the Wan transformer reads %lld "
             "and predicts %lld: Wan 2.2 TI2V-5B takes wan2.2_vae.safetensors (48 channels), "
             "the other Wan models wan_2.1_vae.safetensors (16)",
             static_cast<long long>(latent), static_cast<long long>(arch.wan->in_channels),
             static_cast<long long>(arch.wan->out_channels));
    // VACE's context: the control video's latents twice and a latent pixel's f x f mask.
    if (arch.wan->vace_layers > 0) {
      const int64_t f = arch.vae.downscale();
      SD_CHECK(arch.wan->vace_in_channels == 2 * latent + f * f,
               "the Wan VACE transformer reads a %lld-channel context, but with this "
               "%lld-channel, %lldx autoencoder it is %lld (VACE takes wan_2.1_vae.safetensors)",
               static_cast<long long>(arch.wan->vace_in_channels), static_cast<long long>(latent),
               static_cast<long long>(f), static_cast<long long>(2 * latent + f * f));
    }
    if (files.contains(kExpertPatchEmbedding)) {
      arch.wan_high_noise = models::wan_config_from_shapes(
          io::kHighNoiseUnetRoot, [&](const std::string& name) { return shape_of(name); });
      // The experts take turns on one latent with one conditioning.
      const models::WanConfig& hi = *arch.wan_high_noise;
      const models::WanConfig& lo = *arch.wan;
      SD_CHECK(hi.in_channels == lo.in_channels && hi.out_channels == lo.out_channels &&
                   hi.text_dim == lo.text_dim && hi.image_dim == lo.image_dim &&
                   hi.vace_in_channels == lo.vace_in_channels,
               "the --high-noise-diffusion-model transformer (%lld -> %lld channels, %lld-wide "
               "text, %lld-wide image tokens) does not match the --diffusion-model one (%lld -> "
               "%lld, %lld, %lld): give the two experts of one Wan 2.2 A14B model",
               static_cast<long long>(hi.in_channels), static_cast<long long>(hi.out_channels),
               static_cast<long long>(hi.text_dim), static_cast<long long>(hi.image_dim),
               static_cast<long long>(lo.in_channels), static_cast<long long>(lo.out_channels),
               static_cast<long long>(lo.text_dim), static_cast<long long>(lo.image_dim));
    }
    if (arch.wan->image_dim > 0) {
      arch.clip_vision = models::clip_vision_config_from_shapes(io::kClipVisionRoot, shape_of);
      SD_CHECK(arch.clip_vision->hidden == arch.wan->image_dim,
               "the --clip_vision tower gives %lld-wide tokens but the Wan transformer reads %lld "
               "(Wan takes CLIP ViT-H/14: clip_vision_h.safetensors)",
               static_cast<long long>(arch.clip_vision->hidden),
               static_cast<long long>(arch.wan->image_dim));
    }
    return arch;
  }

  std::vector<std::string> text_encoder_roots(const Architecture&) const override {
    return {FluxConditioner::kT5Scope};
  }

  std::unique_ptr<PromptEncoder> make_prompt_encoder(const Architecture& arch,
                                                     const ModelFiles& files,
                                                     const NetworkPlaces& places) const override {
    // sd.cpp's T5 embedder for Wan: umT5 masks its own padding, the padding's outputs are
    // zeroed, and the transformer reads all 512 tokens unmasked.
    T5MaskOptions options;
    options.t5_mask = true;
    options.dit_mask = false;
    options.zero_masked = true;
    return std::make_unique<T5OnlyConditioner>(t5_tokenizer(files, /*umt5=*/true), *arch.t5,
                                               options, places.weights, places.text_backend,
                                               FluxConditioner::kT5Scope);
  }

  ImageInput image_input(ModelVersion version) const override {
    if (version == ModelVersion::WanTI2V) return ImageInput::PinnedFrames;
    if (version == ModelVersion::WanVace) return ImageInput::ControlVideo;
    return version == ModelVersion::WanI2V ? ImageInput::VideoFrames : ImageInput::None;
  }

  // The mask (Wan's: the given video frames, 4 per latent frame, the first latent frame
  // standing for the first video frame alone), then the clip's latent.
  std::vector<float> video_frames_input(const std::vector<float>& clip_latent, int64_t plane,
                                        int64_t frames, bool first_given,
                                        bool last_given) const override {
    std::vector<float> input(static_cast<size_t>(kMaskChannels * frames * plane), 0.0f);
    auto fill = [&](int64_t channel, int64_t frame) {
      std::fill_n(input.begin() + (channel * frames + frame) * plane, plane, 1.0f);
    };
    if (first_given)
      for (int64_t ch = 0; ch < kMaskChannels; ++ch) fill(ch, 0);
    if (last_given) fill(kMaskChannels - 1, frames - 1);  // the clip's last video frame
    input.insert(input.end(), clip_latent.begin(), clip_latent.end());
    return input;
  }

  std::unique_ptr<DiffusionNet> make_diffusion_net(const Architecture& arch,
                                                   const NetworkPlaces& places) const override {
    return std::make_unique<WanRunner>(places.weights, *arch.wan, places.diffusion_backend);
  }

  std::unique_ptr<DiffusionNet> make_high_noise_net(const Architecture& arch,
                                                    const NetworkPlaces& places) const override {
    if (!arch.wan_high_noise) return nullptr;
    return std::make_unique<WanRunner>(places.weights, *arch.wan_high_noise,
                                       places.diffusion_backend,
                                       std::string(io::kHighNoiseUnetRoot));
  }

 private:
  static FamilyDefaults defaults() {
    FamilyDefaults d;
    d.vae = models::VaeConfig::wan21;
    d.latent_channels = 16;
    d.latent_colors = LatentColors::Wan21;
    d.scale_factor = 1.0f;
    d.sample_method = sampling::SampleMethod::Euler;
    d.prediction = sampling::Prediction::Sd3Flow;  // discrete flow, t = 1000 sigma
    d.flow_shift = [](ModelVersion) { return 5.0f; };
    d.video_frame_stride = 4;
    return d;
  }
};

}  // namespace

const Family& wan_family() {
  static const Wan kFamily;
  return kFamily;
}

}  // namespace sd::pipeline
