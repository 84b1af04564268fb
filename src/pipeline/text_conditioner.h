// Prompt text -> the UNet's cross-attention context, as sd.cpp's FrozenCLIPEmbedder
// computes it for SD1.x/SD2.x/SDXL: emphasis parsed, tokens in 77-token windows, each window
// through the CLIP text encoder (SDXL: both encoders, their hidden states concatenated per
// token), per-token weights applied, windows concatenated. SDXL's second encoder also gives
// the pooled vector of the first window.
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "backend/backend.h"
#include "io/name_conversion.h"
#include "models/clip_text.h"
#include "models/clip_tokenizer.h"
#include "models/embeddings.h"
#include "nn/graph_runner.h"
#include "nn/param_recorder.h"
#include "nn/weights.h"
#include "pipeline/conditioning.h"
#include "pipeline/prompt_encoder.h"

namespace sd::pipeline {

// A text encoder: its shapes and the weight scope of its HF CLIP names.
struct TextEncoderSetup {
  models::ClipTextConfig config;
  std::string scope;
};

class TextConditioner final : public PromptEncoder {
 public:
  // `weights` holds the encoder under `scope` and must outlive this object, as must
  // `backend`. `embeddings_dir`: textual-inversion files (optional); a file is read the
  // first time its word appears in a prompt.
  TextConditioner(std::shared_ptr<const models::ClipTokenizer> tokenizer,
                  models::ClipTextConfig config, nn::Weights& weights, Backend& backend,
                  std::string embeddings_dir = {}, std::string scope = kScope,
                  std::optional<TextEncoderSetup> second = std::nullopt);
  // The tokenizer's special-word hook points at this object.
  TextConditioner(const TextConditioner&) = delete;
  TextConditioner& operator=(const TextConditioner&) = delete;

  // The context for one prompt. clip_skip <= 0 takes the config's default (SD1: 1,
  // SD2: 2).
  Conditioning encode(const std::string& prompt, int clip_skip = 0) override;
  int max_clip_skip() const override {
    return second_ ? std::min(config_.layers, second_->config.layers) : config_.layers;
  }

  // The windows and weights encode() feeds the encoder (for tests and debugging).
  models::TokenChunks tokenize(const std::string& prompt);

  const models::ClipTextConfig& config() const { return config_; }
  // Every weight the encoder reads, with its shape (graph built, nothing computed).
  std::vector<nn::ParamDecl> parameters() const override;
  // Frees the encoder's compute buffer (the text phase is over).
  std::string streaming_report() const override { return runner_.streaming_report(); }
  void release() override { runner_.release(); }

  // The weight scope of the (first) text encoder in canonical checkpoints: HF CLIP names
  // below the text-encoder root.
  static constexpr const char* kScope = "cond_stage_model.transformer.text_model.";
  // SDXL's second encoder (OpenCLIP ViT-bigG).
  static constexpr const char* kScope2 = "cond_stage_model.1.transformer.text_model.";
  static_assert(std::string_view(kScope).substr(0, io::kTextEncoderRoot.size()) ==
                io::kTextEncoderRoot);

 private:
  std::vector<int> embedding_ids(const std::string& word);
  // A single encoder with a text projection (the SDXL refiner's OpenCLIP-bigG) also gives
  // the pooled vector of the first window.
  bool pools_alone() const { return !second_ && config_.projection_dim > 0; }

  std::shared_ptr<const models::ClipTokenizer> tokenizer_;
  models::ClipTextConfig config_;
  std::string scope_;
  std::optional<TextEncoderSetup> second_;
  nn::Weights& weights_;
  nn::GraphRunner runner_;
  std::map<std::string, std::string> embedding_files_;  // word -> path
  models::ClipTokenizer::SpecialWords special_;
  models::CustomEmbeddings custom_;
  models::CustomEmbeddings custom2_;      // the second encoder's rows, with the same ids (SDXL)
  std::map<std::string, bool> unusable_;  // words whose file has no vector of our width
};

// sd.cpp's prompt weighting for one window: scale each token's hidden state by its weight,
// then rescale everything so the mean over the window is what it was. `hidden` is
// [dim, weights.size()]; all-one weights leave it untouched.
void apply_token_weights(std::vector<float>& hidden, int64_t dim,
                         const std::vector<float>& weights);

// SDXL's vector (sd_xl_base.yaml's vector embedders, as sd.cpp builds it): the pooled text
// vector, then 256-dim sinusoidal embeddings of the original size (height, width), the crop
// corner (0, 0) and the target size (height, width).
std::vector<float> sdxl_vector(const std::vector<float>& pooled, int width, int height);
inline constexpr int64_t kSdxlSizeEmbeddingDim = 256;

// The SDXL refiner's vector (sd_xl_refiner.yaml's vector embedders): the pooled text vector,
// then 256-dim sinusoidal embeddings of the original size (height, width), the crop corner
// (0, 0) and the aesthetic score.
std::vector<float> sdxl_refiner_vector(const std::vector<float>& pooled, int width, int height,
                                       float aesthetic_score);
// The scores the refiner is conditioned on: diffusers' StableDiffusionXLImg2ImgPipeline and
// SGM's sampling demo use 6 for the prompt and 2.5 for the negative prompt.
inline constexpr float kRefinerAestheticScore = 6.0f;
inline constexpr float kRefinerNegativeAestheticScore = 2.5f;

}  // namespace sd::pipeline
