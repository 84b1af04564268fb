#include "pipeline/llm_conditioner.h"

#include "io/image.h"
#include "models/prompt_attention.h"
#include "nn/param_recorder.h"
#include "pipeline/image_tensor.h"
#include "pipeline/text_conditioner.h"
#include "tensor/error.h"

namespace sd::pipeline {

LlmTokens llm_tokenize_prompt(const models::BpeTokenizer& tokenizer, const LlmPromptFormat& format,
                              const std::string& prompt) {
  LlmTokens out;
  auto append = [&](const std::string& text, float weight) {
    const std::vector<int> ids = tokenizer.encode(text);
    out.ids.insert(out.ids.end(), ids.begin(), ids.end());
    out.weights.insert(out.weights.end(), ids.size(), weight);
  };
  append(format.before, 1.0f);
  for (const models::PromptPiece& piece : models::parse_prompt_attention(prompt)) {
    // BREAK cuts CLIP's 75-token windows; an LLM reads the prompt whole.
    if (piece.is_break()) continue;
    append(piece.text, piece.weight);
  }
  append(format.after, 1.0f);
  return out;
}

LlmImageTokens llm_tokenize_image_prompt(const models::BpeTokenizer& tokenizer,
                                         const LlmPromptFormat& format,
                                         const LlmImagePromptFormat& images,
                                         const std::vector<int64_t>& image_tokens,
                                         const std::string& prompt) {
  const int pad = tokenizer.token_id("<|image_pad|>");
  SD_CHECK(pad >= 0, "the tokenizer has no '<|image_pad|>' token: it cannot show images");
  LlmImageTokens out;
  LlmPromptFormat text = format;
  text.before.clear();
  auto append = [&](const std::string& piece) {
    const std::vector<int> ids = tokenizer.encode(piece);
    out.tokens.ids.insert(out.tokens.ids.end(), ids.begin(), ids.end());
  };
  append(images.before);
  for (size_t i = 0; i < image_tokens.size(); ++i) {
    append(images.label + std::to_string(i + 1) + ": <|vision_start|>");
    out.image_at.push_back(static_cast<int64_t>(out.tokens.ids.size()));
    out.tokens.ids.insert(out.tokens.ids.end(), static_cast<size_t>(image_tokens[i]), pad);
    append("<|vision_end|>");
  }
  out.tokens.weights.assign(out.tokens.ids.size(), 1.0f);
  const LlmTokens rest = llm_tokenize_prompt(tokenizer, text, prompt);
  out.tokens.ids.insert(out.tokens.ids.end(), rest.ids.begin(), rest.ids.end());
  out.tokens.weights.insert(out.tokens.weights.end(), rest.weights.begin(), rest.weights.end());
  return out;
}

LlmConditioner::LlmConditioner(std::shared_ptr<const models::BpeTokenizer> tokenizer,
                               models::LlmConfig config, LlmPromptFormat format,
                               nn::Weights& weights, Backend& backend, std::string scope)
    : tokenizer_(std::move(tokenizer)),
      config_(std::move(config)),
      format_(std::move(format)),
      weights_(weights),
      scope_(std::move(scope)),
      runner_(backend) {
  SD_CHECK(tokenizer_, "[llm conditioner] missing tokenizer");
  SD_CHECK(!format_.hidden_layers.empty(), "[llm conditioner] no hidden layer asked for");
  if (format_.min_tokens > 0) {
    pad_id_ = tokenizer_->token_id(format_.pad_token);
    SD_CHECK(pad_id_ >= 0,
             "the tokenizer has no '%s' token to pad prompts with: it is not a %s tokenizer",
             format_.pad_token.c_str(), models::llm_arch_name(config_.arch));
  }
  for (const std::string& token : format_.special_tokens)
    SD_CHECK(tokenizer_->token_id(token) >= 0,
             "the tokenizer has no '%s' token: it is not the %s text encoder's tokenizer",
             token.c_str(), models::llm_arch_name(config_.arch));
  SD_CHECK(tokenizer_->vocab_size() <= config_.vocab_size,
           "the tokenizer has %lld tokens but the --llm text encoder only %lld embeddings: the "
           "tokenizer.json does not belong to this %s file",
           static_cast<long long>(tokenizer_->vocab_size()),
           static_cast<long long>(config_.vocab_size), models::llm_arch_name(config_.arch));
}

void LlmConditioner::add_vision(std::unique_ptr<QwenVisionRunner> vision,
                                LlmImagePromptFormat format) {
  SD_CHECK(vision && vision->config().out_hidden == config_.hidden,
           "the vision tower gives %lld-wide image tokens but the %s text encoder reads %lld: "
           "the --llm_vision file belongs to another model",
           static_cast<long long>(vision ? vision->config().out_hidden : 0),
           models::llm_arch_name(config_.arch), static_cast<long long>(config_.hidden));
  for (const char* token : {"<|vision_start|>", "<|vision_end|>", "<|image_pad|>"})
    SD_CHECK(tokenizer_->token_id(token) >= 0,
             "the tokenizer has no '%s' token: it is not the %s text encoder's tokenizer", token,
             models::llm_arch_name(config_.arch));
  vision_ = std::move(vision);
  image_format_ = std::move(format);
}

void LlmConditioner::set_prompt_images(std::vector<const io::Image*> images) {
  images_ = std::move(images);
  seen_.clear();
}

const std::vector<LlmConditioner::SeenImage>& LlmConditioner::seen_images() {
  if (!seen_.empty() || images_.empty()) return seen_;
  const models::QwenVisionConfig& c = vision_->config();
  for (const io::Image* image : images_) {
    const auto [w, h] = models::qwen_vision_size(
        c, image->width, image->height, image_format_.min_pixels, image_format_.max_pixels);
    SeenImage seen;
    seen.tokens = vision_->encode(image_to_planes(io::to_channels(*image, 3)), image->width,
                                  image->height, w, h);
    seen.n = (w / c.factor()) * (h / c.factor());
    seen_.push_back(std::move(seen));
  }
  vision_->release();
  return seen_;
}

std::string LlmConditioner::streaming_report() const {
  std::string report = runner_.streaming_report();
  if (vision_) report += vision_->streaming_report();
  return report;
}

void LlmConditioner::release() {
  runner_.release();
  if (vision_) vision_->release();
}

std::vector<Tensor*> LlmConditioner::build(nn::GraphCall& call, nn::Weights& weights,
                                           const std::vector<int>& ids, int64_t valid,
                                           models::LlmRope& rope, std::vector<float>& mask,
                                           const std::vector<SeenImage>& images,
                                           const std::vector<int64_t>& image_at) const {
  const auto len = static_cast<int64_t>(ids.size());
  rope = models::llm_rope(config_, len);
  mask = models::llm_causal_mask(len, valid);
  Tensor* t_ids = call.input("llm_ids", DType::I32, make_shape({len}), ids.data());
  Tensor* cos =
      call.input_f32("llm_rope_cos", make_shape({config_.head_dim / 2, len}), rope.cos.data());
  Tensor* sin =
      call.input_f32("llm_rope_sin", make_shape({config_.head_dim / 2, len}), rope.sin.data());
  Tensor* causal = call.input_f32("llm_mask", make_shape({len, len}), mask.data());
  std::vector<models::LlmInsertedRows> inserted;
  for (size_t i = 0; i < images.size(); ++i)
    inserted.push_back({image_at[i], call.input_f32("llm_image_" + std::to_string(i),
                                                    make_shape({config_.hidden, images[i].n}),
                                                    images[i].tokens.data())});
  return models::llm_forward(nn::Scope(call.ctx(), weights, scope_), config_, t_ids, cos, sin,
                             causal, format_.hidden_layers, inserted);
}

Conditioning LlmConditioner::encode(const std::string& prompt, int /*clip_skip*/) {
  const bool with_images = !images_.empty();
  const std::vector<SeenImage>& images = seen_images();
  LlmTokens tokens;
  std::vector<int64_t> image_at;
  if (with_images) {
    std::vector<int64_t> counts;
    for (const SeenImage& image : images) counts.push_back(image.n);
    LlmImageTokens t =
        llm_tokenize_image_prompt(*tokenizer_, format_, image_format_, counts, prompt);
    tokens = std::move(t.tokens);
    image_at = std::move(t.image_at);
  } else {
    tokens = llm_tokenize_prompt(*tokenizer_, format_, prompt);
  }
  const auto valid = static_cast<int64_t>(tokens.ids.size());
  if (valid < format_.min_tokens) {
    tokens.ids.resize(static_cast<size_t>(format_.min_tokens), pad_id_);
    tokens.weights.resize(tokens.ids.size(), 1.0f);
  }
  const auto len = static_cast<int64_t>(tokens.ids.size());
  SD_CHECK(len > 0, "[llm conditioner] the prompt template gave no tokens");
  SD_CHECK(len <= kLlmMaxPromptTokens,
           "the prompt is %lld tokens with its template; the %s text encoder reads at most %lld "
           "here: shorten the prompt",
           static_cast<long long>(len), models::llm_arch_name(config_.arch),
           static_cast<long long>(kLlmMaxPromptTokens));
  nn::GraphCall call;
  models::LlmRope rope;
  std::vector<float> mask;
  const std::vector<Tensor*> outputs =
      build(call, weights_, tokens.ids, valid, rope, mask, images, image_at);
  const std::vector<std::vector<float>> layers = runner_.run(call, outputs);
  weights_.after_compute();

  // Each layer's [hidden, len] side by side per token: [hidden * layers, len].
  const int64_t hidden = config_.hidden;
  Conditioning out;
  out.dim = hidden * static_cast<int64_t>(layers.size());
  out.tokens = len;
  out.context.resize(static_cast<size_t>(out.dim * len));
  for (int64_t t = 0; t < len; ++t)
    for (size_t l = 0; l < layers.size(); ++l)
      std::copy_n(layers[l].begin() + t * hidden, hidden,
                  out.context.begin() + t * out.dim + static_cast<int64_t>(l) * hidden);
  apply_token_weights(out.context, out.dim, tokens.weights);
  const int64_t drop = with_images ? image_format_.drop_first : format_.drop_first;
  if (drop > 0) {
    SD_CHECK(drop < out.tokens,
             "[llm conditioner] the template has %lld tokens to drop, the prompt %lld in all",
             static_cast<long long>(drop), static_cast<long long>(out.tokens));
    out.context.erase(out.context.begin(), out.context.begin() + drop * out.dim);
    out.tokens -= drop;
  }
  if (out.tokens < format_.min_rows) {
    out.context.resize(static_cast<size_t>(format_.min_rows * out.dim), 0.0f);
    out.tokens = format_.min_rows;
  }
  return out;
}

std::vector<nn::ParamDecl> LlmConditioner::parameters() const {
  nn::ParamRecorder recorder(weights_);
  nn::GraphCall call;
  const std::vector<int> ids = {0, 0};
  models::LlmRope rope;
  std::vector<float> mask;
  build(call, recorder, ids, 2, rope, mask);
  std::vector<nn::ParamDecl> params = recorder.params();
  if (vision_) {
    const std::vector<nn::ParamDecl> seen = vision_->parameters();
    params.insert(params.end(), seen.begin(), seen.end());
  }
  return params;
}

}  // namespace sd::pipeline
