// Prompt text -> FLUX.1's conditioning, as sd.cpp's FluxCLIPEmbedder computes it: the
// prompt's emphasis parsed once; T5-XXL's last hidden states over 256-token windows (the
// prompt, </s>, <pad> up to the window; per-token weights applied) as the context, and
// CLIP-L's pooled output of the first 77-token window (the final-LayerNorm state at the
// first end-of-text token, no projection) as the vector.
#pragma once

#include <memory>
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

class FluxConditioner final : public PromptEncoder {
 public:
  // `weights` holds CLIP-L under `clip_scope` (HF CLIP names) and T5 under `t5_scope`; it
  // must outlive this object, as must `backend`.
  FluxConditioner(std::shared_ptr<const models::ClipTokenizer> clip_tokenizer,
                  models::ClipTextConfig clip,
                  std::shared_ptr<const models::T5Tokenizer> t5_tokenizer, models::T5Config t5,
                  nn::Weights& weights, Backend& backend, std::string clip_scope = kClipScope,
                  std::string t5_scope = kT5Scope);

  Conditioning encode(const std::string& prompt, int clip_skip = 0) override;
  std::vector<nn::ParamDecl> parameters() const override;
  std::string streaming_report() const override { return runner_.streaming_report(); }
  void release() override { runner_.release(); }

  // The canonical scopes of the two encoders (--clip_l and --t5xxl files land there).
  static constexpr const char* kClipScope = "cond_stage_model.transformer.text_model.";
  static constexpr const char* kT5Scope = "text_encoders.t5xxl.transformer.";

 private:
  std::vector<float> clip_pooled(const std::string& prompt);

  std::shared_ptr<const models::ClipTokenizer> clip_tokenizer_;
  std::shared_ptr<const models::T5Tokenizer> t5_tokenizer_;
  ClipWindowEncoder clip_;
  T5WindowEncoder t5_;
  nn::Weights& weights_;
  nn::GraphRunner runner_;
};

}  // namespace sd::pipeline
