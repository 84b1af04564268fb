// Tiny random-weight ControlNets for the tiny models of tiny_model_test_util.h, written by
// the project's own code with the original (control_model.*) names.
#pragma once

#include <string>

#include "models/controlnet.h"
#include "nn/param_recorder.h"
#include "nn/random_weights.h"
#include "pipeline/tiny_model_test_util.h"

namespace sd::pipeline::test {

// The encoder of `unet` with a small hint block (every width unlike the real 16..256, so
// loading proves they are read from the file).
inline models::ControlNetConfig tiny_controlnet_config(const models::UnetConfig& unet) {
  models::ControlNetConfig c;
  c.unet = unet;
  c.hint_widths = {4, 4, 8, 8, 8, 8, 16, unet.model_channels};
  return c;
}

// Writes the ControlNet to `path` with the original names (control_model.*); `bare`: the
// same values without the control_model. prefix, as some converted files have them.
inline std::string write_tiny_controlnet(const models::ControlNetConfig& c, const std::string& path,
                                         uint32_t seed = 31, bool bare = false) {
  const std::string prefix = "control_model.";
  nn::RandomWeights w(DType::F16, seed);
  nn::ParamRecorder recorder(w);
  Context ctx;
  const models::UnetConfig& u = c.unet;
  Tensor* x = ctx.new_tensor(DType::F32, {8, 8, u.in_channels, 1});
  Tensor* hint = ctx.new_tensor(DType::F32, {64, 64, c.hint_channels, 1});
  Tensor* t = ctx.new_tensor(DType::F32, {1});
  Tensor* context = ctx.new_tensor(DType::F32, {u.context_dim, 77, 1});
  Tensor* y = u.adm_in_channels > 0 ? ctx.new_tensor(DType::F32, {u.adm_in_channels, 1}) : nullptr;
  for (nn::Weights* weights :
       {static_cast<nn::Weights*>(&w), static_cast<nn::Weights*>(&recorder)}) {
    const nn::Scope s(ctx, *weights, prefix);
    models::controlnet_forward(s, c, x, models::controlnet_hint(s, c, hint), t, context, y);
  }
  if (!bare) {
    w.save_safetensors(path);
    return path;
  }
  nn::RandomWeights renamed(DType::F16, seed);
  for (const nn::ParamDecl& p : recorder.params())
    renamed.set(p.name.substr(prefix.size()), p.ne, w.values(p.name));
  renamed.save_safetensors(path);
  return path;
}

}  // namespace sd::pipeline::test
