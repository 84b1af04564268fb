// Prompt text -> the hidden states of a decoder LLM, the conditioning of the image models
// after FLUX.1 (Z-Image, FLUX.2, Qwen-Image), as sd.cpp's LLM embedder computes it:
//   1. the prompt's emphasis is parsed ("(word:1.3)"); the family's chat template is put
//      around it, its parts tokenized apart with weight 1, each emphasis run with its own;
//   2. the whole sequence (no truncation; padded where the family pads, the padding masked
//      as keys) runs through the decoder under a causal mask, up to the deepest layer the
//      family reads; a prompt of more than
//      kLlmMaxPromptTokens is refused (the reference reads any length, but the mask grows
//      with the square of it: 40k tokens would take 6.7 GB);
//   3. the layers asked for are concatenated per token (a single layer for Z-Image), and
//      the prompt weights applied with the mean kept (apply_token_weights).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "models/bpe_tokenizer.h"
#include "models/llm.h"
#include "nn/graph_runner.h"
#include "nn/weights.h"
#include "pipeline/prompt_encoder.h"
#include "pipeline/qwen_vision_runner.h"

namespace sd::pipeline {

inline constexpr int64_t kLlmMaxPromptTokens = 8192;

// How a family wraps the user's prompt, and which hidden states it reads.
struct LlmPromptFormat {
  std::string before;  // the chat template up to the user's text
  std::string after;   // and after it
  // Hugging Face's hidden_states indices (llm_forward's hidden_layers), concatenated per
  // token in this order.
  std::vector<int> hidden_layers;
  // Shorter sequences are padded with pad_token up to this many tokens (FLUX.2 klein: 512
  // with <|endoftext|>). The padding is masked as attention keys, but its rows are the
  // decoder's outputs like any other and are passed on.
  int64_t min_tokens = 0;
  std::string pad_token;  // the token's text
  // Rows dropped from the front after the prompt weights are applied (Qwen-Image: its
  // 34-token system prompt); the weights' mean still counts them, as the reference's does.
  int64_t drop_first = 0;
  // Outputs shorter than this many rows get zero rows appended (FLUX.2 dev: 512); the
  // decoder itself reads only the prompt's tokens.
  int64_t min_rows = 0;
  // The template's special tokens: a tokenizer without them belongs to another model.
  std::vector<std::string> special_tokens;
};

// How a family shows the LLM images before the prompt (Qwen-Image-Edit): `before`, then per
// image its label ("Picture 1: "), <|vision_start|>, one <|image_pad|> per vision token
// (each replaced by the token), <|vision_end|>; then the prompt and LlmPromptFormat::after.
struct LlmImagePromptFormat {
  std::string before;
  std::string label = "Picture ";  // followed by the image's number from 1 and ": "
  int64_t drop_first = 0;          // in place of LlmPromptFormat::drop_first
  // The area (pixels) each image is resized into for the vision tower.
  int64_t min_pixels = 0, max_pixels = 0;
};

// The token ids of `prompt` in `format`, and each token's emphasis weight.
struct LlmTokens {
  std::vector<int> ids;
  std::vector<float> weights;
};
LlmTokens llm_tokenize_prompt(const models::BpeTokenizer& tokenizer, const LlmPromptFormat& format,
                              const std::string& prompt);

// The token ids of `prompt` shown `image_tokens[i]` vision tokens per image, and where
// each image's run of <|image_pad|> starts.
struct LlmImageTokens {
  LlmTokens tokens;
  std::vector<int64_t> image_at;
};
LlmImageTokens llm_tokenize_image_prompt(const models::BpeTokenizer& tokenizer,
                                         const LlmPromptFormat& format,
                                         const LlmImagePromptFormat& images,
                                         const std::vector<int64_t>& image_tokens,
                                         const std::string& prompt);

class LlmConditioner final : public PromptEncoder, public PromptImageInput {
 public:
  // `weights` holds the decoder under `scope` (model.embed_tokens.weight, ...); it must
  // outlive this object, as must `backend`. Throws sd::Error when the tokenizer has ids the
  // decoder has no embedding for (a tokenizer of another model).
  LlmConditioner(std::shared_ptr<const models::BpeTokenizer> tokenizer, models::LlmConfig config,
                 LlmPromptFormat format, nn::Weights& weights, Backend& backend, std::string scope);

  // Lets prompts be read with images, through `vision` (its weights in the same `weights`)
  // in `format`. Throws sd::Error when the tower's tokens are not the decoder's width or
  // the tokenizer lacks the vision tokens.
  void add_vision(std::unique_ptr<QwenVisionRunner> vision, LlmImagePromptFormat format);

  // clip_skip does not apply to an LLM and is ignored.
  Conditioning encode(const std::string& prompt, int clip_skip) override;
  std::vector<nn::ParamDecl> parameters() const override;
  std::string streaming_report() const override;
  void release() override;
  PromptImageInput* prompt_images() override { return vision_ ? this : nullptr; }
  void set_prompt_images(std::vector<const io::Image*> images) override;

 private:
  // An image's vision tokens f32 [hidden, n].
  struct SeenImage {
    std::vector<float> tokens;
    int64_t n = 0;
  };
  // The decoder's graph over `ids`, built alike for a run and for the parameter list.
  // `valid`: the tokens before the padding; `images` replace the rows from `image_at`.
  std::vector<Tensor*> build(nn::GraphCall& call, nn::Weights& weights, const std::vector<int>& ids,
                             int64_t valid, models::LlmRope& rope, std::vector<float>& mask,
                             const std::vector<SeenImage>& images = {},
                             const std::vector<int64_t>& image_at = {}) const;
  // The images' vision tokens, computed once for all the prompts read with them.
  const std::vector<SeenImage>& seen_images();

  std::shared_ptr<const models::BpeTokenizer> tokenizer_;
  models::LlmConfig config_;
  LlmPromptFormat format_;
  int pad_id_ = -1;
  nn::Weights& weights_;
  std::string scope_;
  nn::GraphRunner runner_;
  std::unique_ptr<QwenVisionRunner> vision_;
  LlmImagePromptFormat image_format_;
  std::vector<const io::Image*> images_;
  std::vector<SeenImage> seen_;  // of images_, once computed
};

}  // namespace sd::pipeline
