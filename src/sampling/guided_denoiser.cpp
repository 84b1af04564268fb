#include "sampling/guided_denoiser.h"

#include "tensor/error.h"

namespace sd::sampling {

namespace {

// out = a + s * (b - a), elementwise.
void lerp_into(std::vector<float>& out, const std::vector<float>& a, const std::vector<float>& b,
               float s) {
  out.resize(a.size());
  for (size_t i = 0; i < a.size(); ++i) out[i] = a[i] + s * (b[i] - a[i]);
}

// Outside the mask a latent is the init image's.
void blend_into_mask(std::vector<float>& x, const DenoiseMask* mask) {
  const size_t plane = mask->mask.size();
  for (size_t i = 0; i < x.size(); ++i) {
    const float mk = mask->mask[i % plane];
    x[i] = x[i] * mk + mask->init_latent[i] * (1.0f - mk);
  }
}

void keep_outside_mask(std::vector<float>& x0, const DenoiseMask* mask) {
  if (!mask || mask->mask.empty()) return;
  blend_into_mask(x0, mask);
}

}  // namespace

std::vector<float> image_guided(const std::vector<float>& cond, const std::vector<float>& uncond,
                                const std::vector<float>& img_uncond, float cfg_scale,
                                float img_cfg_scale) {
  std::vector<float> out(cond.size());
  for (size_t i = 0; i < cond.size(); ++i) {
    const float image_part = img_uncond[i] + img_cfg_scale * (uncond[i] - img_uncond[i]);
    out[i] = image_part + cfg_scale * (cond[i] - uncond[i]);
  }
  return out;
}

float GuidedDenoiser::guidance_scale(int step) const {
  // The reference reads the schedule from its end by step number; calls outside it (the
  // first of a two-call step) keep --cfg-scale.
  const auto& schedule = options_.guidance_schedule;
  const long index = static_cast<long>(schedule.size()) - 1 - step;
  if (schedule.empty() || index < 0 || index >= static_cast<long>(schedule.size()))
    return options_.cfg_scale;
  return schedule[static_cast<size_t>(index)];
}

Denoised GuidedDenoiser::operator()(const std::vector<float>& x, float sigma, int step) const {
  const ModelStep ms = schedule_.model_step(sigma, options_.timestep_shift);
  if (before) before(x, ms, step);
  Denoised d;
  if (options_.forecast && options_.forecast->forecast(d.x0)) {
    keep_outside_mask(d.x0, options_.mask);
    if (after) after(d, step);
    return d;
  }
  const GuidancePasses passes = guidance_passes(options_.cfg_scale, options_.img_cfg_scale);
  const size_t conditionings = passes.count();
  std::vector<float> scaled(x.size());
  for (size_t i = 0; i < x.size(); ++i) scaled[i] = x[i] * ms.scalings.c_in;
  if (options_.mask && options_.mask->pin_input) blend_into_mask(scaled, options_.mask);
  std::vector<std::vector<float>> out;
  if (options_.output_cache) out = options_.output_cache->reuse(step, sigma, scaled, conditionings);
  if (out.empty()) {
    out = network_(scaled, ms.timestep, passes);
    SD_CHECK(out.size() == conditionings,
             "[guided denoiser] the network gave %zu outputs; expected %zu", out.size(),
             conditionings);
    if (options_.output_cache) options_.output_cache->computed(step, scaled, out);
  }

  // Classifier-free guidance on the model outputs, then the denoised latent.
  const std::vector<float>* uncond = passes.uncond ? &out[1] : nullptr;
  const std::vector<float>* img_uncond = passes.img_uncond ? &out.back() : nullptr;
  std::vector<float> guided;
  if (options_.apg && (uncond || img_uncond)) {
    // APG scales by --cfg-scale even under a schedule, as the reference does.
    guided =
        options_.apg->guide(out[0], uncond, img_uncond, options_.cfg_scale, options_.img_cfg_scale);
  } else if (uncond && img_uncond) {
    guided =
        image_guided(out[0], *uncond, *img_uncond, guidance_scale(step), options_.img_cfg_scale);
  } else if (uncond || img_uncond) {
    lerp_into(guided, uncond ? *uncond : *img_uncond, out[0], guidance_scale(step));
  } else {
    guided = out[0];
  }
  if (options_.skip_layer && options_.skip_layer->applies_at(step))
    options_.skip_layer->apply(guided, out[0], options_.skip_layer->predict(scaled, ms.timestep));
  d.x0.resize(x.size());
  for (size_t i = 0; i < x.size(); ++i)
    d.x0[i] = guided[i] * ms.scalings.c_out + x[i] * ms.scalings.c_skip;
  if (options_.uncond_x0) {
    // CFG++ steps along the least conditioned output, as the reference.
    const std::vector<float>& base = img_uncond ? *img_uncond : uncond ? *uncond : guided;
    d.uncond_x0.resize(x.size());
    for (size_t i = 0; i < x.size(); ++i)
      d.uncond_x0[i] = base[i] * ms.scalings.c_out + x[i] * ms.scalings.c_skip;
  }
  if (options_.forecast) options_.forecast->observe(d.x0);
  keep_outside_mask(d.x0, options_.mask);
  if (after) after(d, step);
  return d;
}

}  // namespace sd::sampling
