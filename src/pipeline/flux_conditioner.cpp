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
      clip_(std::move(clip)),
      t5_tokenizer_(std::move(t5_tokenizer)),
      t5_(t5),
      weights_(weights),
      runner_(backend),
      clip_scope_(std::move(clip_scope)),
      t5_scope_(std::move(t5_scope)) {
  SD_CHECK(clip_tokenizer_ && t5_tokenizer_, "[flux conditioner] missing tokenizer");
  SD_CHECK(t5_tokenizer_->vocab_size() <= t5_.vocab_size,
           "the T5 tokenizer has %lld pieces but the T5 model only %lld embeddings: the "
           "tokenizer.json does not belong to this --t5xxl file",
           static_cast<long long>(t5_tokenizer_->vocab_size()),
           static_cast<long long>(t5_.vocab_size));
}

std::vector<float> FluxConditioner::clip_pooled(const std::string& prompt) {
  const models::TokenChunks chunks =
      models::tokenize_prompt(*clip_tokenizer_, prompt, clip_.pad_token);
  const int64_t window = models::kClipChunkLength;
  const int* ids = chunks.ids.data();  // the first window only
  const int* eos = std::find(ids, ids + window, models::kClipEosToken);
  const int64_t pooled_token = std::min<int64_t>(eos - ids, window - 1);
  const std::vector<float> mask = models::clip_causal_mask(window);
  nn::GraphCall call;
  Tensor* token_ids = call.input("clip_ids", DType::I32, make_shape({window, 1}), ids);
  Tensor* causal = call.input_f32("causal_mask", make_shape({window, window}), mask.data());
  // The pooled vector is taken after the last layer whatever clip_skip says (sd.cpp).
  const models::ClipTextOutputs o = models::clip_text_forward_pooled(
      nn::Scope(call.ctx(), weights_, clip_scope_), clip_, token_ids, causal, 1, pooled_token);
  std::vector<float> pooled = runner_.run(call, o.pooled);
  weights_.after_compute();
  return pooled;
}

std::vector<float> FluxConditioner::t5_window(const int* ids, int64_t len) {
  const std::vector<int32_t> buckets =
      models::t5_relative_position_buckets(len, t5_.relative_buckets, t5_.relative_max_distance);
  nn::GraphCall call;
  Tensor* token_ids = call.input("t5_ids", DType::I32, make_shape({len, 1}), ids);
  Tensor* bucket_ids =
      call.input("t5_buckets", DType::I32, make_shape({len * len}), buckets.data());
  Tensor* hidden = models::t5_encoder_forward(nn::Scope(call.ctx(), weights_, t5_scope_), t5_,
                                              token_ids, bucket_ids);
  std::vector<float> out = runner_.run(call, hidden);
  weights_.after_compute();
  return out;
}

Conditioning FluxConditioner::encode(const std::string& prompt, int /*clip_skip*/) {
  Conditioning out;
  out.vector = clip_pooled(prompt);

  const models::T5Chunks chunks = models::t5_tokenize_prompt(*t5_tokenizer_, prompt);
  const int64_t window = models::kT5ChunkLength;
  const int64_t windows = static_cast<int64_t>(chunks.ids.size()) / window;
  out.dim = t5_.model_dim;
  out.tokens = windows * window;
  out.context.reserve(static_cast<size_t>(out.dim * out.tokens));
  for (int64_t w = 0; w < windows; ++w) {
    std::vector<float> hidden = t5_window(chunks.ids.data() + w * window, window);
    const std::vector<float> weights(chunks.weights.begin() + w * window,
                                     chunks.weights.begin() + (w + 1) * window);
    apply_token_weights(hidden, out.dim, weights);
    out.context.insert(out.context.end(), hidden.begin(), hidden.end());
  }
  return out;
}

std::vector<nn::ParamDecl> FluxConditioner::parameters() const {
  nn::ParamRecorder recorder(weights_);
  Context ctx;
  const int64_t window = models::kClipChunkLength;
  Tensor* ids = ctx.new_tensor(DType::I32, {window, 1});
  Tensor* mask = ctx.new_tensor(DType::F32, {window, window});
  models::clip_text_forward_pooled(nn::Scope(ctx, recorder, clip_scope_), clip_, ids, mask, 1, 0);
  Tensor* t5_ids = ctx.new_tensor(DType::I32, {8, 1});
  Tensor* buckets = ctx.new_tensor(DType::I32, {64});
  models::t5_encoder_forward(nn::Scope(ctx, recorder, t5_scope_), t5_, t5_ids, buckets);
  return recorder.params();
}

}  // namespace sd::pipeline
