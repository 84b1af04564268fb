// Ops that generate values: ranges and sinusoidal timestep embeddings.
#pragma once

#include "tensor/context.h"

namespace sd {

// f32 [n] with values start + i * step, n = ceil((stop - start) / step); n may be 0.
// step must be nonzero and point from start toward stop (or start == stop).
// param_f32(0) = start, param_f32(1) = stop, param_f32(2) = step. No sources.
Tensor* arange(Context& ctx, float start, float stop, float step);

// timesteps: f32 [N] -> f32 [dim, N], Stable Diffusion's (and ggml's) layout:
// half = dim / 2, freq[j] = exp(-ln(max_period) * j / half),
// out[j] = cos(t * freq[j]), out[half + j] = sin(t * freq[j]), for odd dim out[dim-1] = 0.
// params[0] = dim, params[1] = max_period.
Tensor* timestep_embedding(Context& ctx, Tensor* timesteps, int dim, int max_period = 10000);

void reference_arange(Tensor* dst);
void reference_timestep_embedding(Tensor* dst);

}  // namespace sd
