#include "pipeline/text_conditioner.h"

#include <algorithm>
#include <cmath>
#include <initializer_list>

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

namespace {

// Appends the 256-dim sinusoidal embedding of each value: sd.cpp's host timestep
// embedding, frequencies in double rounded to float, float arguments, cos half first.
void append_embeddings(std::vector<float>& v, std::initializer_list<float> values) {
  constexpr int64_t half = kSdxlSizeEmbeddingDim / 2;
  for (float t : values) {
    const size_t at = v.size();
    v.resize(at + kSdxlSizeEmbeddingDim);
    for (int64_t j = 0; j < half; ++j) {
      const float freq = static_cast<float>(
          std::exp(-std::log(10000.0) * static_cast<double>(j) / static_cast<double>(half)));
      const float arg = t * freq;
      v[at + j] = std::cos(arg);
      v[at + j + half] = std::sin(arg);
    }
  }
}

}  // namespace

std::vector<float> sdxl_vector(const std::vector<float>& pooled, int width, int height) {
  std::vector<float> v = pooled;
  const auto w = static_cast<float>(width), h = static_cast<float>(height);
  append_embeddings(v, {h, w});        // original size
  append_embeddings(v, {0.0f, 0.0f});  // crop top-left
  append_embeddings(v, {h, w});        // target size
  return v;
}

std::vector<float> sdxl_refiner_vector(const std::vector<float>& pooled, int width, int height,
                                       float aesthetic_score) {
  std::vector<float> v = pooled;
  const auto w = static_cast<float>(width), h = static_cast<float>(height);
  append_embeddings(v, {h, w});        // original size
  append_embeddings(v, {0.0f, 0.0f});  // crop top-left
  append_embeddings(v, {aesthetic_score});
  return v;
}

TextConditioner::TextConditioner(std::shared_ptr<const models::ClipTokenizer> tokenizer,
                                 models::ClipTextConfig config, nn::Weights& weights,
                                 Backend& backend, std::string embeddings_dir, std::string scope,
                                 std::optional<TextEncoderSetup> second)
    : tokenizer_(std::move(tokenizer)),
      config_(config),
      scope_(std::move(scope)),
      second_(std::move(second)),
      weights_(weights),
      runner_(backend),
      embedding_files_(models::list_embedding_files(embeddings_dir)),
      custom_(config.hidden, config.vocab_size),
      custom2_(second_ ? second_->config.hidden : 1, second_ ? second_->config.vocab_size : 0) {
  SD_CHECK(!second_ || second_->config.vocab_size == config.vocab_size,
           "[text conditioner] the two text encoders' vocabularies differ (%lld, %lld)",
           static_cast<long long>(config.vocab_size),
           static_cast<long long>(second_->config.vocab_size));
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
  // The vectors for an encoder of width `hidden`, or nullopt when the file has none.
  auto vectors = [&](int64_t hidden) -> std::optional<std::vector<float>> {
    const std::optional<size_t> pick = models::pick_embedding_tensor(shapes, hidden);
    if (!pick) return std::nullopt;
    const io::TensorInfo& info = infos[index[*pick]];
    std::vector<uint8_t> stored(info.size), loaded(info.loaded_size());
    f->read(info, stored.data());
    io::load_tensor_data(info, stored.data(), loaded.data());
    std::vector<float> values(static_cast<size_t>(info.n_elements()));
    dequantize_row(info.dtype, loaded.data(), values.data(), info.n_elements());
    for (float v : values)
      SD_CHECK(std::isfinite(v), "embedding '%s' (%s): tensor '%s' holds NaN or Inf values",
               word.c_str(), file->second.c_str(), info.name.c_str());
    return values;
  };
  const std::optional<std::vector<float>> first = vectors(config_.hidden);
  // SDXL embeddings ship both encoders' vectors in one file (clip_l and clip_g), the same
  // number of rows each.
  std::optional<std::vector<float>> second;
  if (first && second_) {
    second = vectors(second_->config.hidden);
    SD_CHECK(!second || second->size() / static_cast<size_t>(second_->config.hidden) ==
                            first->size() / static_cast<size_t>(config_.hidden),
             "embedding '%s' (%s): %zu vectors for the first text encoder but %zu for the second",
             word.c_str(), file->second.c_str(), first->size() / config_.hidden,
             second->size() / static_cast<size_t>(second_->config.hidden));
  }
  if (!first || (second_ && !second)) {
    // sd.cpp skips such a file (made for another text encoder) and reads the word as text.
    unusable_[word] = true;
    return {};
  }
  if (second) custom2_.add(word, *second);
  return custom_.add(word, *first);
}

