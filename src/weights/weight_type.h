// Which tensors take a requested weight type (convert's --type, or --type at load time)
// and which keep their stored type. These are stable-diffusion.cpp's rules, so a model
// converted or loaded here holds the same types as there:
//   - i32 tensors (integer buffers are not weights);
//   - tensors whose ne[0] is not a multiple of the type's block size (3x3 conv kernels
//     have ne[0] = 3): a block type cannot hold them;
//   - names ending in ".bias", ".scale" or ".weight_scale": small, and precision-critical;
//   - input/embedding layers, whose error feeds every later layer: names containing
//     "img_in.", "txt_in.", "time_in.", "vector_in.", "guidance_in.", "final_layer."
//     (Flux), "x_embedder.", "t_embedder.", "y_embedder.", "pos_embed",
//     "context_embedder." (MMDiT), "time_embed.", "label_emb." (UNet), "embedding".
//   - ours, not sd.cpp's (its upscaler loads f16 whatever --type says): ESRGAN's convs
//     outside the dense blocks ("conv_first.", "conv_body.", "conv_up1.", "conv_up2.",
//     "conv_hr.", "conv_last."), the input, the trunk's last conv that the long skip adds
//     to, and the high-resolution output convs. Under bf16 they cost an x4 model 6 dB
//     of PSNR (43.9 -> 37.0 dB against the f32 image) for 1% of its weights.
// Note what is NOT kept: 1-D norm weights whose length is a multiple of the block size
// (e.g. GroupNorm ".weight" of 320 channels under q8_0) are converted, as sd.cpp does.
#pragma once

#include <cstdint>
#include <optional>
#include <regex>
#include <string>
#include <string_view>
#include <vector>

#include "tensor/dtype.h"

namespace sd::weights {

bool takes_weight_type(std::string_view name, int64_t ne0, DType stored, DType target);

// --tensor-type-rules "regex=type,...": the first rule whose regex (ECMAScript, searched
// anywhere in the canonical name) matches a tensor sets its target type instead of --type
// (sd.cpp's order); the rules above still keep a tensor's stored type.
struct TensorTypeRule {
  std::string pattern;
  std::regex regex;
  DType type;
};

// The type a tensor `name` (rows of ne0 values, stored as `stored`) is converted to: the
// first matching rule's, else `type`, where takes_weight_type allows it; else `stored`.
DType target_weight_type(std::string_view name, int64_t ne0, DType stored,
                         std::optional<DType> type, const std::vector<TensorTypeRule>& rules);

}  // namespace sd::weights
