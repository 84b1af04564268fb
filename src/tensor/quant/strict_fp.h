// Include FIRST in files whose float results must match the reference quantizers bit for
// bit. It forbids contracting a * b + c into one fused multiply-add for the rest of the
// translation unit: ggml's reference rounds every product on its own, and a fused
// nearest_int(scale * x) or sum += w * x * l picks different levels on real data. GCC only
// contracts when FMA is enabled (-march=native, -mfma) and the language mode allows it
// (-std=gnu++*), clang by default; this keeps the quantizers exact under any build flags.
// Nothing here may be -ffast-math either (reassociation changes the sums); the project
// never enables it.
#pragma once

#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif
