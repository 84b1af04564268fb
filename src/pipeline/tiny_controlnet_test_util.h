// Tiny random-weight ControlNets for the tiny models of tiny_model_test_util.h, written by
// the project's own code with the original (control_model.*) names.
#pragma once

#include <string>
#include <utility>

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

// The diffusers ControlNetModel name of an original ControlNet tensor (without its
// control_model. prefix), for an encoder of 2 res blocks per level: diffusers numbers
// input_blocks.(3i + j + 1) as down_blocks.i.resnets/attentions.j.
inline std::string diffusers_controlnet_name(const std::string& name) {
  auto starts = [&](const std::string& p) { return name.rfind(p, 0) == 0; };
  auto after = [&](const std::string& p) { return name.substr(p.size()); };
  // ResBlock -> ResnetBlock2D inner names.
  auto resnet = [](std::string rest) {
    static const std::pair<const char*, const char*> kRenames[] = {
        {"in_layers.0.", "norm1."},          {"in_layers.2.", "conv1."},
        {"emb_layers.1.", "time_emb_proj."}, {"out_layers.0.", "norm2."},
        {"out_layers.3.", "conv2."},         {"skip_connection.", "conv_shortcut."}};
    for (const auto& [from, to] : kRenames)
      if (rest.rfind(from, 0) == 0) return to + rest.substr(std::string(from).size());
    return rest;
  };
  if (starts("input_hint_block.")) {
    const std::string rest = after("input_hint_block.");
    const int k = std::stoi(rest);
    const std::string tail = rest.substr(rest.find('.'));
    if (k == 0) return "controlnet_cond_embedding.conv_in" + tail;
    if (k == 14) return "controlnet_cond_embedding.conv_out" + tail;
    return "controlnet_cond_embedding.blocks." + std::to_string(k / 2 - 1) + tail;
  }
  if (starts("zero_convs.")) {
    const std::string rest = after("zero_convs.");  // "3.0.weight"
    return "controlnet_down_blocks." + rest.substr(0, rest.find('.')) +
           rest.substr(rest.find('.') + 2);
  }
  if (starts("middle_block_out.0.")) return "controlnet_mid_block." + after("middle_block_out.0.");
  if (starts("time_embed.0.")) return "time_embedding.linear_1." + after("time_embed.0.");
  if (starts("time_embed.2.")) return "time_embedding.linear_2." + after("time_embed.2.");
  if (starts("input_blocks.0.0.")) return "conv_in." + after("input_blocks.0.0.");
  if (starts("input_blocks.")) {
    const std::string rest = after("input_blocks.");  // "4.1.norm.weight"
    const int n = std::stoi(rest);
    const size_t dot = rest.find('.');
    const int part = std::stoi(rest.substr(dot + 1));
    const std::string inner = rest.substr(rest.find('.', dot + 1) + 1);
    const int level = (n - 1) / 3, j = (n - 1) % 3;
    if (j == 2)
      return "down_blocks." + std::to_string(level) + ".downsamplers.0.conv." +
             inner.substr(std::string("op.").size());
    const std::string block = "down_blocks." + std::to_string(level);
    return part == 0 ? block + ".resnets." + std::to_string(j) + "." + resnet(inner)
                     : block + ".attentions." + std::to_string(j) + "." + inner;
  }
  if (starts("middle_block.")) {
    const std::string rest = after("middle_block.");  // "2.in_layers.0.weight"
    const int k = std::stoi(rest);
    const std::string inner = rest.substr(rest.find('.') + 1);
    return k == 1 ? "mid_block.attentions.0." + inner
                  : "mid_block.resnets." + std::to_string(k / 2) + "." + resnet(inner);
  }
  return name;
}

// Writes the ControlNet to `path` with the original names (control_model.*); `bare`: the
// same values without the control_model. prefix, as some converted files have them;
// `diffusers`: the same values under diffusers' names (diffusers_controlnet_name).
inline std::string write_tiny_controlnet(const models::ControlNetConfig& c, const std::string& path,
                                         uint32_t seed = 31, bool bare = false,
                                         bool diffusers = false) {
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
  if (!bare && !diffusers) {
    w.save_safetensors(path);
    return path;
  }
  nn::RandomWeights renamed(DType::F16, seed);
  for (const nn::ParamDecl& p : recorder.params()) {
    const std::string name = p.name.substr(prefix.size());
    renamed.set(diffusers ? diffusers_controlnet_name(name) : name, p.ne, w.values(p.name));
  }
  renamed.save_safetensors(path);
  return path;
}

}  // namespace sd::pipeline::test
