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
      clip_l_(std::move(clip_l)),
      clip_g_(std::move(clip_g)),
      t5_tokenizer_(std::move(t5_tokenizer)),
      t5_(t5),
      t5_scope_(std::move(t5_scope)),
      weights_(weights),
      runner_(backend) {
  SD_CHECK(tokenizer_, "[sd3 conditioner] missing CLIP tokenizer");
  SD_CHECK(!t5_ || t5_tokenizer_, "[sd3 conditioner] missing T5 tokenizer");
  SD_CHECK(clip_l_.config.hidden + clip_g_.config.hidden <= kContextDim,
           "the CLIP encoders give %lld + %lld channels, more than SD3's %lld-wide context",
           static_cast<long long>(clip_l_.config.hidden),
           static_cast<long long>(clip_g_.config.hidden), static_cast<long long>(kContextDim));
  SD_CHECK(!t5_ || t5_->model_dim == kContextDim,
           "the --t5xxl encoder gives %lld-wide tokens, SD3 reads %lld (a T5 file of another "
           "model?)",
           static_cast<long long>(t5_ ? t5_->model_dim : 0), static_cast<long long>(kContextDim));
  if (t5_)
    SD_CHECK(t5_tokenizer_->vocab_size() <= t5_->vocab_size,
             "the T5 tokenizer has %lld pieces but the T5 model only %lld embeddings: the "
             "tokenizer.json does not belong to this --t5xxl file",
             static_cast<long long>(t5_tokenizer_->vocab_size()),
             static_cast<long long>(t5_->vocab_size));
}

Sd3Conditioner::ClipWindow Sd3Conditioner::clip_window(const Sd3Encoder& e,
                                                       const models::TokenChunks& chunks,
                                                       int64_t window, int clip_skip) {
  const int* ids = chunks.ids.data() + window * kWindow;
  const int* eos = std::find(ids, ids + kWindow, models::kClipEosToken);
  const int64_t pooled_token = std::min<int64_t>(eos - ids, kWindow - 1);
  const std::vector<float> mask = models::clip_causal_mask(kWindow);
  nn::GraphCall call;
  Tensor* token_ids = call.input("clip_ids", DType::I32, make_shape({kWindow, 1}), ids);
  Tensor* causal = call.input_f32("causal_mask", make_shape({kWindow, kWindow}), mask.data());
  const models::ClipTextOutputs o =
      models::clip_text_forward_pooled(nn::Scope(call.ctx(), weights_, e.scope), e.config,
                                       token_ids, causal, clip_skip, pooled_token);
  ClipWindow out;
  if (window == 0) {
    std::vector<std::vector<float>> both = runner_.run(call, {o.hidden, o.pooled});
    out.hidden = std::move(both[0]);
    out.pooled = std::move(both[1]);
  } else {
    out.hidden = runner_.run(call, o.hidden);
  }
  weights_.after_compute();
  const std::vector<float> w(chunks.weights.begin() + window * kWindow,
                             chunks.weights.begin() + (window + 1) * kWindow);
  apply_token_weights(out.hidden, e.config.hidden, w);
  return out;
}

std::vector<float> Sd3Conditioner::t5_window(const models::T5Chunks& chunks, int64_t window) {
  const std::vector<int32_t> buckets = models::t5_relative_position_buckets(
      kWindow, t5_->relative_buckets, t5_->relative_max_distance);
  nn::GraphCall call;
  Tensor* token_ids = call.input("t5_ids", DType::I32, make_shape({kWindow, 1}),
                                 chunks.ids.data() + window * kWindow);
  Tensor* bucket_ids =
      call.input("t5_buckets", DType::I32, make_shape({kWindow * kWindow}), buckets.data());
  Tensor* hidden = models::t5_encoder_forward(nn::Scope(call.ctx(), weights_, t5_scope_), *t5_,
                                              token_ids, bucket_ids);
  std::vector<float> out = runner_.run(call, hidden);
  weights_.after_compute();
  const std::vector<float> w(chunks.weights.begin() + window * kWindow,
                             chunks.weights.begin() + (window + 1) * kWindow);
  apply_token_weights(out, kContextDim, w);
  return out;
}

Conditioning Sd3Conditioner::encode(const std::string& prompt, int clip_skip) {
  if (clip_skip <= 0) clip_skip = kDefaultClipSkip;
  const models::TokenChunks l_chunks =
      models::tokenize_prompt(*tokenizer_, prompt, clip_l_.config.pad_token);
  const models::TokenChunks g_chunks =
      models::tokenize_prompt(*tokenizer_, prompt, clip_g_.config.pad_token);
  models::T5Chunks t5_chunks;
  if (t5_) t5_chunks = models::t5_tokenize_prompt(*t5_tokenizer_, prompt, kWindow);
  const int64_t windows = std::max<int64_t>(l_chunks.chunk_count(),
                                            static_cast<int64_t>(t5_chunks.ids.size()) / kWindow);

  const int64_t dl = clip_l_.config.hidden, dg = clip_g_.config.hidden;
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
  Context ctx;
  Tensor* ids = ctx.new_tensor(DType::I32, {kWindow, 1});
  Tensor* mask = ctx.new_tensor(DType::F32, {kWindow, kWindow});
  for (const Sd3Encoder* e : {&clip_l_, &clip_g_})
    models::clip_text_forward_pooled(nn::Scope(ctx, recorder, e->scope), e->config, ids, mask,
                                     kDefaultClipSkip, 0);
  if (t5_) {
    Tensor* t5_ids = ctx.new_tensor(DType::I32, {8, 1});
    Tensor* buckets = ctx.new_tensor(DType::I32, {64});
    models::t5_encoder_forward(nn::Scope(ctx, recorder, t5_scope_), *t5_, t5_ids, buckets);
  }
  return recorder.params();
}

}  // namespace sd::pipeline
