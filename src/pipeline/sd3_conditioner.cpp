#include "pipeline/sd3_conditioner.h"

#include <algorithm>

#include "models/prompt_attention.h"
#include "pipeline/text_conditioner.h"
#include "tensor/error.h"

namespace sd::pipeline {

namespace {

// sd.cpp: SD3's encoders run at clip_skip 2 unless told otherwise.
constexpr int kDefaultClipSkip = 2;
// SD3 cuts T5's tokens into CLIP-sized windows.
constexpr int kWindow = models::kClipChunkLength;

}  // namespace

Sd3Conditioner::Sd3Conditioner(std::shared_ptr<const models::ClipTokenizer> tokenizer,
                               Sd3Encoder clip_l, Sd3Encoder clip_g,
                               std::shared_ptr<const models::T5Tokenizer> t5_tokenizer,
                               std::optional<models::T5Config> t5, std::string t5_scope,
                               nn::Weights& weights, Backend& backend)
    : tokenizer_(std::move(tokenizer)),
      clip_l_(std::move(clip_l.config), weights, std::move(clip_l.scope)),
      clip_g_(std::move(clip_g.config), weights, std::move(clip_g.scope)),
      t5_tokenizer_(std::move(t5_tokenizer)),
      weights_(weights),
      runner_(backend) {
  if (t5) t5_.emplace(*t5, weights, std::move(t5_scope));
  SD_CHECK(tokenizer_, "[sd3 conditioner] missing CLIP tokenizer");
  SD_CHECK(!t5_ || t5_tokenizer_, "[sd3 conditioner] missing T5 tokenizer");
  const int64_t dl = clip_l_.config().hidden, dg = clip_g_.config().hidden;
  SD_CHECK(dl + dg <= kContextDim,
           "the CLIP encoders give %lld + %lld channels, more than SD3's %lld-wide context",
           static_cast<long long>(dl), static_cast<long long>(dg),
           static_cast<long long>(kContextDim));
  const int64_t t5_dim = t5_ ? t5_->config().model_dim : 0;
  SD_CHECK(!t5_ || t5_dim == kContextDim,
           "the --t5xxl encoder gives %lld-wide tokens, SD3 reads %lld (a T5 file of another "
           "model?)",
           static_cast<long long>(t5_dim), static_cast<long long>(kContextDim));
  if (t5_)
    SD_CHECK(t5_tokenizer_->vocab_size() <= t5_->config().vocab_size,
             "the T5 tokenizer has %lld pieces but the T5 model only %lld embeddings: the "
             "tokenizer.json does not belong to this --t5xxl file",
             static_cast<long long>(t5_tokenizer_->vocab_size()),
             static_cast<long long>(t5_->config().vocab_size));
}

Sd3Conditioner::ClipWindow Sd3Conditioner::clip_window(const ClipWindowEncoder& e,
                                                       const models::TokenChunks& chunks,
                                                       int64_t window, int clip_skip) {
  // The pooled vector of the first window only.
  ClipWindowOutputs o =
      e.encode(runner_, chunks.ids.data() + window * kWindow, clip_skip, true, window == 0);
  const std::vector<float> w(chunks.weights.begin() + window * kWindow,
                             chunks.weights.begin() + (window + 1) * kWindow);
  apply_token_weights(o.hidden, e.config().hidden, w);
  return {std::move(o.hidden), std::move(o.pooled)};
}

std::vector<float> Sd3Conditioner::t5_window(const models::T5Chunks& chunks, int64_t window) {
  std::vector<float> out = t5_->encode(runner_, chunks.ids.data() + window * kWindow, kWindow);
  const std::vector<float> w(chunks.weights.begin() + window * kWindow,
                             chunks.weights.begin() + (window + 1) * kWindow);
  apply_token_weights(out, kContextDim, w);
  return out;
}

Conditioning Sd3Conditioner::encode(const std::string& prompt, int clip_skip) {
  if (clip_skip <= 0) clip_skip = kDefaultClipSkip;
  const models::TokenChunks l_chunks =
      models::tokenize_prompt(*tokenizer_, prompt, clip_l_.config().pad_token);
  const models::TokenChunks g_chunks =
      models::tokenize_prompt(*tokenizer_, prompt, clip_g_.config().pad_token);
  models::T5Chunks t5_chunks;
  if (t5_) t5_chunks = models::t5_tokenize_prompt(*t5_tokenizer_, prompt, kWindow);
  const int64_t windows = std::max<int64_t>(l_chunks.chunk_count(),
                                            static_cast<int64_t>(t5_chunks.ids.size()) / kWindow);

  const int64_t dl = clip_l_.config().hidden, dg = clip_g_.config().hidden;
  Conditioning out;
  out.dim = kContextDim;
  out.tokens = windows * 2 * kWindow;
  out.context.assign(static_cast<size_t>(out.dim * out.tokens), 0.0f);
  for (int64_t w = 0; w < windows; ++w) {
    float* dst = out.context.data() + w * 2 * kWindow * kContextDim;
    // A window one encoder's tokens do not reach stays zero (the prompt is longer for T5
    // than for CLIP or the other way round).
    if (w < l_chunks.chunk_count()) {
      const ClipWindow l = clip_window(clip_l_, l_chunks, w, clip_skip);
      const ClipWindow g = clip_window(clip_g_, g_chunks, w, clip_skip);
      for (int64_t t = 0; t < kWindow; ++t) {
        std::copy_n(l.hidden.data() + t * dl, dl, dst + t * kContextDim);
        std::copy_n(g.hidden.data() + t * dg, dg, dst + t * kContextDim + dl);
      }
      if (w == 0) {
        out.vector = l.pooled;
        out.vector.insert(out.vector.end(), g.pooled.begin(), g.pooled.end());
      }
    }
    if (t5_ && w < static_cast<int64_t>(t5_chunks.ids.size()) / kWindow) {
      const std::vector<float> t5 = t5_window(t5_chunks, w);
      std::copy(t5.begin(), t5.end(), dst + kWindow * kContextDim);
    }
  }
  return out;
}

std::vector<nn::ParamDecl> Sd3Conditioner::parameters() const {
  nn::ParamRecorder recorder(weights_);
  clip_l_.declare(recorder);
  clip_g_.declare(recorder);
  if (t5_) t5_->declare(recorder);
  return recorder.params();
}

}  // namespace sd::pipeline
