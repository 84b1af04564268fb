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

// Outside the mask the denoised latent is the init image's.
void keep_outside_mask(std::vector<float>& x0, const DenoiseMask* mask) {
  if (!mask || mask->mask.empty()) return;
  const size_t plane = mask->mask.size();
  for (size_t i = 0; i < x0.size(); ++i) {
    const float mk = mask->mask[i % plane];
    x0[i] = x0[i] * mk + mask->init_latent[i] * (1.0f - mk);
  }
}

}  // namespace

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
  const bool with_uncond = cfg_needs_uncond(options_.cfg_scale);
  const size_t conditionings = with_uncond ? 2 : 1;
  std::vector<float> scaled(x.size());
  for (size_t i = 0; i < x.size(); ++i) scaled[i] = x[i] * ms.scalings.c_in;
  std::vector<std::vector<float>> out;
  if (options_.output_cache) out = options_.output_cache->reuse(step, sigma, scaled, conditionings);
  if (out.empty()) {
    out = network_(scaled, ms.timestep, with_uncond);
    SD_CHECK(out.size() == conditionings,
             "[guided denoiser] the network gave %zu outputs; expected %zu", out.size(),
             conditionings);
    if (options_.output_cache) options_.output_cache->computed(step, scaled, out);
  }

  // Classifier-free guidance on the model outputs, then the denoised latent.
  std::vector<float> guided;
  if (with_uncond && options_.apg) {
    // APG scales by --cfg-scale even under a schedule, as the reference does.
    guided = options_.apg->guide(out[0], out[1], options_.cfg_scale);
  } else if (with_uncond) {
    lerp_into(guided, out[1], out[0], guidance_scale(step));
  } else {
    guided = out[0];
  }
  if (options_.skip_layer && options_.skip_layer->applies_at(step))
    options_.skip_layer->apply(guided, out[0], options_.skip_layer->predict(scaled, ms.timestep));
  d.x0.resize(x.size());
  for (size_t i = 0; i < x.size(); ++i)
    d.x0[i] = guided[i] * ms.scalings.c_out + x[i] * ms.scalings.c_skip;
  if (options_.uncond_x0) {
    const std::vector<float>& base = with_uncond ? out[1] : guided;
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
