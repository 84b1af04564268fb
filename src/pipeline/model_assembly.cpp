// Opening a model: placement first (a mistyped device fails before any file is read), the
// files' metadata, the family's checks and networks, the VAE and TAESD, and every weight
// the networks read checked against the files before any is loaded.
#include <tuple>

#include "backend/auto_fit.h"
#include "backend/registry.h"
#include "io/name_conversion.h"
#include "pipeline/families/registry.h"
#include "pipeline/model_shapes.h"
#include "pipeline/stable_diffusion_impl.h"
#include "tensor/error.h"

namespace sd::pipeline {

namespace {

// The tiny autoencoders (--tae) there are, by the latents they decode.
constexpr const char* kImageTinyAutoencoders =
    "taesd for SD 1.x/2.x, taesdxl for SDXL, taesd3 for SD3, taef1 for FLUX.1";
constexpr const char* kVideoTinyAutoencoders =
    "taew2_1 for Wan 2.1 and Wan 2.2 A14B, taew2_2 for Wan 2.2 TI2V-5B";

}  // namespace

ModelOptions with_usable_threads(const ModelOptions& o) {
  ModelOptions out = o;
  if (o.threads <= 0) return out;  // 0: all of the machine's
  out.threads = usable_threads(o.threads);
  if (o.threads > out.threads && o.note)
    o.note("warning: " + std::to_string(o.threads) + " threads asked for, this machine runs " +
           std::to_string(out.threads) + "; using " + std::to_string(out.threads));
  return out;
}

StableDiffusion::Impl::Impl(const ModelOptions& requested)
    : options(with_usable_threads(requested)), model_args(parse_model_args(requested.model_args)) {
  const ModelOptions& o = options;
  SD_CHECK(!o.model.empty() || !o.diffusion_model.empty(),
           "no model given: pass -m MODEL (a .safetensors, .gguf, .ckpt file or a diffusers "
           "folder)");
  // Placement first: a mistyped device fails before any file is read.
  if (!o.auto_fit)
    backends =
        std::make_unique<BackendManager>(o.backend, o.params_backend, BackendOptions{o.threads});
  if (!o.model.empty()) loader.add(o.model, io::FileRole::Model);
  if (!o.diffusion_model.empty()) loader.add(o.diffusion_model, io::FileRole::DiffusionModel);
  if (!o.high_noise_diffusion_model.empty())
    loader.add(o.high_noise_diffusion_model, io::FileRole::HighNoiseDiffusionModel);
  if (!o.clip_l.empty()) loader.add(o.clip_l, io::FileRole::ClipL);
  if (!o.clip_g.empty()) loader.add(o.clip_g, io::FileRole::ClipG);
  if (!o.t5xxl.empty()) loader.add(o.t5xxl, io::FileRole::T5xxl);
  if (!o.llm.empty()) loader.add(o.llm, io::FileRole::Llm);
  if (!o.llm_vision.empty()) loader.add(o.llm_vision, io::FileRole::LlmVision);
  if (!o.vae.empty()) loader.add(o.vae, io::FileRole::Vae);
  if (!o.clip_vision.empty()) loader.add(o.clip_vision, io::FileRole::ClipVision);
  // --auto-fit places the modules once their sizes are known from the files.
  const std::string max_vram = o.auto_fit ? fit_placement() : o.max_vram;
  for (const std::string& n : backends->set_memory_budgets(max_vram, o.stream_layers))
    if (o.note) o.note(n);

  const ModelFiles files{loader, options, model_args};
  const Architecture arch = open_architecture(files);
  version = arch.version;
  check_vae_latent(arch);
  if (!o.llm_vision.empty() && !arch.llm_vision && o.note)
    o.note("warning: --llm_vision is read by Qwen-Image-Edit models only; not used");
  family->check_model_args(files);
  for (const std::string& key : model_args.unused)
    if (o.note) o.note("warning: --model-args " + key + " is not used by this build");

  const weights::ModelManagerOptions manager_options{o.weight_type, o.use_mmap, o.threads,
                                                     o.lora_mode, o.tensor_type_rules};
  weights = std::make_unique<weights::ModelManager>(loader, manager_options);
  Device& diffusion_device = backends->compute_device(Module::Diffusion);
  const bool quantize_convs = o.quantize_convs && diffusion_device.caps().int8_convolutions;
  if (o.quantize_convs && !quantize_convs && o.note)
    o.note("warning: --quantize-convs: " + diffusion_device.name() +
           " has no 8-bit integer convolutions (on the CPU they need AVX-512 VNNI); the "
           "convolutions keep their stored type");
  auto add_module = [&](weights::ModelManager& manager, Module m, std::vector<std::string> prefixes,
                        const char* name = nullptr) {
    weights::ModuleSpec spec{name ? name : module_name(m), std::move(prefixes),
                             &backends->compute_device(m), backends->residency(m)};
    spec.quantize_convs = quantize_convs && m == Module::Diffusion;
    spec.bf16_attention = o.flash_attn || (o.diffusion_flash_attn && m == Module::Diffusion);
    manager.add_module(std::move(spec));
  };
  add_module(*weights, Module::TextEncoder, family->text_encoder_roots(arch));
  add_module(*weights, Module::Diffusion, {std::string(io::kUnetRoot)});
  add_module(*weights, Module::Vae, {std::string(io::kVaeRoot)});

  const NetworkPlaces places{*weights, backends->backend(Module::TextEncoder),
                             backends->backend(Module::Diffusion)};
  text = family->make_prompt_encoder(arch, files, places);
  diffusion = family->make_diffusion_net(arch, places);
  high_noise = family->make_high_noise_net(arch, places);
  SD_CHECK(high_noise || o.high_noise_diffusion_model.empty(),
           "--high-noise-diffusion-model %s: %s models have one diffusion network; a high-noise "
           "expert is Wan 2.2 A14B's (drop the flag)",
           o.high_noise_diffusion_model.c_str(), family->name());
  if (high_noise)  // computed and kept where the diffusion net is
    add_module(*weights, Module::Diffusion, {std::string(io::kHighNoiseUnetRoot)},
               kHighNoiseModule);
  if (arch.clip_vision) {
    add_module(*weights, Module::ClipVision, {std::string(io::kClipVisionRoot)});
    image_encoder = std::make_unique<ClipVisionRunner>(*weights, *arch.clip_vision,
                                                       backends->backend(Module::ClipVision));
  }

  nn::Weights* tae = nullptr;
  if (!o.taesd.empty()) {
    taesd_loader.add(o.taesd, io::FileRole::Model);
    taesd_weights = std::make_unique<weights::ModelManager>(taesd_loader, manager_options);
    add_module(*taesd_weights, Module::Vae, {""});
    taesd_view = std::make_unique<PrefixedWeights>(*taesd_weights, VaeRunner::kTaesdScope);
    tae = taesd_view.get();
  }
  vae = std::make_unique<VaeRunner>(*weights, arch.vae, backends->backend(Module::Vae), tae,
                                    o.taesd_preview_only);
  if (tae) check_tiny_autoencoder();

  // Every weight each network reads, checked against the files now: a wrong or
  // incomplete file fails here, naming every problem, not halfway through a generation.
  weights->declare(module_name(Module::TextEncoder), text->parameters());
  weights->declare(module_name(Module::Diffusion), diffusion->parameters());
  if (high_noise) weights->declare(kHighNoiseModule, high_noise->parameters());
  weights->declare(module_name(Module::Vae), vae->parameters());
  if (image_encoder) weights->declare(module_name(Module::ClipVision), image_encoder->parameters());
  if (taesd_weights)
    taesd_weights->declare(
        module_name(Module::Vae), taesd_view->strip(vae->taesd_parameters()),
        "the tiny autoencoder's weights (--tae)",
        std::string("A tiny autoencoder decodes one latent space; ") + family->name() +
            " needs its own (" +
            (vae->decodes_video() ? kVideoTinyAutoencoders : kImageTinyAutoencoders) + ")");
  if (o.eager_load) {
    for (Module m : {Module::TextEncoder, Module::Diffusion, Module::Vae}) load(*weights, m);
    if (image_encoder) load(*weights, Module::ClipVision);
    if (high_noise) load(*weights, kHighNoiseModule);
    if (taesd_weights) load(*taesd_weights, Module::Vae);
  }
  if (!o.control_net.empty()) load_control_net(o.control_net);

  if (o.prediction) {
    prediction = *o.prediction;
    prediction_probed = true;
  } else if (family->defaults().prediction) {
    prediction = *family->defaults().prediction;
    prediction_probed = true;
  }
  default_flow_shift = family->default_flow_shift(version);
  schedule = sampling::DiscreteSchedule(prediction, {}, default_flow_shift);
}

void StableDiffusion::Impl::check_tiny_autoencoder() {
  const std::string& file = options.taesd;
  const bool video_tae = taesd_loader.contains("decoder.1.weight");
  const bool image_tae = taesd_loader.contains("decoder.layers.0.weight");
  if (!vae->decodes_video()) {
    SD_CHECK(!video_tae || image_tae,
             "--tae %s is a TAEHV, a tiny autoencoder for video latents; %s models need a TAESD "
             "for their latents (%s)",
             file.c_str(), family->name(), kImageTinyAutoencoders);
    return;
  }
  const char* needed = kVideoTinyAutoencoders;
  SD_CHECK(!image_tae || video_tae,
           "--tae %s is a TAESD, a tiny autoencoder for images; %s latents need a TAEHV (%s)",
           file.c_str(), family->name(), needed);
  SD_CHECK(video_tae,
           "--tae %s is no tiny autoencoder (it has no decoder.1.weight); %s latents need a "
           "TAEHV (%s)",
           file.c_str(), family->name(), needed);
  try {
    vae->set_video_tae(taehv_config_from_shapes("", [&](const std::string& name) {
      std::optional<std::array<int64_t, 4>> ne;
      if (taesd_loader.contains(name)) ne = taesd_loader.find(name).ne;
      return ne;
    }));
  } catch (const Error& e) {
    fail("--tae %s: %s", file.c_str(), e.what());
  }
}

Architecture StableDiffusion::Impl::open_architecture(const ModelFiles& files) {
  const std::string& file = options.model.empty() ? options.diffusion_model : options.model;
  try {
    const io::ModelVersion v = options.architecture ? options.architecture->version
                                                    : io::detect_version(loader.canonical_infos());
    family = &family_for(v);
    family->require_files(files);
    return options.architecture ? *options.architecture : family->architecture(v, files);
  } catch (const Error& e) {
    fail("%s: %s", file.c_str(), e.what());
  }
}

void StableDiffusion::Impl::check_vae_latent(const Architecture& arch) const {
  const std::string conv_in = std::string(io::kVaeRoot) + "decoder.conv_in.weight";
  if (!loader.contains(conv_in)) return;
  const int64_t channels = loader.find(conv_in).ne[2];  // [3, 3, latent, ch]
  const std::string& file = options.vae.empty() ? options.model : options.vae;
  SD_CHECK(channels == arch.vae.z_channels,
           "%s: the VAE decodes %lld-channel latents but %s models make %lld-channel ones (a "
           "VAE of another model family?)",
           file.c_str(), static_cast<long long>(channels), io::version_name(arch.version),
           static_cast<long long>(arch.vae.z_channels));
}

std::string StableDiffusion::Impl::fit_placement() {
  // Encoders kept under text_encoders. (T5, SD3's CLIPs) are in the text-encoder module, a
  // high-noise expert in the diffusion module.
  const std::tuple<Module, std::string_view, std::string_view> roots[] = {
      {Module::TextEncoder, io::kTextEncoderRoot, "text_encoders."},
      {Module::Diffusion, io::kUnetRoot, io::kHighNoiseUnetRoot},
      {Module::Vae, io::kVaeRoot, {}},
      {Module::ClipVision, io::kClipVisionRoot, {}}};
  std::vector<ModuleSize> sizes;
  for (const auto& [module, root, root2] : roots) {
    ModuleSize size{module, 0};
    for (const auto& [name, source] : loader.tensors())
      if (name.compare(0, root.size(), root) == 0 ||
          (!root2.empty() && name.compare(0, root2.size(), root2) == 0))
        size.weight_bytes += row_size(source.stored, source.ne[0]) *
                             static_cast<size_t>(source.ne[1] * source.ne[2] * source.ne[3]);
    sizes.push_back(size);
  }
  const FitPlan plan =
      plan_auto_fit(sizes, DeviceRegistry::instance(), parse_max_vram(options.max_vram));
  auto note = [&](const std::string& text) {
    if (options.note) options.note("auto-fit: " + text);
  };
  if (!options.backend.empty() || !options.params_backend.empty())
    note("--backend and --params-backend are not read with --auto-fit");
  for (const std::string& line : plan.lines) note(line);
  backends = std::make_unique<BackendManager>(plan.backend, plan.params_backend,
                                              BackendOptions{options.threads});
  if (plan.max_vram.empty()) return options.max_vram;
  return options.max_vram.empty() ? plan.max_vram : options.max_vram + "," + plan.max_vram;
}

void StableDiffusion::Impl::load_control_net(const std::string& path) {
  ControlInput* control = diffusion->control();
  SD_CHECK(control, "--control-net %s: ControlNets guide SD 1.x/2.x/SDXL UNets, not %s",
           path.c_str(), family->name());
  const weights::ModelManagerOptions manager_options{options.weight_type, options.use_mmap,
                                                     options.threads, options.lora_mode,
                                                     options.tensor_type_rules};
  control_net = std::make_unique<LoadedControlNet>(path, control->config(), *backends,
                                                   manager_options, options.eager_load);
}

void StableDiffusion::Impl::load(weights::ModelManager& manager, Module m) {
  load(manager, module_name(m));
}

void StableDiffusion::Impl::load(weights::ModelManager& manager, const std::string& name) {
  manager.load_module(
      name,
      [&](size_t done, size_t total) {
        if (options.load_progress) options.load_progress(name, done, total);
      },
      /*prefault=*/true);
}

void StableDiffusion::Impl::phase_done(Module m) {
  weights->phase_done(module_name(m));
  if (m == Module::Vae && taesd_weights) taesd_weights->phase_done(module_name(m));
  backends->release_caches();
}

void StableDiffusion::Impl::high_noise_done() {
  high_noise->release();
  weights->phase_done(kHighNoiseModule);
  backends->release_caches();
}

void StableDiffusion::Impl::probe_prediction() {
  if (prediction_probed) return;
  prediction_probed = true;
  if (const std::optional<sampling::Prediction> p = diffusion->probe_prediction()) prediction = *p;
  schedule = sampling::DiscreteSchedule(prediction);
}

}  // namespace sd::pipeline
