// Prompt text -> conditioning from T5 alone, as sd.cpp's T5-only embedder computes it for
// Chroma (T5-XXL) and Wan (umT5-XXL): the prompt's emphasis parsed once; T5's last hidden
// states over 512-token windows (the prompt, </s>, <pad> up to the window; per-token weights
// applied) as the context, and no vector. The padding mask (0 for prompt tokens and </s>,
// -inf for <pad>) masks T5's own attention when asked (Chroma's chroma_use_t5_mask; Wan
// always), with its first t5_mask_pad padding tokens let through the transformer's attention
// to the text (chroma_use_dit_mask), and the padding's outputs zeroed when asked (Wan).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "models/t5.h"
#include "models/t5_tokenizer.h"
#include "nn/graph_runner.h"
#include "nn/weights.h"
#include "pipeline/model_args.h"
#include "pipeline/prompt_encoder.h"
#include "pipeline/text_windows.h"

namespace sd::pipeline {

// Tokens per T5 window (sd.cpp: chunk_len 512).
inline constexpr int kT5WindowLength = 512;

// The additive mask of `ids` in windows of `window` tokens (t5_tokenize_prompt's): 0 for the
// prompt's tokens and </s>, -inf for the padding after it.
std::vector<float> t5_padding_mask(const std::vector<int>& ids, int64_t window);
// The mask the transformer reads: `mask` with its first `pad` masked tokens attended again.
std::vector<float> attend_padding(std::vector<float> mask, int pad);

class T5OnlyConditioner final : public PromptEncoder {
 public:
  // `weights` holds T5 under `t5_scope` (Hugging Face names); it must outlive this object,
  // as must `backend`.
  T5OnlyConditioner(std::shared_ptr<const models::T5Tokenizer> tokenizer, models::T5Config t5,
                    T5MaskOptions options, nn::Weights& weights, Backend& backend,
                    std::string t5_scope);

  Conditioning encode(const std::string& prompt, int clip_skip = 0) override;
  std::vector<nn::ParamDecl> parameters() const override;
  std::string streaming_report() const override { return runner_.streaming_report(); }
  void release() override { runner_.release(); }

 private:
  std::shared_ptr<const models::T5Tokenizer> tokenizer_;
  T5WindowEncoder t5_;
  T5MaskOptions options_;
  nn::Weights& weights_;
  nn::GraphRunner runner_;
};

}  // namespace sd::pipeline
