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
// Encoding a clip (wan_vae_encode_chunk): the first frame, then 4 frames per latent frame.
//
// Wan 2.2's autoencoder (wan/modules/vae2_2.py, TI2V-5B) keeps the causal convolutions,
// norms, attention and clip caches and changes the blocks: each level of the encoder is one
// residual block (encoder.downsamples.L.downsamples.{0..n-1} residual blocks, .n the
// resampler) plus a parameter-free shortcut averaging the level's input pixels (and, where
// it halves them, frames) into its channels; each level of the decoder likewise
// (decoder.upsamples.L.upsamples.{0..n} and .n+1), its shortcut repeating the input's
// channels over the new pixels and frames, its upsampler keeping the width. The image is
// cut into 2x2 patches (12 channels) before the encoder and put together after the
// decoder: 16x per side, 48 latent channels; the encoder's width (160) and the decoder's
// (256) from the file.
//
// Video: a clip is decoded frame by frame (the reference decodes one latent frame per chunk;
// here each graph holds one frame of one stage, wan_vae_decode_stage). Each causal
// convolution sees its input's sequence over the whole clip with two zero frames in front,
// remembering the last two frames of its input between graphs (WanClipCache). The temporal
// upsamplers (decoder.upsamples.N.time_conv, a 3x1x1 causal conv to twice the width whose
// halves are the even and odd output frames) let a clip's first frame through: latent frame
// 0 gives one video frame, every later one four.
#pragma once

#include <array>
#include <map>
#include <string>
#include <vector>

#include "models/vae.h"
#include "nn/graph_runner.h"
#include "nn/weights.h"
#include "tensor/host_memory.h"

namespace sd::models {

// What the causal convolutions remember while a clip is decoded (or encoded), one graph per
// frame and stage (or chunk): for each convolution (by its weight's scope), the last two
// frames of its input (a convolution to fewer channels, such as the head: the parts of its
// next two output frames those make), kept in f16 (half the memory; the frames are activations a
// VAE already computes in f16 weights' precision), each frame in a buffer of its own that the frame
// after next reuses. Per graph: begin(call) before building it, then run() it.
class WanClipCache {
 public:
  void begin(nn::GraphCall& call);
  // Computes `out` (returned as f32) with the frames the layers met, which the cache then
  // remembers: copied by the graph straight into the cache's buffers, in f16. The result is
  // written into `into` when it holds as many values or more, up to twice as many (it may be
  // the graph's input: inputs are read before the graph computes), else into new memory
  // (huge-page advised: a frame at full resolution is hundreds of MB written once).
  HostVector<float> run(nn::GraphRunner& runner, nn::GraphCall& call, Tensor* out,
                        HostVector<float> into = {});
  // Remembers zeros where run() would remember computed frames: for recording which
  // weights a clip's later graphs read, without computing the first.
  void keep_zeros();

  // For the model while it builds: whether the layer `key` has met a frame yet; the frames
  // it remembers, oldest first (each [W, H, C, 1] f16, a graph input; none at first); and
  // the frames of this graph's input it meets (`frames` [W, H, C, m] f32): it remembers the
  // last two of what it had and these.
  bool seen(const std::string& key) const { return slots_.count(key) > 0; }
  std::vector<Tensor*> remembered(const std::string& key);
  void save(const std::string& key, Tensor* frames);

 private:
  struct Slot {
    std::vector<HostVector<uint16_t>> frames;  // f16 bits, oldest first, at most two
    std::array<int64_t, 3> ne{};               // one frame's [W, H, C]
  };
  struct Met {
    std::string key;
    std::vector<Tensor*> frames;  // in f16, the last (at most two) the layer met
  };
  // The graph's outputs for the frames met, each with the buffer it fills; the slots then
  // hold those buffers.
  std::vector<std::pair<Tensor*, void*>> take_met_frames();
  std::map<std::string, Slot> slots_;
  std::vector<Met> met_;
  nn::GraphCall* call_ = nullptr;
};

// The weight of the first temporal upsampler (decoder) or downsampler (encoder) a clip
// passes: present in a file that decodes (encodes) clips, not only images.
std::string wan_vae_first_time_conv(const VaeConfig& config, bool decoder);

// z: the VAE's latent [w, h, z_channels, N] (not normalized) -> image [8w, 8h, 3, N] in
// [-1, 1] (not clamped; Wan 2.2: [16w, 16h, 3, N]). config: ch (the base width; Wan 2.2's
// decoder: decoder_ch), ch_mult, num_res_blocks, z_channels, image_patch.
Tensor* wan_vae_decode(const nn::Scope& vae, const VaeConfig& config, Tensor* z);

// A clip, frame by frame: the decoder cut into wan_vae_decode_stages() stages wherever one
// frame is all a part hands the next (after each residual block and resampler; Wan 2.2:
// after each level), each run on one frame. Stage 0 reads a latent frame
// [w, h, z_channels, 1]; stage s > 0 one frame stage s - 1 gave. A stage gives [W, H, C, 1]
// or, where its temporal upsampler doubles the frame, [W, H, C, 2] (two frames in order);
// the last stage gives a video frame [8w, 8h, 3, 1] in [-1, 1]. Frames must be fed in clip
// order; the first latent frame makes one video frame, each later one four.
int wan_vae_decode_stages(const VaeConfig& config);
Tensor* wan_vae_decode_stage(const nn::Scope& vae, const VaeConfig& config, int stage, Tensor* x,
                             WanClipCache& clip);

// image [W, H, 3, N] in [-1, 1] -> the posterior's mean [W / 8, H / 8, z_channels, N] (the
// log-variance is dropped: Qwen-Image encodes without sampling).
Tensor* wan_vae_encode(const nn::Scope& vae, const VaeConfig& config, Tensor* image);

// A clip, chunk by chunk, as the reference encodes it: its first frame alone, then chunks of
// 4 frames, each chunk one graph with the clip's memory in `clip` (a cache of its own, not
// a decoder's). frames: [W, H, 3, 1] for the first chunk, [W, H, 3, 4] after, in [-1, 1].
// Returns the chunk's latent frame, the posterior's mean [W / 8, H / 8, z_channels, 1]. The
// temporal downsamplers (encoder.downsamples.N.time_conv, a 3x1x1 convolution with stride 2
// over the frame before and the chunk's) let the first frame through.
Tensor* wan_vae_encode_chunk(const nn::Scope& vae, const VaeConfig& config, Tensor* frames,
                             WanClipCache& clip);

// The same chunk in two parts, so that the full-resolution activations are held one frame at
// a time: wan_vae_encode_first_level on each of the chunk's frames in order ([W, H, 3, 1] ->
// the first level's features [W / 2, H / 2, ch * ch_mult[0], 1]; Wan 2.2: W / 4, H / 4),
// then wan_vae_encode_rest on those features stacked in order (1 or 4 frames), which gives
// what wan_vae_encode_chunk does. One cache for both.
Tensor* wan_vae_encode_first_level(const nn::Scope& vae, const VaeConfig& config, Tensor* frame,
                                   WanClipCache& clip);
Tensor* wan_vae_encode_rest(const nn::Scope& vae, const VaeConfig& config, Tensor* features,
                            WanClipCache& clip);

}  // namespace sd::models
