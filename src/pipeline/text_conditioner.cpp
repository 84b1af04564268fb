#include "pipeline/text_conditioner.h"

#include <cmath>

#include "models/prompt_attention.h"
#include "tensor/error.h"
#include "tensor/quant/quant.h"
#include "weights/model_file.h"

namespace sd::pipeline {

void apply_token_weights(std::vector<float>& hidden, int64_t dim,
                         const std::vector<float>& weights) {
  SD_CHECK(static_cast<int64_t>(hidden.size()) == dim * static_cast<int64_t>(weights.size()),
           "[prompt weights] %zu values are not %zu tokens of %lld", hidden.size(), weights.size(),
           static_cast<long long>(dim));
  bool all_one = true;
  for (float w : weights) all_one = all_one && w == 1.0f;
  if (all_one || hidden.empty()) return;
  // sd.cpp: means accumulated in double, rounded to float; the ratio is a float.
  auto mean = [&] {
    double sum = 0.0;
    for (float v : hidden) sum += static_cast<double>(v);
    return static_cast<float>(sum / static_cast<double>(hidden.size()));
  };
  const float original_mean = mean();
  for (size_t t = 0; t < weights.size(); ++t)
    for (int64_t c = 0; c < dim; ++c) hidden[t * dim + c] *= weights[t];
  const float new_mean = mean();
  if (std::isfinite(original_mean) && std::isfinite(new_mean) && new_mean != 0.0f) {
    const float rescale = original_mean / new_mean;
    for (float& v : hidden) v *= rescale;
  }
}

TextConditioner::TextConditioner(std::shared_ptr<const models::ClipTokenizer> tokenizer,
                                 models::ClipTextConfig config, nn::Weights& weights,
                                 Backend& backend, std::string embeddings_dir, std::string scope)
    : tokenizer_(std::move(tokenizer)),
      config_(config),
      scope_(std::move(scope)),
      weights_(weights),
      runner_(backend),
      embedding_files_(models::list_embedding_files(embeddings_dir)),
      custom_(config.hidden, config.vocab_size) {
  SD_CHECK(tokenizer_ != nullptr, "[text conditioner] no tokenizer");
  special_.words = models::embedding_words(embeddings_dir);
  special_.ids_of = [this](const std::string& word) { return embedding_ids(word); };
}

std::vector<int> TextConditioner::embedding_ids(const std::string& word) {
  if (const std::vector<int>* ids = custom_.find(word)) return *ids;
  if (unusable_.count(word)) return {};
  auto file = embedding_files_.find(word);
  if (file == embedding_files_.end()) return {};

  const std::unique_ptr<weights::ModelFile> f = weights::open_model_file(file->second);
  const std::vector<io::TensorInfo>& infos = f->tensors();
  std::vector<models::EmbeddingTensorShape> shapes;
  std::vector<size_t> index;  // shapes[i] is infos[index[i]]
  for (size_t i = 0; i < infos.size(); ++i) {
    if (!is_float(infos[i].dtype)) continue;
    shapes.push_back({infos[i].n_dims, infos[i].ne});
    index.push_back(i);
  }
  const std::optional<size_t> pick = models::pick_embedding_tensor(shapes, config_.hidden);
  if (!pick) {
    // sd.cpp skips such a file (made for another text encoder) and reads the word as text.
    unusable_[word] = true;
    return {};
  }
  const io::TensorInfo& info = infos[index[*pick]];
  std::vector<uint8_t> stored(info.size), loaded(info.loaded_size());
  f->read(info, stored.data());
  io::load_tensor_data(info, stored.data(), loaded.data());
  std::vector<float> values(static_cast<size_t>(info.n_elements()));
  dequantize_row(info.dtype, loaded.data(), values.data(), info.n_elements());
  for (float v : values)
    SD_CHECK(std::isfinite(v), "embedding '%s' (%s): tensor '%s' holds NaN or Inf values",
             word.c_str(), file->second.c_str(), info.name.c_str());
  return custom_.add(word, values);
}

models::TokenChunks TextConditioner::tokenize(const std::string& prompt) {
  return models::tokenize_prompt(*tokenizer_, prompt, config_.pad_token,
                                 special_.words.empty() ? nullptr : &special_);
}

Conditioning TextConditioner::encode(const std::string& prompt, int clip_skip) {
  const models::TokenChunks chunks = tokenize(prompt);
  const int64_t window = models::kClipChunkLength, dim = config_.hidden;
  const std::vector<float> mask = models::clip_causal_mask(window);

  Conditioning out;
  out.dim = dim;
  out.tokens = chunks.chunk_count() * window;
  out.context.reserve(static_cast<size_t>(out.tokens * dim));
  for (int64_t c = 0; c < chunks.chunk_count(); ++c) {
    const int* ids = chunks.ids.data() + c * window;
    bool uses_custom = false;
    for (int64_t i = 0; i < window; ++i) uses_custom = uses_custom || ids[i] >= config_.vocab_size;

    nn::GraphCall call;
    Tensor* token_ids = call.input("token_ids", DType::I32, make_shape({window, 1}), ids);
    Tensor* causal = call.input_f32("causal_mask", make_shape({window, window}), mask.data());
    Tensor* custom = nullptr;
    if (uses_custom)
      custom = call.input_f32("custom_embeddings", make_shape({dim, custom_.rows()}),
                              custom_.table().data());
    nn::Scope scope(call.ctx(), weights_, scope_);
    Tensor* hidden =
        models::clip_text_forward(scope, config_, token_ids, causal, clip_skip, custom);
    std::vector<float> values = runner_.run(call, hidden);
    weights_.after_compute();

    const std::vector<float> weights(chunks.weights.begin() + c * window,
                                     chunks.weights.begin() + (c + 1) * window);
    apply_token_weights(values, dim, weights);
    out.context.insert(out.context.end(), values.begin(), values.end());
  }
  return out;
}

std::vector<nn::ParamDecl> TextConditioner::parameters() const {
  nn::ParamRecorder recorder(weights_);
  Context ctx;
  const int64_t window = models::kClipChunkLength;
  Tensor* ids = ctx.new_tensor(DType::I32, {window, 1});
  Tensor* mask = ctx.new_tensor(DType::F32, {window, window});
  // clip_skip 1 runs every layer: the most any prompt reads.
  models::clip_text_forward(nn::Scope(ctx, recorder, scope_), config_, ids, mask, 1);
  return recorder.params();
}

}  // namespace sd::pipeline
