// Row gather: embedding lookup from a table of any dtype, block types included.
#pragma once

#include "tensor/context.h"

namespace sd {

// a: table [K, R] (any dtype, ne[2] = ne[3] = 1); ids: i32 [n] or [n, B].
// Result: f32 [K, n] or [K, n, B], row (i, b) = a's row ids[i, b], dequantized.
// Ids outside [0, R) are an sd::Error at compute time naming the id and the table.
Tensor* get_rows(Context& ctx, Tensor* a, Tensor* ids);

void reference_get_rows(Tensor* dst);

}  // namespace sd
