// Constant padding on both sides of every dim.
#pragma once

#include <array>

#include "tensor/context.h"

namespace sd {

// pads = {before0, after0, before1, after1, ...} (elements, >= 0) per dim; padded cells
// hold `value`. a is f32, f16 or bf16; the result is f32.
// params[0..7] = pads, param_f32(8) = value.
Tensor* pad(Context& ctx, Tensor* a, const std::array<int, 8>& pads, float value = 0.0f);

void reference_pad(Tensor* dst);

}  // namespace sd
