#include "tensor/ops/generate.h"

#include <cmath>
#include <cstdint>

#include "tensor/error.h"
#include "tensor/ops/access.h"

namespace sd {

Tensor* arange(Context& ctx, float start, float stop, float step) {
  SD_CHECK(std::isfinite(start) && std::isfinite(stop) && std::isfinite(step),
           "[arange] start %g, stop %g and step %g must be finite", start, stop, step);
  SD_CHECK(step != 0, "[arange] step is 0");
  // Sizes in double as PyTorch does, so start/stop/step given in f32 give its element count.
  const double steps = std::ceil((static_cast<double>(stop) - start) / step);
  SD_CHECK(steps >= 0, "[arange] step %g points away from stop %g (start %g)", step, stop, start);
  SD_CHECK(steps <= INT32_MAX, "[arange] %g elements are too many", steps);
  Tensor* t = ctx.new_op(Op::Arange, DType::F32, {static_cast<int64_t>(steps), 1, 1, 1}, {});
  t->set_param_f32(0, start);
  t->set_param_f32(1, stop);
  t->set_param_f32(2, step);
  return t;
}

Tensor* timestep_embedding(Context& ctx, Tensor* timesteps, int dim, int max_period) {
  SD_CHECK(is_float(timesteps->type), "[timestep_embedding] timesteps '%s' are %s; use f32",
           timesteps->name.c_str(), dtype_name(timesteps->type).data());
  SD_CHECK(timesteps->ne[1] == 1 && timesteps->ne[2] == 1 && timesteps->ne[3] == 1,
           "[timestep_embedding] timesteps '%s' %s must be 1-D [N]", timesteps->name.c_str(),
           timesteps->shape_string().c_str());
  SD_CHECK(dim >= 1, "[timestep_embedding] dim %d must be positive", dim);
  SD_CHECK(max_period >= 1, "[timestep_embedding] max_period %d must be positive", max_period);
  Tensor* t =
      ctx.new_op(Op::TimestepEmbedding, DType::F32, {dim, timesteps->ne[0], 1, 1}, {timesteps});
  t->params[0] = dim;
  t->params[1] = max_period;
  return t;
}

void reference_arange(Tensor* dst) {
  const double start = dst->param_f32(0), step = dst->param_f32(2);
  for (int64_t i = 0; i < dst->ne[0]; ++i) store_f32(dst, static_cast<float>(start + i * step), i);
}

void reference_timestep_embedding(Tensor* dst) {
  const Tensor* timesteps = dst->src[0];
  const int dim = dst->params[0];
  const int half = dim / 2;
  const float log_period = std::log(static_cast<float>(dst->params[1]));
  for (int64_t n = 0; n < timesteps->ne[0]; ++n) {
    const float t = load_f32(timesteps, n);
    for (int j = 0; j < half; ++j) {
      // The argument is rounded to f32 as PyTorch and ggml compute it: at t ~ 1000 that
      // rounding, not cos/sin, dominates the difference between implementations.
      const float freq = std::exp(-log_period * static_cast<float>(j) / static_cast<float>(half));
      const float arg = t * freq;
      store_f32(dst, static_cast<float>(std::cos(static_cast<double>(arg))), j, n);
      store_f32(dst, static_cast<float>(std::sin(static_cast<double>(arg))), half + j, n);
    }
    if (dim % 2 != 0) store_f32(dst, 0.0f, dim - 1, n);
  }
}

}  // namespace sd
