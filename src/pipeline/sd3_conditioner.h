// Prompt text -> SD3's conditioning, as sd.cpp's SD3CLIPEmbedder computes it: per 77-token
// window, CLIP-L's and CLIP-G's clip-skipped hidden states (penultimate layer by default,
// no final LayerNorm; per-token weights applied) side by side, zero-padded from 768 + 1280
// to T5's 4096 channels, followed by T5-XXL's 77 tokens of the same window: 154 context
// tokens a window. The vector is the two pooled outputs of the first window (CLIP-L's
// final-LayerNorm EOS state, CLIP-G's projected by text_projection), 768 + 1280 values.
// Without a T5 file its tokens are zeros, as in the reference.
#pragma once

#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "models/clip_text.h"
#include "models/clip_tokenizer.h"
#include "models/t5.h"
#include "models/t5_tokenizer.h"
#include "nn/graph_runner.h"
#include "nn/weights.h"
#include "pipeline/prompt_encoder.h"
#include "pipeline/text_windows.h"

namespace sd::pipeline {

// One encoder's config and where its weights live.
struct Sd3Encoder {
  models::ClipTextConfig config;
  std::string scope;
};

class Sd3Conditioner final : public PromptEncoder {
 public:
  // The T5 width SD3's context is padded to (its context_embedder's input).
  static constexpr int64_t kContextDim = 4096;
  // Where an SD3 checkpoint keeps its encoders (sd.cpp's names). Files given with
  // --clip_l, --clip_g and --t5xxl land under the UNet-family roots instead
  // (io::file_prefix), so the pipeline looks in both.
  static constexpr const char* kClipLScope = "text_encoders.clip_l.transformer.text_model.";
  static constexpr const char* kClipGScope = "text_encoders.clip_g.transformer.text_model.";
  static constexpr const char* kT5Scope = "text_encoders.t5xxl.transformer.";

  // `t5` and `t5_tokenizer` unset: no T5 file, zeros in its place. `weights` and `backend`
  // must outlive this object.
  Sd3Conditioner(std::shared_ptr<const models::ClipTokenizer> tokenizer, Sd3Encoder clip_l,
                 Sd3Encoder clip_g, std::shared_ptr<const models::T5Tokenizer> t5_tokenizer,
                 std::optional<models::T5Config> t5, std::string t5_scope, nn::Weights& weights,
                 Backend& backend);

  Conditioning encode(const std::string& prompt, int clip_skip) override;
  int max_clip_skip() const override {
    return std::min(clip_l_.config().layers, clip_g_.config().layers);
  }
  std::vector<nn::ParamDecl> parameters() const override;
  std::string streaming_report() const override { return runner_.streaming_report(); }
  void release() override { runner_.release(); }

 private:
  struct ClipWindow {
    std::vector<float> hidden;  // [hidden, 77], token weights applied
    std::vector<float> pooled;  // first window only
  };
  ClipWindow clip_window(const ClipWindowEncoder& encoder, const models::TokenChunks& chunks,
                         int64_t window, int clip_skip);
  std::vector<float> t5_window(const models::T5Chunks& chunks, int64_t window);

  std::shared_ptr<const models::ClipTokenizer> tokenizer_;
  ClipWindowEncoder clip_l_, clip_g_;
  std::shared_ptr<const models::T5Tokenizer> t5_tokenizer_;
  std::optional<T5WindowEncoder> t5_;
  nn::Weights& weights_;
  nn::GraphRunner runner_;
};

}  // namespace sd::pipeline
