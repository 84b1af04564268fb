// --model-args (sd_ctx_params_t.model_args): extra model settings as "key=value" pairs
// separated by ',' or ';', read as stable-diffusion.cpp reads them. The keys this build
// reads are Chroma's masking options and Qwen-Image-Edit-2511's switch; other keys are
// returned as unused.
#pragma once

#include <string>
#include <vector>

namespace sd::pipeline {

// How a T5-only conditioning masks its padding: Chroma's --model-args (sd.cpp's defaults);
// Wan sets its own.
struct T5MaskOptions {
  bool dit_mask = true;  // chroma_use_dit_mask: the transformer ignores T5's padding tokens
  bool t5_mask = false;  // chroma_use_t5_mask: T5 ignores its own padding tokens
  int t5_mask_pad = 1;   // chroma_t5_mask_pad: padding tokens the transformer still attends
  // The padding tokens' hidden states set to zero (not a Chroma argument: Wan's embedder).
  bool zero_masked = false;
};

struct ModelArgs {
  T5MaskOptions chroma;
  // qwen_image_zero_cond_t: Qwen-Image-Edit-2511's references modulated at timestep 0 (on
  // by itself where the file carries the marker).
  bool qwen_image_zero_cond_t = false;
  std::vector<std::string> unused;  // keys no model of this build reads
};

// Throws sd::Error naming the pair for a pair without '=' or a value its key cannot take
// (booleans: true/false, 1/0, yes/no, on/off; the pad: a count >= 0).
ModelArgs parse_model_args(const std::string& text);

}  // namespace sd::pipeline
