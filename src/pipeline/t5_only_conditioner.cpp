#include "pipeline/t5_only_conditioner.h"

#include <algorithm>
#include <cmath>

#include "pipeline/text_conditioner.h"
#include "tensor/error.h"

namespace sd::pipeline {

std::vector<float> t5_padding_mask(const std::vector<int>& ids, int64_t window) {
  // Each window is prompt tokens, </s>, then padding: what follows its last </s> is padding.
  std::vector<float> mask(ids.size(), 0.0f);
  for (size_t start = 0; start < ids.size(); start += static_cast<size_t>(window)) {
    const size_t end = std::min(ids.size(), start + static_cast<size_t>(window));
    size_t eos = end;
    for (size_t i = start; i < end; ++i)
      if (ids[i] == models::kT5EosToken) eos = i;
    for (size_t i = eos + 1; i < end; ++i) mask[i] = -INFINITY;
  }
  return mask;
}

std::vector<float> attend_padding(std::vector<float> mask, int pad) {
  int opened = 0;
  for (float& m : mask) {
    if (opened >= pad) break;
    if (std::isinf(m)) {
      m = 0.0f;
      ++opened;
    }
  }
  return mask;
}

T5OnlyConditioner::T5OnlyConditioner(std::shared_ptr<const models::T5Tokenizer> tokenizer,
                                     models::T5Config t5, T5MaskOptions options,
                                     nn::Weights& weights, Backend& backend, std::string t5_scope)
    : tokenizer_(std::move(tokenizer)),
      t5_(std::move(t5), weights, std::move(t5_scope)),
      options_(options),
      weights_(weights),
      runner_(backend) {
  SD_CHECK(tokenizer_, "[chroma conditioner] missing tokenizer");
  SD_CHECK(tokenizer_->vocab_size() <= t5_.config().vocab_size,
           "the T5 tokenizer has %lld pieces but the T5 model only %lld embeddings: the "
           "tokenizer.json does not belong to this --t5xxl file",
           static_cast<long long>(tokenizer_->vocab_size()),
           static_cast<long long>(t5_.config().vocab_size));
}

Conditioning T5OnlyConditioner::encode(const std::string& prompt, int /*clip_skip*/) {
  const models::T5Chunks chunks = models::t5_tokenize_prompt(*tokenizer_, prompt, kT5WindowLength);
  const std::vector<float> mask = t5_padding_mask(chunks.ids, kT5WindowLength);
  const int64_t window = kT5WindowLength;
  const int64_t windows = static_cast<int64_t>(chunks.ids.size()) / window;
  Conditioning out;
  out.dim = t5_.config().model_dim;
  out.tokens = windows * window;
  out.context.reserve(static_cast<size_t>(out.dim * out.tokens));
  for (int64_t w = 0; w < windows; ++w) {
    std::vector<float> hidden = t5_.encode(runner_, chunks.ids.data() + w * window, window,
                                           options_.t5_mask ? mask.data() + w * window : nullptr);
    const std::vector<float> weights(chunks.weights.begin() + w * window,
                                     chunks.weights.begin() + (w + 1) * window);
    apply_token_weights(hidden, out.dim, weights);
    if (options_.zero_masked)
      for (int64_t t = 0; t < window; ++t)
        if (std::isinf(mask[static_cast<size_t>(w * window + t)]))
          std::fill_n(hidden.begin() + t * out.dim, out.dim, 0.0f);
    out.context.insert(out.context.end(), hidden.begin(), hidden.end());
  }
  if (options_.dit_mask) out.mask = attend_padding(mask, options_.t5_mask_pad);
  return out;
}

std::vector<nn::ParamDecl> T5OnlyConditioner::parameters() const {
  nn::ParamRecorder recorder(weights_);
  t5_.declare(recorder);
  return recorder.params();
}

}  // namespace sd::pipeline
