// Converts between dtypes: float types to each other, block types to f32, and float
// types to block types with the reference quantizers.
#pragma once

#include "tensor/context.h"

namespace sd {

Tensor* cast(Context& ctx, Tensor* a, DType type);

void reference_cast(Tensor* dst);

}  // namespace sd
