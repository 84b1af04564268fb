// Reference images of edit models (FLUX.1 Kontext's -r/--ref-image): how each is sized for
// the VAE and where its tokens are placed, as stable-diffusion.cpp's --ref-image-args
// (key=value list) sets it. The deprecated --increase-ref-index and
// --disable-auto-resize-ref-image become ref_index_mode=increase and resize_before_vae=0.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "models/flux_kontext.h"

namespace sd::pipeline {

struct ReferenceImageOptions {
  // The image-index axis of the references' rotary positions (models/flux_kontext.h);
  // unset: the model's own (FLUX.1 Kontext fixed, FLUX.2 and Qwen-Image-Edit increase).
  std::optional<models::RefIndexMode> index_mode;
  // Resize each reference to about the output's area (at most vae_input_max_pixels)
  // before encoding; otherwise encode it at its own size.
  bool resize_before_vae = true;
  int vae_input_max_pixels = 0;  // <= 0: 1024 * 1024
  // The references reach the diffusion transformer (off: not there).
  bool pass_to_dit = true;
  // The references are shown to the text encoder's vision tower where it has one
  // (Qwen-Image-Edit's Qwen2.5-VL); off: the prompt is read alone.
  bool pass_to_vlm = true;
};

// The model's defaults (sd.cpp's presets: "flux_kontext", "flux2", "qwen") changed by
// `text` ("ref_index_mode=increase,resize_before_vae=0"). Keys that only concern other
// model families (other presets, vision-language resizing) are added to `ignored`. Throws
// sd::Error for a malformed item or value, naming it and what is accepted.
ReferenceImageOptions parse_reference_image_args(const std::string& text,
                                                 std::vector<std::string>* ignored);

// The size a ref_w x ref_h reference is resized to before encoding: the reference's aspect
// over min(max_pixels, out_w * out_h) pixels, each side rounded to a multiple of `multiple`
// (sd.cpp's arithmetic, integer steps included). Throws sd::Error when a side rounds to 0.
std::pair<int, int> reference_vae_size(int ref_w, int ref_h, int out_w, int out_h, int max_pixels,
                                       int multiple);

}  // namespace sd::pipeline
