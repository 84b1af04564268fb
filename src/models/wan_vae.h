// The Wan 2.1 autoencoder (Wan team 2025, "Wan: Open and Advanced Large-Scale Video
// Generative Models", wan/modules/vae.py) on single images, as Qwen-Image uses it: a causal
// 3-d convolutional VAE whose clips are encoded frame by frame with a cache of the two frames
// before; the first frame sees zeros before it, so on an image every 3x3x3 convolution is the
// 2-d convolution of its last temporal tap and the temporal resamplers do nothing. RMS norms
// over channels (with a scale, no bias), SiLU, one single-head attention block in each half's
// middle; 8x per side, 16 latent channels; the base width and latent channels from the file.
//
// Parameters, the original names below the caller's scope (3-d kernels [out, in, t, h, w] are
// read as [out * in, t, h, w]): conv1 (the encoder's 1x1x1 output conv), conv2 (the decoder's
// input conv), encoder.{conv1, downsamples.N, middle.{0,1,2}, head.{0,2}},
// decoder.{conv1, middle.{0,1,2}, upsamples.N, head.{0,2}}; residual blocks
// .residual.{0 (norm), 2 (conv), 3 (norm), 6 (conv)} and .shortcut; resamplers .resample.1
// (a 2-d conv) and .time_conv (unused on images); attention .norm, .to_qkv, .proj.
//
// Video: a clip is decoded one latent frame at a time, as the reference does. Each causal
// convolution sees its input's sequence over the whole clip with two zero frames in front;
// across chunks it remembers the last two frames of its input (WanClipCache). The temporal
// upsamplers (decoder.upsamples.N.time_conv, a 3x1x1 causal conv to twice the width whose
// halves are the even and odd output frames) skip the first chunk: latent frame 0 gives
// one video frame, every later one four.
#pragma once

#include <array>
#include <vector>

#include "models/vae.h"
#include "nn/graph_runner.h"
#include "nn/weights.h"

namespace sd::models {

// What the causal convolutions remember between the chunks of one clip. Per chunk: make
// the graph in a GraphCall, begin_chunk(call, index) before building, run the decode
// output together with saved(), then keep() the saved values, in order.
class WanClipCache {
 public:
  void begin_chunk(nn::GraphCall& call, int index);
  int chunk() const { return chunk_; }
  const std::vector<Tensor*>& saved() const { return saved_; }
  void keep(std::vector<std::vector<float>> values);

  // For the model while it builds: the next convolution's slot; the frames it remembers
  // ([W, H, C, n] with n <= 2, as a graph input; null when none); what it remembers next.
  int next_slot() { return cursor_++; }
  Tensor* previous(int slot);
  void save(int slot, Tensor* frames);

 private:
  struct Frames {
    std::vector<float> values;
    std::array<int64_t, 4> ne{};
  };
  std::vector<Frames> slots_;
  std::vector<int> saved_slots_;
  std::vector<Tensor*> saved_;
  nn::GraphCall* call_ = nullptr;
  int chunk_ = 0, cursor_ = 0;
};

// z: the VAE's latent [w, h, z_channels, N] (not normalized) -> image [8w, 8h, 3, N] in
// [-1, 1] (not clamped). config: ch (the base width), ch_mult, num_res_blocks, z_channels.
// With `clip`: z is latent frame clip->chunk() of a clip ([w, h, z_channels, 1]), and the
// result its video frames [8w, 8h, 3, 1 or 4].
Tensor* wan_vae_decode(const nn::Scope& vae, const VaeConfig& config, Tensor* z,
                       WanClipCache* clip = nullptr);

// image [W, H, 3, N] in [-1, 1] -> the posterior's mean [W / 8, H / 8, z_channels, N] (the
// log-variance is dropped: Qwen-Image encodes without sampling).
Tensor* wan_vae_encode(const nn::Scope& vae, const VaeConfig& config, Tensor* image);

}  // namespace sd::models