models::TokenChunks TextConditioner::tokenize(const std::string& prompt) {
  return models::tokenize_prompt(*tokenizer_, prompt, config_.pad_token,
                                 special_.words.empty() ? nullptr : &special_);
}

Conditioning TextConditioner::encode(const std::string& prompt, int clip_skip) {
  const models::TokenChunks chunks = tokenize(prompt);
  const int64_t window = models::kClipChunkLength;
  const int64_t dim1 = config_.hidden, dim2 = second_ ? second_->config.hidden : 0;
  const int64_t dim = dim1 + dim2;
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
      custom = call.input_f32("custom_embeddings", make_shape({dim1, custom_.rows()}),
                              custom_.table().data());
    nn::Scope scope(call.ctx(), weights_, scope_);
    std::vector<Tensor*> outputs;
    if (pools_alone() && c == 0) {
      // Pooled at the first EOS (the last token when none), as SDXL's second encoder.
      const int64_t eos = std::find(ids, ids + window, models::kClipEosToken) - ids;
      const models::ClipTextOutputs o = models::clip_text_forward_pooled(
          scope, config_, token_ids, causal, clip_skip, std::min<int64_t>(eos, window - 1), custom);
      outputs = {o.hidden, o.pooled};
    } else {
      outputs = {models::clip_text_forward(scope, config_, token_ids, causal, clip_skip, custom)};
    }

    // SDXL's second encoder reads the window with everything after the first EOS made 0
    // (OpenCLIP's padding), and pools at that EOS (sd.cpp: the last token when none).
    std::vector<int> ids2;
    if (second_) {
      const int* eos = std::find(ids, ids + window, models::kClipEosToken);
      ids2.assign(ids, ids + window);
      for (int64_t i = (eos - ids) + 1; i < window; ++i) ids2[static_cast<size_t>(i)] = 0;
      const int64_t pooled_token = std::min<int64_t>(eos - ids, window - 1);
      Tensor* token_ids2 =
          call.input("token_ids2", DType::I32, make_shape({window, 1}), ids2.data());
      nn::Scope scope2(call.ctx(), weights_, second_->scope);
      Tensor* custom2 = nullptr;
      if (uses_custom)
        custom2 = call.input_f32("custom_embeddings2", make_shape({dim2, custom2_.rows()}),
                                 custom2_.table().data());
      if (c == 0) {
        const models::ClipTextOutputs o = models::clip_text_forward_pooled(
            scope2, second_->config, token_ids2, causal, clip_skip, pooled_token, custom2);
        outputs.push_back(o.hidden);
        outputs.push_back(o.pooled);
      } else {
        outputs.push_back(models::clip_text_forward(scope2, second_->config, token_ids2, causal,
                                                    clip_skip, custom2));
      }
    }
    std::vector<std::vector<float>> results = runner_.run(call, outputs);
    weights_.after_compute();

    std::vector<float> values;
    if (!second_) {
      values = std::move(results[0]);
      if (pools_alone() && c == 0) out.pooled = std::move(results[1]);
    } else {
      // Concatenated per token: [dim1 + dim2, 77].
      values.resize(static_cast<size_t>(dim * window));
      for (int64_t t = 0; t < window; ++t) {
        std::copy_n(results[0].begin() + t * dim1, dim1, values.begin() + t * dim);
        std::copy_n(results[1].begin() + t * dim2, dim2, values.begin() + t * dim + dim1);
      }
      if (c == 0) out.pooled = std::move(results[2]);
    }

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
  if (pools_alone())
    models::clip_text_forward_pooled(nn::Scope(ctx, recorder, scope_), config_, ids, mask, 1, 0);
  else
    models::clip_text_forward(nn::Scope(ctx, recorder, scope_), config_, ids, mask, 1);
  if (second_)
    models::clip_text_forward_pooled(nn::Scope(ctx, recorder, second_->scope), second_->config, ids,
                                     mask, 1, 0);
  return recorder.params();
}

}  // namespace sd::pipeline
