#include "pipeline/flux_conditioner.h"

#include <algorithm>

#include "models/prompt_attention.h"
#include "pipeline/text_conditioner.h"
#include "tensor/error.h"

namespace sd::pipeline {

FluxConditioner::FluxConditioner(std::shared_ptr<const models::ClipTokenizer> clip_tokenizer,
                                 models::ClipTextConfig clip,
                                 std::shared_ptr<const models::T5Tokenizer> t5_tokenizer,
                                 models::T5Config t5, nn::Weights& weights, Backend& backend,
                                 std::string clip_scope, std::string t5_scope)
    : clip_tokenizer_(std::move(clip_tokenizer)),
      t5_tokenizer_(std::move(t5_tokenizer)),
      clip_(std::move(clip), weights, std::move(clip_scope)),
      t5_(std::move(t5), weights, std::move(t5_scope)),
      weights_(weights),
      runner_(backend) {
  SD_CHECK(clip_tokenizer_ && t5_tokenizer_, "[flux conditioner] missing tokenizer");
  SD_CHECK(t5_tokenizer_->vocab_size() <= t5_.config().vocab_size,
           "the T5 tokenizer has %lld pieces but the T5 model only %lld embeddings: the "
           "tokenizer.json does not belong to this --t5xxl file",
           static_cast<long long>(t5_tokenizer_->vocab_size()),
           static_cast<long long>(t5_.config().vocab_size));
}

std::vector<float> FluxConditioner::clip_pooled(const std::string& prompt) {
  const models::TokenChunks chunks =
      models::tokenize_prompt(*clip_tokenizer_, prompt, clip_.config().pad_token);
  // The first window only; the pooled vector is taken after the last layer whatever
  // clip_skip says (sd.cpp).
  return clip_.encode(runner_, chunks.ids.data(), 1, false, true).pooled;
}

Conditioning FluxConditioner::encode(const std::string& prompt, int /*clip_skip*/) {
  Conditioning out;
  out.vector = clip_pooled(prompt);

  const models::T5Chunks chunks = models::t5_tokenize_prompt(*t5_tokenizer_, prompt);
  const int64_t window = models::kT5ChunkLength;
  const int64_t windows = static_cast<int64_t>(chunks.ids.size()) / window;
  out.dim = t5_.config().model_dim;
  out.tokens = windows * window;
  out.context.reserve(static_cast<size_t>(out.dim * out.tokens));
  for (int64_t w = 0; w < windows; ++w) {
    std::vector<float> hidden = t5_.encode(runner_, chunks.ids.data() + w * window, window);
    const std::vector<float> weights(chunks.weights.begin() + w * window,
                                     chunks.weights.begin() + (w + 1) * window);
    apply_token_weights(hidden, out.dim, weights);
    out.context.insert(out.context.end(), hidden.begin(), hidden.end());
  }
  return out;
}

std::vector<nn::ParamDecl> FluxConditioner::parameters() const {
  nn::ParamRecorder recorder(weights_);
  clip_.declare(recorder);
  t5_.declare(recorder);
  return recorder.params();
}

}  // namespace sd::pipeline
