// Qwen-Image (Qwen team 2025): the prompt in Qwen's chat template with a system prompt,
// through Qwen2.5-VL-7B's text model, whose final-normed last hidden states (the system
// prompt's 34 rows dropped) are the text tokens (pipeline/llm_conditioner.h); the MMDiT of
// models/qwen_image.h; the Wan 2.1 autoencoder's image path under its latent statistics
// (models/wan_vae.h). Euler on the discrete flow schedule shifted by 3, as sd.cpp runs it.
// Dimensions from the files. Qwen-Image-Edit (and 2509, 2511) is the same transformer
// given reference images (-r): Qwen2.5-VL's vision tower (--llm_vision, or visual.* in the
// --llm file) shows them to the text model in the edit template, and their latents join
// the image's tokens (pipeline/qwen_image_runner.h).
#include "io/name_conversion.h"
#include "pipeline/families/llm_family.h"
#include "pipeline/families/registry.h"
#include "pipeline/families/tokenizers.h"
#include "pipeline/llm_conditioner.h"
#include "pipeline/qwen_image_runner.h"
#include "pipeline/qwen_vision_runner.h"
#include "tensor/error.h"
#include "weights/model_manager.h"

namespace sd::pipeline {

namespace {

using io::ModelVersion;

const std::string kWanDecoder = std::string(io::kVaeRoot) + "decoder.head.0.gamma";

class QwenImage final : public LlmFamily {
 public:
  QwenImage() : LlmFamily(io::ModelFamily::QwenImage, defaults()) {}

  void require_files(const ModelFiles& files) const override {
    SD_CHECK(files.contains(io::kLlmEmbeddings),
             "Qwen-Image needs its Qwen2.5-VL text encoder: pass --llm FILE "
             "(qwen_2.5_vl_7b.safetensors, or a Qwen2.5-VL-7B GGUF)");
    SD_CHECK(files.contains(std::string(io::kVaeRoot) + "conv2.bias"),
             "Qwen-Image needs its autoencoder: pass --vae FILE (qwen_image_vae.safetensors, "
             "Wan 2.1's design)");
    SD_CHECK(files.contains(kWanDecoder),
             "the --vae file is not a Wan 2.1 autoencoder (no decoder.head.0.gamma): Qwen-Image "
             "takes qwen_image_vae.safetensors");
    SD_CHECK(
        !files.contains(std::string(io::kUnetRoot) + "time_text_embed.addition_t_embedding.weight"),
        "Qwen-Image-Layered is not supported yet; Qwen-Image and Qwen-Image-Edit "
        "(text-to-image and image-to-image) run");
    note_unused_encoders(files);
  }

  Architecture architecture(ModelVersion version, const ModelFiles& files) const override {
    if (version != ModelVersion::QwenImage) fail_unsupported(version);
    Architecture arch;
    arch.version = version;
    const ShapeOf shape_of = files.shape_of();
    arch.qwen_image = models::qwen_image_config_from_shapes(
        models::QwenImageConfig{}, io::kUnetRoot,
        [&](const std::string& name) { return shape_of(name); });
    arch.llm = llm_encoder_config(files, models::LlmConfig::qwen2_5_vl_7b(),
                                  "Qwen-Image takes Qwen2.5-VL-7B's text model "
                                  "(qwen_2.5_vl_7b.safetensors)");
    SD_CHECK(arch.llm->hidden == arch.qwen_image->text_dim,
             "the --llm encoder gives %lld-wide hidden states but the Qwen-Image transformer "
             "reads %lld (it takes Qwen2.5-VL-7B)",
             static_cast<long long>(arch.llm->hidden),
             static_cast<long long>(arch.qwen_image->text_dim));
    arch.qwen_image->zero_cond_t =
        files.contains(std::string(io::kUnetRoot) + "__index_timestep_zero__") ||
        files.model_args.qwen_image_zero_cond_t;
    try {
      arch.llm_vision = models::qwen_vision_config_from_shapes(
          io::kLlmVisionRoot, [&](const std::string& name) { return shape_of(name); });
    } catch (const Error& e) {
      fail("the --llm_vision file (or the --llm file's visual.* weights): %s", e.what());
    }
    arch.vae = wan_vae_config_from_shapes(vae_config(), io::kVaeRoot, shape_of);
    return arch;
  }

  void check_model_args(const ModelFiles& files) const override {
    const T5MaskOptions& chroma = files.model_args.chroma;
    if (chroma.t5_mask || !chroma.dit_mask)
      files.note("warning: --model-args chroma_* options are read by Chroma models only");
  }

  std::unique_ptr<PromptEncoder> make_prompt_encoder(const Architecture& arch,
                                                     const ModelFiles& files,
                                                     const NetworkPlaces& places) const override {
    // The system prompt's 34 tokens run through the LLM and are dropped after it; the final
    // norm's output of the last layer (Hugging Face's last_hidden_state) is read.
    LlmPromptFormat format;
    format.before =
        "<|im_start|>system\nDescribe the image by detailing the color, shape, size, texture, "
        "quantity, text, spatial relationships of the objects and background:<|im_end|>\n"
        "<|im_start|>user\n";
    format.after = "<|im_end|>\n<|im_start|>assistant\n";
    format.hidden_layers = {arch.llm->layers};
    format.drop_first = 34;
    std::unique_ptr<LlmConditioner> encoder =
        llm_prompt_encoder(arch, files, places, std::move(format));
    if (arch.llm_vision) {
      // With reference images: the edit template, each image as "Picture N: " and its
      // vision tokens, sized into 384^2 .. 560^2 pixels; its first 64 tokens are dropped.
      LlmImagePromptFormat edit;
      edit.before =
          "<|im_start|>system\nDescribe the key features of the input image (color, shape, "
          "size, texture, objects, background), then explain how the user's text instruction "
          "should alter or modify the image. Generate a new image that meets the user's "
          "requirements while maintaining consistency with the original input where "
          "appropriate.<|im_end|>\n<|im_start|>user\n";
      edit.label = "Picture ";
      edit.drop_first = 64;
      edit.min_pixels = 384 * 384;
      edit.max_pixels = 560 * 560;
      encoder->add_vision(
          std::make_unique<QwenVisionRunner>(places.weights, *arch.llm_vision, places.text_backend),
          std::move(edit));
    }
    return encoder;
  }

  std::unique_ptr<DiffusionNet> make_diffusion_net(const Architecture& arch,
                                                   const NetworkPlaces& places) const override {
    return std::make_unique<QwenImageRunner>(places.weights, *arch.qwen_image,
                                             places.diffusion_backend);
  }

 private:
  static FamilyDefaults defaults() {
    FamilyDefaults d;
    d.vae = models::VaeConfig::wan21;
    d.latent_channels = 16;
    d.latent_colors = LatentColors::Wan21;
    d.scale_factor = 1.0f;  // the latent statistics scale instead
    d.shift_factor = 0.0f;
    d.sample_method = sampling::SampleMethod::Euler;
    d.prediction = sampling::Prediction::Sd3Flow;  // discrete flow, t = 1000 sigma
    d.flow_shift = [](ModelVersion) { return 3.0f; };
    d.prompt_vision_flag = "--llm_vision";
    return d;
  }
};

}  // namespace

const Family& qwen_image_family() {
  static const QwenImage kFamily;
  return kFamily;
}

}  // namespace sd::pipeline
