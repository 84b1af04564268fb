#include "pipeline/text_windows.h"

#include <algorithm>

#include "models/clip_tokenizer.h"
#include "tensor/error.h"

namespace sd::pipeline {

std::vector<float> T5WindowEncoder::encode(nn::GraphRunner& runner, const int* ids, int64_t len,
                                           const float* mask) const {
  const std::vector<int32_t> buckets = models::t5_relative_position_buckets(
      len, config_.relative_buckets, config_.relative_max_distance);
  nn::GraphCall call;
  Tensor* token_ids = call.input("t5_ids", DType::I32, make_shape({len, 1}), ids);
  Tensor* bucket_ids =
      call.input("t5_buckets", DType::I32, make_shape({len * len}), buckets.data());
  Tensor* key_mask = mask ? call.input_f32("t5_mask", make_shape({len}), mask) : nullptr;
  Tensor* hidden = models::t5_encoder_forward(nn::Scope(call.ctx(), weights_, scope_), config_,
                                              token_ids, bucket_ids, key_mask);
  std::vector<float> out = runner.run(call, hidden);
  weights_.after_compute();
  return out;
}

void T5WindowEncoder::declare(nn::Weights& weights) const {
  Context ctx;
  Tensor* ids = ctx.new_tensor(DType::I32, {8, 1});
  Tensor* buckets = ctx.new_tensor(DType::I32, {64});
  models::t5_encoder_forward(nn::Scope(ctx, weights, scope_), config_, ids, buckets);
}

ClipWindowOutputs ClipWindowEncoder::encode(nn::GraphRunner& runner, const int* ids, int clip_skip,
                                            bool hidden, bool pooled) const {
  const int64_t window = models::kClipChunkLength;
  const int* eos = std::find(ids, ids + window, models::kClipEosToken);
  const int64_t pooled_token = std::min<int64_t>(eos - ids, window - 1);
  const std::vector<float> mask = models::clip_causal_mask(window);
  nn::GraphCall call;
  Tensor* token_ids = call.input("clip_ids", DType::I32, make_shape({window, 1}), ids);
  Tensor* causal = call.input_f32("causal_mask", make_shape({window, window}), mask.data());
  const models::ClipTextOutputs o = models::clip_text_forward_pooled(
      nn::Scope(call.ctx(), weights_, scope_), config_, token_ids, causal, clip_skip, pooled_token);
  std::vector<Tensor*> outputs;
  if (hidden) outputs.push_back(o.hidden);
  if (pooled) outputs.push_back(o.pooled);
  SD_CHECK(!outputs.empty(), "[clip] a window encoded for no output");
  std::vector<std::vector<float>> values = runner.run(call, outputs);
  weights_.after_compute();
  ClipWindowOutputs out;
  if (hidden) out.hidden = std::move(values.front());
  if (pooled) out.pooled = std::move(values.back());
  return out;
}

void ClipWindowEncoder::declare(nn::Weights& weights) const {
  Context ctx;
  const int64_t window = models::kClipChunkLength;
  Tensor* ids = ctx.new_tensor(DType::I32, {window, 1});
  Tensor* mask = ctx.new_tensor(DType::F32, {window, window});
  models::clip_text_forward_pooled(nn::Scope(ctx, weights, scope_), config_, ids, mask, 1, 0);
}

}  // namespace sd::pipeline
