// Sampling one batch entry (noise, the guided denoiser, the sampler, previews, step
// caches), and the highres fix's second pass over the sampled latents.
#include <algorithm>
#include <chrono>

#include "pipeline/image_tensor.h"
#include "pipeline/latent_preview.h"
#include "pipeline/stable_diffusion_impl.h"
#include "sampling/guided_denoiser.h"
#include "sampling/spectrum_forecast.h"
#include "tensor/error.h"

namespace sd::pipeline {

// 3. Sampling one batch entry: noise from the entry's seed, the guided denoiser
// (sampling/guided_denoiser.h) over the diffusion net, and the sampler. A high-noise expert
// samples the first steps and hands its latent on, as sd.cpp: the noise is drawn once, the
// sampler RNG runs on.
std::vector<float> StableDiffusion::Impl::sample(const ImageRequest& r, const Plan& p,
                                                 const Conditioning& cond,
                                                 const Conditioning& uncond, int64_t seed,
                                                 sampling::Rng& rng) {
  std::unique_ptr<sampling::Rng> own_sampler_rng;
  sampling::Rng* sampler_rng = &rng;  // shared, as sd.cpp, unless another type is asked
  if (r.sampler_rng && *r.sampler_rng != r.rng) {
    own_sampler_rng = sampling::make_rng(*r.sampler_rng, static_cast<uint64_t>(seed));
    sampler_rng = own_sampler_rng.get();
  }
  const std::vector<float> noise = rng.randn(p.init_latent.size());
  std::vector<float> x = schedule.noised_latent(p.sigmas[0], noise, p.init_latent);
  const int steps = static_cast<int>(p.sigmas.size()) - 1;
  const int split = p.high_noise_steps;  // 0 without an expert; at most `steps` (setup)
  if (split > 0) {
    const Stage expert{
        *high_noise,         std::vector<float>(p.sigmas.begin(), p.sigmas.begin() + split + 1),
        p.high_noise_method, r.high_noise.cfg_scale,
        r.high_noise.eta,    0};
    x = run_stage(r, p, expert, cond, uncond, std::move(x), *sampler_rng);
    report_runner(r.info, kHighNoiseModule, high_noise->graph_runner());
    high_noise_done();
  }
  if (split < steps) {
    const Stage main{*diffusion, std::vector<float>(p.sigmas.begin() + split, p.sigmas.end()),
                     p.method,   r.cfg_scale,
                     r.eta,      split};
    x = run_stage(r, p, main, cond, uncond, std::move(x), *sampler_rng);
  }
  return schedule.inverse_noise_scaling(p.sigmas.back(), std::move(x));
}

std::vector<float> StableDiffusion::Impl::run_stage(const ImageRequest& r, const Plan& p,
                                                    const Stage& stage, const Conditioning& cond,
                                                    const Conditioning& uncond,
                                                    std::vector<float> x,
                                                    sampling::Rng& sampler_rng) {
  DiffusionNet& net = stage.net;
  const std::vector<float>& sigmas = stage.sigmas;
  auto send_preview = [&](int step, const std::vector<float>& sampled, bool noisy) {
    const ImageRequest::Preview& pv = r.preview;
    if (pv.mode == ImageRequest::Preview::Mode::None || !pv.callback || step <= 0) return;
    if ((noisy && !pv.noisy) || (!noisy && !pv.denoised)) return;
    if (step % std::max(1, pv.interval) != 0) return;
    // The clip's frames only (not a VACE reference's).
    const std::vector<float> latent = p.clip_latent(sampled);
    const int64_t clip_frames = p.clip_frames();
    using Mode = ImageRequest::Preview::Mode;
    if (pv.mode == Mode::Proj) {
      pv.callback(
          step,
          project_latent_to_rgb(latent, p.w, p.h, clip_frames,
                                latent_colors_for(family->defaults().latent_colors, vae->config())),
          noisy);
      return;
    }
    const auto f = static_cast<int>(vae->config().downscale());
    const int width = static_cast<int>(p.w) * f, height = static_cast<int>(p.h) * f;
    std::vector<io::Image> frames;
    const bool tae = pv.mode == Mode::Tae;
    if (clip_frames > 1 && vae->decodes_video() && (pv.mode == Mode::Vae || vae->has_video_tae())) {
      // A clip's preview is the clip: decoded as the result will be, or through its TAEHV.
      for (const std::vector<float>& frame :
           tae ? vae->decode_video_preview(latent, p.w, p.h, clip_frames)
               : vae->decode_video(latent, p.w, p.h, clip_frames))
        frames.push_back(planes_to_image(frame.data(), width, height, 3));
    } else {
      // An image (or, through TAESD, a clip's first frame).
      std::vector<float> first;
      if (clip_frames > 1) first = latent_frame(latent, p.w * p.h, clip_frames, 0);
      const std::vector<float> planes =
          vae->decode_preview(clip_frames > 1 ? first : latent, p.w, p.h, tae);
      frames.push_back(planes_to_image(planes.data(), width, height, 3));
    }
    pv.callback(step, frames, noisy);
  };

  sampling::GuidanceOptions guidance;
  guidance.cfg_scale = stage.cfg_scale;
  guidance.img_cfg_scale = p.img_cfg_scale;
  guidance.uncond_x0 = sampling::needs_uncond(stage.method);
  guidance.timestep_shift = r.timestep_shift;
  guidance.mask = p.mask.mask.empty() ? nullptr : &p.mask;
  guidance.guidance_schedule = r.guidance_schedule;
  std::optional<sampling::AdaptiveProjectedGuidance> apg;
  if (r.apg.enabled()) guidance.apg = &apg.emplace(r.apg);
  std::unique_ptr<sampling::SpectrumForecast> spectrum;
  const size_t steps = sigmas.size() - 1;
  std::unique_ptr<sampling::OutputCache> output_cache =
      sampling::make_output_cache(r.cache, sigmas, schedule);
  guidance.output_cache = output_cache.get();
  if (r.cache.mode == sampling::CacheMode::Spectrum) {
    if (guidance.uncond_x0) {
      if (r.warn) r.warn("--cache-mode spectrum does not work with CFG++ samplers; no caching");
    } else {
      spectrum = std::make_unique<sampling::SpectrumForecast>(r.cache.spectrum, steps);
      guidance.forecast = spectrum.get();
    }
  }
  sampling::SkipLayerGuidance skip_layer = r.skip_layer;
  if (skip_layer.scale != 0.0f && !skip_layer.layers.empty()) {
    if (SkipLayerInput* skipping = net.skip_layers()) {
      skip_layer.schedule_size = static_cast<int>(sigmas.size());
      skip_layer.predict = [&, skipping](const std::vector<float>& x_in, float timestep) {
        return skipping->predict_skipping(x_in, p.w, p.h, timestep, cond, skip_layer.layers);
      };
      guidance.skip_layer = &skip_layer;
    } else if (r.warn) {
      r.warn("--slg-scale (skip-layer guidance) applies to SD3/SD3.5 models only; ignored");
    }
  }
  int network_calls = 0, sampler_calls = 0;
  double network_seconds = 0;
  sampling::GuidedDenoiser denoiser(
      schedule,
      [&](const std::vector<float>& x_in, float timestep, const sampling::GuidancePasses& passes) {
        std::vector<const Conditioning*> conds = {&cond};
        if (passes.uncond) conds.push_back(&uncond);
        const auto start = std::chrono::steady_clock::now();
        auto out = net.predict(x_in, p.w, p.h, timestep, conds, p.concat);
        if (passes.img_uncond) {
          // The negative prompt again without the image input (sd.cpp's img_uncond): the
          // concatenated image zeroed, or the reference images left out.
          ReferenceInput* refs = p.refs.empty() ? nullptr : net.references();
          if (refs) refs->use_references(false);
          out.push_back(net.predict(x_in, p.w, p.h, timestep, {&uncond}, p.img_uncond_concat)[0]);
          if (refs) refs->use_references(true);
        }
        network_seconds +=
            std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        ++network_calls;
        return out;
      },
      guidance);
  denoiser.before = [&](const std::vector<float>& xt, const sampling::ModelStep& ms, int step) {
    SD_CHECK(!r.cancelled || !r.cancelled(), "generation cancelled");
    ++sampler_calls;
    if (r.preview.noisy) {
      std::vector<float> noisy(xt.size());
      for (size_t i = 0; i < xt.size(); ++i) noisy[i] = xt[i] * ms.scalings.c_in;
      send_preview(stage.first_step + step, noisy, true);
    }
  };
  auto last = std::chrono::steady_clock::now();
  // Steps count on over both networks of a model with a high-noise expert.
  const int all_steps = static_cast<int>(p.sigmas.size()) - 1;
  denoiser.after = [&](const sampling::Denoised& d, int step) {
    send_preview(stage.first_step + step, d.x0, false);
    if (step > 0 && r.progress) {
      const auto now = std::chrono::steady_clock::now();
      r.progress(stage.first_step + step, all_steps,
                 std::chrono::duration<double>(now - last).count());
      last = now;
    }
  };

  sampling::SamplerOptions sampler_options;
  sampler_options.eta = stage.eta;
  sampler_options.prediction = prediction;
  x = sampling::sample(stage.method, std::cref(denoiser), std::move(x), sigmas, sampler_rng,
                       sampler_options);
  if ((output_cache || spectrum) && r.info) {
    // What the cache saved, priced at this run's mean network evaluation.
    const int saved = sampler_calls - network_calls;
    const double per_call = network_calls > 0 ? network_seconds / network_calls : 0.0;
    r.info(format("%s: %d of %d network evaluations run, %d %s (%.2fx fewer), about %.1fs saved",
                  sampling::cache_mode_name(r.cache.mode), network_calls, sampler_calls, saved,
                  output_cache ? "reused" : "forecast",
                  network_calls > 0 ? static_cast<double>(sampler_calls) / network_calls : 0.0,
                  saved * per_call));
  }
  return x;
}

// The second pass of the highres fix: the pass itself is HiresFix's; this gives it the
// networks.
std::vector<std::vector<float>> StableDiffusion::Impl::hires_pass(
    const ImageRequest& r, const Plan& plan, HiresFix& hires, const Conditioning& cond,
    const Conditioning& uncond, const std::vector<std::vector<float>>& latents, PhaseTimer& timer) {
  const int64_t f = vae->config().downscale();
  Plan hp = plan;
  hp.w = hires.width() / f;
  hp.h = hires.height() / f;
  // Resolution-dependent shifts (flow models) follow the second pass's size.
  hp.scheduler_options.image_seq_len = static_cast<int>(hp.w * hp.h);
  hp.high_noise_steps = 0;  // refining at low noise: the main network's work
  hp.sigmas = hires_sigmas(hires.options(), plan.sample_steps, [&](int steps) {
    return sampling::make_sigmas(plan.scheduler, steps, schedule, hp.scheduler_options);
  });
  if (r.info)
    r.info(format("hires fix: %s upscale %dx%d -> %dx%d, %zu steps",
                  hires_upscaler_name(hires.options().upscaler), r.width, r.height, hires.width(),
                  hires.height(), hp.sigmas.size() - 1));

  HiresStages stages;
  stages.decode = [&](const std::vector<float>& latent) {
    std::vector<float> planes = vae->decode(latent, plan.w, plan.h);
    for (float& v : planes) v = std::clamp(v, 0.0f, 1.0f);
    return planes;
  };
  stages.encode = [&](const std::vector<float>& image, sampling::Rng& rng) {
    return encode(image, hires.width(), hires.height(), rng);
  };
  stages.images_done = [&] {
    vae->release();
    phase_done(Module::Vae);
    timer.done("hires upscaling");
  };
  stages.sample = [&](const std::vector<float>& init_latent, const std::vector<float>& mask, int b,
                      sampling::Rng& rng) {
    Plan p = hp;
    p.init_latent = init_latent;
    p.mask.mask = mask;
    p.mask.init_latent = mask.empty() ? std::vector<float>() : init_latent;
    std::vector<float> x = sample(r, p, cond, uncond, r.seed + b, rng);
    timer.done(format("hires sampling image %d/%zu", b + 1, latents.size()));
    return x;
  };
  std::vector<std::vector<float>> out =
      hires.run(latents, plan.c, f, plan.mask.mask, r.rng, r.seed, stages);
  report_runner(r.info, "diffusion", diffusion->graph_runner());
  diffusion->release();
  phase_done(Module::Diffusion);
  return out;
}

}  // namespace sd::pipeline
