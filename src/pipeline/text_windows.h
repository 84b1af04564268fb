// The text encoders' windows, written once for every conditioner: T5 over one window of
// token ids (with an optional padding mask), and CLIP over one 77-token window, giving its
// clip-skipped hidden states and its pooled vector. Each call builds one graph, runs it on
// the conditioner's runner and tells the weights the graph is done.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "models/clip_text.h"
#include "models/t5.h"
#include "nn/graph_runner.h"
#include "nn/weights.h"

namespace sd::pipeline {

class T5WindowEncoder {
 public:
  // `weights` holds T5 under `scope` (Hugging Face names) and must outlive this object.
  T5WindowEncoder(models::T5Config config, nn::Weights& weights, std::string scope)
      : config_(std::move(config)), weights_(weights), scope_(std::move(scope)) {}

  const models::T5Config& config() const { return config_; }
  // [model_dim, len]: the last hidden states of `len` tokens. `mask` (len values added to
  // the attention scores, 0 or -inf) keeps T5 from attending to padding; null: none.
  std::vector<float> encode(nn::GraphRunner& runner, const int* ids, int64_t len,
                            const float* mask = nullptr) const;
  // Builds the graph over a short window with `weights` (a recorder): every weight it reads.
  void declare(nn::Weights& weights) const;

 private:
  models::T5Config config_;
  nn::Weights& weights_;
  std::string scope_;
};

// One CLIP window's outputs; each empty unless asked for.
struct ClipWindowOutputs {
  std::vector<float> hidden;  // [hidden, 77] of the clip-skipped layer
  std::vector<float> pooled;  // the final-LayerNorm state at the first EOS, projected if the
                              // encoder has a projection, after the last layer
};

class ClipWindowEncoder {
 public:
  // `weights` holds the encoder under `scope` (Hugging Face CLIP names, text_model.*) and
  // must outlive this object.
  ClipWindowEncoder(models::ClipTextConfig config, nn::Weights& weights, std::string scope)
      : config_(std::move(config)), weights_(weights), scope_(std::move(scope)) {}

  const models::ClipTextConfig& config() const { return config_; }
  // One 77-token window of `ids`; the pooled token is the window's first end-of-text (the
  // last token without one).
  ClipWindowOutputs encode(nn::GraphRunner& runner, const int* ids, int clip_skip, bool hidden,
                           bool pooled) const;
  void declare(nn::Weights& weights) const;

 private:
  models::ClipTextConfig config_;
  nn::Weights& weights_;
  std::string scope_;
};

}  // namespace sd::pipeline
