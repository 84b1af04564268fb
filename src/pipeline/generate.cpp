// One request, whole: the text phase, sampling each batch entry (with ControlNet and
// reference images on where asked), the highres fix, decoding. Each phase gives its memory
// back before the next starts.
#include <memory>

#include "pipeline/image_tensor.h"
#include "pipeline/inpaint_mask.h"
#include "pipeline/stable_diffusion_impl.h"
#include "pipeline/upscaler.h"
#include "sampling/guidance_extras.h"
#include "tensor/error.h"

namespace sd::pipeline {

std::vector<io::Image> StableDiffusion::generate(const ImageRequest& request) {
  Impl& m = *impl_;
  const ImageRequest r = m.validate(request);
  // Checked (and a model upscaler's file opened) before any work.
  std::unique_ptr<HiresFix> hires;
  if (r.hires.enabled) {
    UpscalerOptions model;
    model.threads = m.options.threads;
    model.backend = m.options.backend;
    model.params_backend = m.options.params_backend;
    hires = std::make_unique<HiresFix>(r.hires, r.width, r.height, m.size_unit(), model, r.warn);
  }
  // A cancel stops whatever runs, between two nodes of its graph (a VAE decode included).
  struct StopChecks {
    BackendManager& backends;
    bool image_encoder;
    void set(const std::function<bool()>& stop) {
      for (Module module : {Module::TextEncoder, Module::Diffusion, Module::Vae})
        backends.backend(module).set_stop(stop);
      if (image_encoder) backends.backend(Module::ClipVision).set_stop(stop);
    }
    ~StopChecks() { set(nullptr); }
  } stop_checks{*m.backends, m.image_encoder != nullptr};
  if (r.cancelled) stop_checks.set(r.cancelled);
  const Impl::Plan plan = m.setup(r);

  // Conditioning, once for the whole batch; the negative prompt only matters with CFG.
  // An encoder with a vision tower reads both prompts with the reference images.
  PhaseTimer timer(r.info, *m.weights);
  struct PromptImagesOff {
    PromptImageInput* images;
    ~PromptImagesOff() {
      if (images) images->set_prompt_images({});
    }
  } prompt_images_off{r.ref_options.pass_to_vlm && !r.ref_images.empty() ? m.text->prompt_images()
                                                                         : nullptr};
  if (prompt_images_off.images) prompt_images_off.images->set_prompt_images(r.ref_images);
  Conditioning cond = m.text->encode(r.prompt, r.clip_skip);
  m.family->complete_conditioning(cond, r.prompt, false, r.width, r.height);
  Conditioning uncond;
  const sampling::GuidancePasses passes =
      sampling::guidance_passes(r.cfg_scale, plan.img_cfg_scale);
  const bool expert_uncond =
      plan.high_noise_steps > 0 &&
      sampling::guidance_passes(r.high_noise.cfg_scale, plan.img_cfg_scale).uncond;
  if (passes.uncond || passes.img_uncond || expert_uncond) {
    uncond = m.text->encode(r.negative_prompt, r.clip_skip);
    m.family->complete_conditioning(uncond, r.negative_prompt, true, r.width, r.height);
  }
  report_module(r.info, "text encoders", m.text->streaming_report());
  if (prompt_images_off.images) prompt_images_off.images->set_prompt_images({});
  m.text->release();
  m.phase_done(Module::TextEncoder);
  m.diffusion->set_distilled_guidance(r.guidance);
  timer.done("text encoding");

  // Reference images join every prediction of this request, the highres fix's second
  // pass included.
  struct ReferencesOff {
    ReferenceInput* refs;
    ~ReferencesOff() {
      if (refs) refs->set_references({}, std::nullopt);
    }
  } references_off{plan.refs.empty() ? nullptr : m.diffusion->references()};
  if (references_off.refs) references_off.refs->set_references(plan.refs, r.ref_options.index_mode);

  // ControlNet guidance for a pass over `lw` x `lh` latents: the control image resized to
  // 8x that size (its hint block's factor; the pass's image size with SD's VAE). The highres
  // fix's second pass is guided by the same image at its own size, as the first.
  ControlInput* control = m.control_net && r.control_image ? m.diffusion->control() : nullptr;
  const bool controlled = control != nullptr;
  auto control_on = [&](int64_t lw, int64_t lh) {
    const io::Image& img = *r.control_image;
    const int64_t hint_c = m.control_net->runner().config().hint_channels;
    const int64_t hint_w = 8 * lw, hint_h = 8 * lh;
    std::vector<float> hint = image_to_planes(io::to_channels(img, static_cast<int>(hint_c)));
    if (img.width != hint_w || img.height != hint_h)
      hint = resize_nearest(hint, img.width, img.height, hint_c, hint_w, hint_h);
    control->set_control(&m.control_net->runner(), std::move(hint), r.control_strength);
  };
  if (controlled) control_on(plan.w, plan.h);
  struct ControlOff {
    Impl& m;
    ControlInput* control;
    bool on;
    void operator()() {
      if (!on) return;
      on = false;
      control->set_control(nullptr);
      m.control_net->phase_done();
    }
    ~ControlOff() { (*this)(); }
  } control_off{m, control, controlled};

  std::vector<std::vector<float>> latents;
  // A latent upscale goes straight back to the diffusion net: keep it.
  const bool net_again = hires && upscales_latent(r.hires.upscaler);
  for (int b = 0; b < r.batch_count; ++b) {
    const bool stop = b > 0 && r.stop_new_images && r.stop_new_images();
    if (!stop) {
      std::unique_ptr<sampling::Rng> rng =
          sampling::make_rng(r.rng, static_cast<uint64_t>(r.seed + b));
      latents.push_back(m.sample(r, plan, cond, uncond, r.seed + b, *rng));
    }
    if ((stop || b + 1 == r.batch_count) && !net_again) {
      // Each phase gives its memory back before the next starts: peak memory is the
      // largest phase's, not their sum.
      report_runner(r.info, "diffusion", m.diffusion->graph_runner());
      m.diffusion->release();
      m.phase_done(Module::Diffusion);
    }
    if (stop) break;
    timer.done(format("sampling image %d/%d", b + 1, r.batch_count));
  }
  control_off();

  int width = r.width, height = r.height;
  if (hires) {
    if (controlled) {
      const int64_t f = m.vae->config().downscale();
      control_on(hires->width() / f, hires->height() / f);
      control_off.on = true;
    }
    latents = m.hires_pass(r, plan, *hires, cond, uncond, latents, timer);
    control_off();
    width = hires->width();
    height = hires->height();
  }

  // 4. Decoding.
  const auto f = static_cast<int>(m.vae->config().downscale());
  std::vector<io::Image> images;
  if (r.video_frames > 0) {
    SD_CHECK(m.vae->decodes_video(), "the --vae autoencoder decodes images, not video clips");
    for (std::vector<float>& frame :
         m.vae->decode_video(plan.clip_latent(latents.at(0)), plan.w, plan.h, plan.clip_frames()))
      images.push_back(planes_to_image(frame.data(), width, height, 3));
    SD_CHECK(static_cast<int>(images.size()) == r.video_frames,
             "the autoencoder decoded %zu frames for a clip of %d", images.size(), r.video_frames);
    timer.done(format("decoding %zu frames", images.size()));
    latents.clear();
  }
  for (const std::vector<float>& latent : latents) {
    std::vector<float> planes = m.vae->decode(latent, width / f, height / f);
    images.push_back(planes_to_image(planes.data(), width, height, 3));
    timer.done("decoding");
  }
  report_module(r.info, "vae", m.vae->streaming_report());
  m.vae->release();
  m.phase_done(Module::Vae);
  return images;
}

}  // namespace sd::pipeline
