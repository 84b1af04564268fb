#include "pipeline/stable_diffusion.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <tuple>

#include "backend/auto_fit.h"
#include "backend/registry.h"
#include "io/name_conversion.h"
#include "models/clip_text.h"
#include "models/clip_tokenizer.h"
#include "models/t5_tokenizer.h"
#include "models/unet.h"
#include "models/vae.h"
#include "pipeline/chroma_conditioner.h"
#include "pipeline/control_net.h"
#include "pipeline/edit_image.h"
#include "pipeline/flux_conditioner.h"
#include "pipeline/flux_fill.h"
#include "pipeline/flux_runner.h"
#include "pipeline/hires_fix.h"
#include "pipeline/image_tensor.h"
#include "pipeline/inpaint_mask.h"
#include "pipeline/latent_preview.h"
#include "pipeline/mmdit_runner.h"
#include "pipeline/model_args.h"
#include "pipeline/model_family.h"
#include "pipeline/model_shapes.h"
#include "pipeline/reference_images.h"
#include "pipeline/sd3_conditioner.h"
#include "pipeline/text_conditioner.h"
#include "pipeline/unet_runner.h"
#include "pipeline/vae_runner.h"
#include "sampling/guided_denoiser.h"
#include "sampling/spectrum_forecast.h"
#include "tensor/error.h"
#include "weights/model_loader.h"
#include "weights/model_manager.h"

namespace sd::pipeline {

namespace {

using io::ModelVersion;

// Says how a phase's weights were streamed within a --max-vram budget, if they were.
void report_streaming(const std::function<void(const std::string&)>& info, const char* module,
                      const std::string& report) {
  if (info && !report.empty()) info(std::string(module) + ": " + report);
}

// Reports how long each phase took.
class PhaseTimer {
 public:
  PhaseTimer(const std::function<void(const std::string&)>& info,
             const weights::ModelManager& weights)
      : info_(info),
        weights_(weights),
        start_(std::chrono::steady_clock::now()),
        traffic_(weights.traffic()) {}
  // Logs the phase's time and what its weights cost: bytes read from the files (and
  // converted), mapped, and freed when it ended; what `disk` residency pays per phase.
  void done(const std::string& phase) {
    const auto now = std::chrono::steady_clock::now();
    const weights::WeightTraffic t = weights_.traffic();
    if (info_)
      info_(
          format("%s completed, taking %.2fs (weights: %.0f MB read, %.0f MB mapped, %.0f MB "
                 "freed)",
                 phase.c_str(), std::chrono::duration<double>(now - start_).count(),
                 mb(t.loaded - traffic_.loaded), mb(t.mapped - traffic_.mapped),
                 mb(t.freed - traffic_.freed)));
    start_ = now;
    traffic_ = t;
  }

 private:
  static double mb(size_t bytes) { return static_cast<double>(bytes) / 1e6; }

  const std::function<void(const std::string&)>& info_;
  const weights::ModelManager& weights_;
  std::chrono::steady_clock::time_point start_;
  weights::WeightTraffic traffic_;
};

}  // namespace

struct StableDiffusion::Impl {
  ModelOptions options;
  ModelArgs model_args;  // --model-args, read before any file
  weights::ModelLoader loader;
  weights::ModelLoader taesd_loader;
  ModelVersion version = ModelVersion::Unknown;
  const FamilyDescription* family = nullptr;
  sampling::Prediction prediction = sampling::Prediction::Eps;
  bool prediction_probed = false;
  std::unique_ptr<BackendManager> backends;
  std::unique_ptr<weights::ModelManager> weights;
  std::unique_ptr<weights::ModelManager> taesd_weights;
  std::unique_ptr<PromptEncoder> text;
  std::unique_ptr<DiffusionNet> diffusion;
  UnetRunner* unet = nullptr;    // `diffusion` when it is a UNet
  MmditRunner* mmdit = nullptr;  // `diffusion` when it is SD3's MMDiT
  FluxRunner* flux = nullptr;    // `diffusion` when it is FLUX.1's transformer
  float default_flow_shift = 3.0f;
  std::unique_ptr<VaeRunner> vae;
  std::unique_ptr<LoadedControlNet> control_net;  // --control-net
  sampling::DiscreteSchedule schedule;

  // What setup() prepares for the batch.
  struct Plan {
    sampling::SampleMethod method = sampling::SampleMethod::EulerA;
    sampling::Scheduler scheduler = sampling::Scheduler::Discrete;
    sampling::SchedulerOptions scheduler_options;
    int sample_steps = 0;  // what the first pass runs before any img2img trimming
    std::vector<float> sigmas;
    int64_t w = 0, h = 0, c = 0;              // the latent
    std::vector<float> init_latent;           // the encoded init image; zeros for text-to-image
    std::vector<float> concat;                // inpainting and pix2pix models' extra UNet input
    std::vector<float> img_uncond_concat;     // the same with the image part zeroed
    sampling::DenoiseMask mask;               // empty mask: nothing kept from the init image
    float img_cfg_scale = 1.0f;               // resolved --img-cfg-scale (1: no image guidance)
    std::vector<FluxRunner::Reference> refs;  // FLUX.1 Kontext's encoded reference images
  };
  ImageRequest validate(const ImageRequest& request) const;
  // FLUX.1 Kontext's references: refused where they cannot work, dropped with a warning
  // where the model does not take them, and their sizes checked, before any work.
  void check_references(ImageRequest& r) const;
  Plan setup(const ImageRequest& r);
  // Image planes [W, H, 3] in [0, 1] -> the sampler's latent; the VAE's posterior sample
  // draws from `rng`.
  std::vector<float> encode(const std::vector<float>& planes, int width, int height,
                            sampling::Rng& rng);
  // FLUX.1 Kontext: each reference image resized as the options say and encoded, in order.
  std::vector<FluxRunner::Reference> encode_references(const ImageRequest& r, sampling::Rng& rng);
  // Instruct-pix2pix's image input: the posterior's mean without the latent scale, no RNG
  // draw (sd.cpp; diffusers' `latent_dist.mode()`).
  std::vector<float> encode_mean(const std::vector<float>& planes, int width, int height);
  // Noise from `rng` (seeded with `seed` and perhaps drawn from already), then the sampler.
  std::vector<float> sample(const ImageRequest& r, const Plan& p, const Conditioning& cond,
                            const Conditioning& uncond, int64_t seed, sampling::Rng& rng);
  // The highres fix's second pass over the first pass's latents (pipeline/hires_fix.h).
  std::vector<std::vector<float>> hires_pass(const ImageRequest& r, const Plan& plan,
                                             HiresFix& hires, const Conditioning& cond,
                                             const Conditioning& uncond,
                                             const std::vector<std::vector<float>>& latents,
                                             PhaseTimer& timer);
  // The side lengths the diffusion net takes are multiples of this many pixels.
  int size_unit() const {
    // The UNet halves the latent at every level but the last: SD's 3 halvings after the
    // VAE's 8x make 64 pixels the unit (FLUX.1's 2x2 patches: 16).
    return static_cast<int>(vae->config().downscale() * diffusion->latent_multiple());
  }

  explicit Impl(const ModelOptions& o) : options(o), model_args(parse_model_args(o.model_args)) {
    SD_CHECK(!o.model.empty() || !o.diffusion_model.empty(),
             "no model given: pass -m MODEL (a .safetensors, .gguf, .ckpt file or a diffusers "
             "folder)");
    // Placement first: a mistyped device fails before any file is read.
    if (!o.auto_fit)
      backends =
          std::make_unique<BackendManager>(o.backend, o.params_backend, BackendOptions{o.threads});
    if (!o.model.empty()) loader.add(o.model, io::FileRole::Model);
    if (!o.diffusion_model.empty()) loader.add(o.diffusion_model, io::FileRole::DiffusionModel);
    if (!o.clip_l.empty()) loader.add(o.clip_l, io::FileRole::ClipL);
    if (!o.clip_g.empty()) loader.add(o.clip_g, io::FileRole::ClipG);
    if (!o.t5xxl.empty()) loader.add(o.t5xxl, io::FileRole::T5xxl);
    if (!o.vae.empty()) loader.add(o.vae, io::FileRole::Vae);
    // --auto-fit places the modules once their sizes are known from the files.
    const std::string max_vram = o.auto_fit ? fit_placement() : o.max_vram;
    for (const std::string& n : backends->set_memory_budgets(max_vram, o.stream_layers))
      if (o.note) o.note(n);
    Architecture arch = o.architecture ? *o.architecture : detect_architecture();
    if (o.architecture) family = &family_description(arch.version);
    version = arch.version;
    if (o.architecture && family->conditioning == ConditioningKind::T5ContextClipVector)
      require_flux_files();
    if (o.architecture && family->conditioning == ConditioningKind::T5ContextWithMask)
      require_chroma_files();
    check_vae_latent(arch);
    const bool chroma = family->conditioning == ConditioningKind::T5ContextWithMask;
    if (o.note && !chroma && (model_args.chroma.t5_mask || !model_args.chroma.dit_mask))
      o.note("warning: --model-args chroma_* options are read by Chroma models only");
    for (const std::string& key : model_args.unused)
      if (o.note) o.note("warning: --model-args " + key + " is not used by this build");
    const size_t encoders = family->conditioning == ConditioningKind::ContextAndVector ||
                                    family->conditioning == ConditioningKind::ClipAndT5JointContext
                                ? 2
                            : chroma ? 0
                                     : 1;
    SD_CHECK(family->text_encoders.size() == encoders && arch.text2.has_value() == (encoders == 2),
             "%s: expected %zu text encoders", io::family_name(family->family), encoders);

    const weights::ModelManagerOptions manager_options{o.weight_type, o.use_mmap, o.threads,
                                                       o.lora_mode};
    weights = std::make_unique<weights::ModelManager>(loader, manager_options);
    auto add_module = [&](weights::ModelManager& manager, Module m, std::string_view prefix,
                          std::string_view prefix2 = {}) {
      std::vector<std::string> prefixes = {std::string(prefix)};
      if (!prefix2.empty()) prefixes.emplace_back(prefix2);
      manager.add_module(weights::ModuleSpec{module_name(m), std::move(prefixes),
                                             &backends->compute_device(m), backends->residency(m)});
    };
    // SD3 checkpoints keep all their encoders under text_encoders.
    add_module(*weights, Module::TextEncoder, io::kTextEncoderRoot,
               arch.mmdit ? std::string_view("text_encoders.")
               : arch.t5  ? io::kT5xxlRoot
                          : std::string_view());
    add_module(*weights, Module::Diffusion, io::kUnetRoot);
    add_module(*weights, Module::Vae, io::kVaeRoot);

    // Chroma reads no CLIP: its vocabulary is not looked for.
    std::shared_ptr<const models::ClipTokenizer> tokenizer;
    if (!chroma) {
      const std::string vocab = models::find_clip_vocab(
          o.clip_vocab,
          loader.tokenizer_dir().empty() ? std::string() : loader.tokenizer_dir() + "/..");
      tokenizer =
          std::make_shared<const models::ClipTokenizer>(models::ClipTokenizer::from_file(vocab));
    }
    std::optional<TextEncoderSetup> second;
    if (arch.text2)
      second = TextEncoderSetup{*arch.text2, std::string(family->text_encoders[1].scope)};
    std::shared_ptr<const models::T5Tokenizer> t5_tokenizer;
    if (arch.t5) {
      const std::string t5_vocab = models::find_t5_tokenizer(
          o.t5_tokenizer,
          loader.tokenizer_dir().empty() ? std::string() : loader.tokenizer_dir() + "/..", o.t5xxl);
      t5_tokenizer =
          std::make_shared<const models::T5Tokenizer>(models::T5Tokenizer::from_file(t5_vocab));
    }
    if (arch.mmdit) {
      text = std::make_unique<Sd3Conditioner>(
          tokenizer, Sd3Encoder{arch.text, sd3_scope(family->text_encoders[0].scope)},
          Sd3Encoder{*arch.text2, sd3_scope(family->text_encoders[1].scope)}, t5_tokenizer, arch.t5,
          sd3_scope(Sd3Conditioner::kT5Scope), *weights, backends->backend(Module::TextEncoder));
    } else if (chroma) {
      text = std::make_unique<ChromaConditioner>(t5_tokenizer, *arch.t5, model_args.chroma,
                                                 *weights, backends->backend(Module::TextEncoder),
                                                 FluxConditioner::kT5Scope);
    } else if (arch.t5) {
      text = std::make_unique<FluxConditioner>(tokenizer, arch.text, t5_tokenizer, *arch.t5,
                                               *weights, backends->backend(Module::TextEncoder),
                                               std::string(family->text_encoders.front().scope));
    } else {
      text = std::make_unique<TextConditioner>(
          tokenizer, arch.text, *weights, backends->backend(Module::TextEncoder), o.embeddings_dir,
          std::string(family->text_encoders.front().scope), second);
    }
    if (arch.mmdit) {
      auto m = std::make_unique<MmditRunner>(*weights, *arch.mmdit,
                                             backends->backend(Module::Diffusion));
      mmdit = m.get();
      diffusion = std::move(m);
    } else if (arch.flux) {
      auto f =
          std::make_unique<FluxRunner>(*weights, *arch.flux, backends->backend(Module::Diffusion));
      flux = f.get();
      diffusion = std::move(f);
    } else {
      auto u =
          std::make_unique<UnetRunner>(*weights, arch.unet, backends->backend(Module::Diffusion));
      unet = u.get();
      diffusion = std::move(u);
    }

    nn::Weights* tae = nullptr;
    if (!o.taesd.empty()) {
      taesd_loader.add(o.taesd, io::FileRole::Model);
      taesd_weights = std::make_unique<weights::ModelManager>(taesd_loader, manager_options);
      add_module(*taesd_weights, Module::Vae, "");
      tae = &prefixed_taesd();
    }
    vae = std::make_unique<VaeRunner>(*weights, arch.vae, backends->backend(Module::Vae), tae,
                                      o.taesd_preview_only);

    // Every weight each network reads, checked against the files now: a wrong or
    // incomplete file fails here, naming every problem, not halfway through a generation.
    weights->declare(module_name(Module::TextEncoder), text->parameters());
    weights->declare(module_name(Module::Diffusion), diffusion->parameters());
    weights->declare(module_name(Module::Vae), vae->parameters());
    if (taesd_weights)
      taesd_weights->declare(module_name(Module::Vae), strip_tae(vae->taesd_parameters()));
    if (o.eager_load) {
      for (Module m : {Module::TextEncoder, Module::Diffusion, Module::Vae}) load(*weights, m);
      if (taesd_weights) load(*taesd_weights, Module::Vae);
    }
    if (!o.control_net.empty()) load_control_net(o.control_net);

    if (o.prediction) {
      prediction = *o.prediction;
      prediction_probed = true;
    } else if (family->prediction) {
      prediction = *family->prediction;
      prediction_probed = true;
    }
    default_flow_shift = family->default_flow_shift(version);
    schedule = sampling::DiscreteSchedule(prediction, {}, default_flow_shift);
  }

  // FLUX.1 comes as four files; a missing one is named with its flag before any work.
  void require_flux_files() const {
    const std::string clip_token =
        std::string(FluxConditioner::kClipScope) + "embeddings.token_embedding.weight";
    const std::string t5_shared = std::string(FluxConditioner::kT5Scope) + "shared.weight";
    const std::string vae_conv = std::string(io::kVaeRoot) + "decoder.conv_in.weight";
    SD_CHECK(loader.contains(t5_shared),
             "FLUX.1 needs its T5-XXL text encoder: pass --t5xxl FILE (t5xxl_fp16.safetensors)");
    SD_CHECK(loader.contains(clip_token),
             "FLUX.1 needs its CLIP-L text encoder: pass --clip_l FILE (clip_l.safetensors)");
    SD_CHECK(loader.contains(vae_conv),
             "FLUX.1 needs its autoencoder: pass --vae FILE (ae.safetensors)");
  }

  // Chroma is its transformer, T5-XXL and FLUX.1's autoencoder; a missing one is named with
  // its flag before any work. A --clip_l file is not read (as sd.cpp: Chroma has no CLIP).
  void require_chroma_files() const {
    SD_CHECK(loader.contains(std::string(FluxConditioner::kT5Scope) + "shared.weight"),
             "Chroma needs its T5-XXL text encoder: pass --t5xxl FILE (t5xxl_fp16.safetensors)");
    SD_CHECK(loader.contains(std::string(io::kVaeRoot) + "decoder.conv_in.weight"),
             "Chroma needs its autoencoder: pass --vae FILE (ae.safetensors)");
    if (options.note && loader.contains(std::string(FluxConditioner::kClipScope) +
                                        "embeddings.token_embedding.weight"))
      options.note("warning: Chroma has no CLIP text encoder; the --clip_l file is not used");
  }

  // Where an SD3 encoder's weights are: under the checkpoint's text_encoders.* scope, or
  // where a --clip_l / --clip_g / --t5xxl file put them.
  std::string sd3_scope(std::string_view checkpoint_scope) const {
    const std::string s(checkpoint_scope);
    // Every T5 spelling is mapped onto one root when read (io::kT5Root).
    if (s == Sd3Conditioner::kT5Scope) return s;
    if (loader.contains(s + "embeddings.token_embedding.weight")) return s;
    return s == Sd3Conditioner::kClipLScope ? TextConditioner::kScope : TextConditioner::kScope2;
  }

  // SD3 needs both CLIP encoders (named with their flag when missing) and its VAE; T5 may
  // be left out (its tokens are then zeros, as sd.cpp runs it), with a warning.
  void require_sd3_files() const {
    auto has = [&](std::string_view scope) {
      return loader.contains(sd3_scope(scope) + "embeddings.token_embedding.weight");
    };
    SD_CHECK(has(Sd3Conditioner::kClipLScope),
             "SD3 needs its CLIP-L text encoder: pass --clip_l FILE (clip_l.safetensors)");
    SD_CHECK(has(Sd3Conditioner::kClipGScope),
             "SD3 needs its CLIP-G text encoder: pass --clip_g FILE (clip_g.safetensors)");
    SD_CHECK(loader.contains(std::string(io::kVaeRoot) + "decoder.conv_in.weight"),
             "SD3 needs its autoencoder: pass --vae FILE");
  }
  bool has_sd3_t5() const {
    return loader.contains(sd3_scope(Sd3Conditioner::kT5Scope) + "shared.weight");
  }

  // A VAE of another family (FLUX.1's 16-channel autoencoder on SDXL) fails here, naming the
  // file, before anything is loaded.
  void check_vae_latent(const Architecture& arch) const {
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

  // The encoders' widths must be what the transformer reads: a T5 or CLIP file of another
  // model fails here, naming the flag, before anything is loaded.
  static void check_flux_widths(const Architecture& arch) {
    SD_CHECK(arch.t5->model_dim == arch.flux->context_dim,
             "the --t5xxl encoder gives %lld-wide tokens but the transformer reads %lld (a T5 "
             "file of another model?)",
             static_cast<long long>(arch.t5->model_dim),
             static_cast<long long>(arch.flux->context_dim));
    SD_CHECK(arch.flux->is_chroma() || arch.text.hidden == arch.flux->vec_dim,
             "the --clip_l encoder gives a %lld-value pooled vector but the transformer reads "
             "%lld (a CLIP file of another model?)",
             static_cast<long long>(arch.text.hidden), static_cast<long long>(arch.flux->vec_dim));
  }

  // SD3's context: the two CLIP widths side by side fit T5's width, the pooled vectors make
  // the transformer's vector, and T5 (when given) is as wide as the context.
  static void check_sd3_widths(const Architecture& arch) {
    const models::MmditConfig& m = *arch.mmdit;
    const int64_t pooled = arch.text.hidden + arch.text2->projection_dim;
    SD_CHECK(m.context_dim == Sd3Conditioner::kContextDim,
             "the transformer reads %lld-wide text tokens; SD3's encoders give %lld",
             static_cast<long long>(m.context_dim),
             static_cast<long long>(Sd3Conditioner::kContextDim));
    SD_CHECK(pooled == m.adm_dim,
             "the --clip_l and --clip_g encoders give a %lld + %lld pooled vector but the "
             "transformer reads %lld (a CLIP file of another model?)",
             static_cast<long long>(arch.text.hidden),
             static_cast<long long>(arch.text2->projection_dim), static_cast<long long>(m.adm_dim));
    SD_CHECK(arch.text.hidden + arch.text2->hidden <= Sd3Conditioner::kContextDim,
             "the --clip_l and --clip_g encoders are %lld + %lld wide, more than SD3's %lld-wide "
             "context",
             static_cast<long long>(arch.text.hidden), static_cast<long long>(arch.text2->hidden),
             static_cast<long long>(Sd3Conditioner::kContextDim));
    SD_CHECK(!arch.t5 || arch.t5->model_dim == Sd3Conditioner::kContextDim,
             "the --t5xxl encoder gives %lld-wide tokens but the transformer reads %lld (a T5 "
             "file of another model?)",
             static_cast<long long>(arch.t5 ? arch.t5->model_dim : 0),
             static_cast<long long>(Sd3Conditioner::kContextDim));
  }

  // --auto-fit: chooses placements from the modules' weight sizes and the devices' memory,
  // says the plan, and makes the BackendManager from it. Returns the --max-vram to use.
  std::string fit_placement() {
    // FLUX.1's T5 and SD3's encoders sit under text_encoders., in the text-encoder module.
    const std::tuple<Module, std::string_view, std::string_view> roots[] = {
        {Module::TextEncoder, io::kTextEncoderRoot, "text_encoders."},
        {Module::Diffusion, io::kUnetRoot, {}},
        {Module::Vae, io::kVaeRoot, {}}};
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

  // The networks of the detected model: the family's presets, with every dimension the
  // file states read from it where the family says so. A model this build cannot run is an
  // error naming the file.
  Architecture detect_architecture() {
    const std::string& file = options.model.empty() ? options.diffusion_model : options.model;
    try {
      Architecture arch;
      arch.version = io::detect_version(loader.canonical_infos());
      family = &family_description(arch.version);
      if (family->conditioning == ConditioningKind::T5ContextClipVector) require_flux_files();
      if (family->conditioning == ConditioningKind::T5ContextWithMask) require_chroma_files();
      if (family->flux) arch.flux = family->flux(arch.version);
      if (family->mmdit) {
        require_sd3_files();
        arch.mmdit = family->mmdit(arch.version);
        if (has_sd3_t5())
          arch.t5 = models::T5Config::xxl();
        else if (options.note)
          options.note(
              "warning: no T5-XXL text encoder (--t5xxl); SD3 runs on zeros in its "
              "place and follows the prompt less closely");
      }
      if (family->diffusion) arch.unet = family->diffusion(arch.version);
      if (family->conditioning == ConditioningKind::T5ContextClipVector ||
          family->conditioning == ConditioningKind::T5ContextWithMask)
        arch.t5 = models::T5Config::xxl();
      if (!family->text_encoders.empty()) arch.text = family->text_encoders.front().config();
      if (family->text_encoders.size() > 1) arch.text2 = family->text_encoders[1].config();
      arch.vae = family->vae_config();
      if (family->shapes_from_file) {
        const ShapeOf shape_of = [this](const std::string& name) {
          std::optional<std::array<int64_t, 4>> ne;
          if (loader.contains(name)) ne = loader.find(name).ne;
          return ne;
        };
        if (arch.mmdit)
          arch.mmdit = mmdit_config_from_shapes(*arch.mmdit, io::kUnetRoot, shape_of);
        else if (arch.flux)
          arch.flux = flux_config_from_shapes(*arch.flux, io::kUnetRoot, shape_of);
        else
          arch.unet = unet_config_from_shapes(arch.unet, io::kUnetRoot, shape_of);
        if (arch.t5)
          arch.t5 = t5_config_from_shapes(
              *arch.t5,
              arch.mmdit ? sd3_scope(Sd3Conditioner::kT5Scope) : FluxConditioner::kT5Scope,
              shape_of);
        auto text_scope = [&](size_t i) {
          const std::string_view s = family->text_encoders[i].scope;
          return arch.mmdit ? sd3_scope(s) : std::string(s);
        };
        if (!family->text_encoders.empty())
          arch.text = clip_config_from_shapes(arch.text, text_scope(0), shape_of);
        if (arch.text2) arch.text2 = clip_config_from_shapes(*arch.text2, text_scope(1), shape_of);
        arch.vae = vae_config_from_shapes(arch.vae, io::kVaeRoot, shape_of);
      }
      if (arch.flux && arch.t5) check_flux_widths(arch);
      if (arch.mmdit) check_sd3_widths(arch);
      return arch;
    } catch (const Error& e) {
      fail("%s: %s", file.c_str(), e.what());
    }
  }

  // A ControlNet guides a UNet of its own family; checked from the files' metadata.
  void load_control_net(const std::string& path) {
    SD_CHECK(unet, "--control-net %s: ControlNets guide SD 1.x/2.x/SDXL UNets, not %s",
             path.c_str(), io::family_name(family->family));
    const weights::ModelManagerOptions manager_options{options.weight_type, options.use_mmap,
                                                       options.threads, options.lora_mode};
    control_net = std::make_unique<LoadedControlNet>(path, unet->config(), *backends,
                                                     manager_options, options.eager_load);
  }

  // TAESD files name their tensors decoder.layers.* / encoder.layers.*; the runner reads
  // them under "tae.", as sd.cpp prefixes a --taesd file.
  class PrefixedWeights final : public nn::Weights {
   public:
    PrefixedWeights(nn::Weights& inner, std::string prefix)
        : inner_(inner), prefix_(std::move(prefix)) {}
    Tensor* get(Context& ctx, const std::string& name, const Shape& ne) override {
      return inner_.get(ctx, strip(name), ne);
    }
    bool contains(const std::string& name) const override { return inner_.contains(strip(name)); }
    void after_compute() override { inner_.after_compute(); }

   private:
    std::string strip(const std::string& name) const {
      return name.compare(0, prefix_.size(), prefix_) == 0 ? name.substr(prefix_.size()) : name;
    }
    nn::Weights& inner_;
    std::string prefix_;
  };
  std::unique_ptr<PrefixedWeights> taesd_view;
  nn::Weights& prefixed_taesd() {
    taesd_view = std::make_unique<PrefixedWeights>(*taesd_weights, VaeRunner::kTaesdScope);
    return *taesd_view;
  }

  static std::vector<nn::ParamDecl> strip_tae(std::vector<nn::ParamDecl> params) {
    const std::string prefix = VaeRunner::kTaesdScope;
    for (nn::ParamDecl& p : params)
      if (p.name.compare(0, prefix.size(), prefix) == 0) p.name = p.name.substr(prefix.size());
    return params;
  }

  // Reads a module's weights now (--eager-load), reporting progress.
  void load(weights::ModelManager& manager, Module m) {
    const std::string name = module_name(m);
    manager.load_module(
        name,
        [&](size_t done, size_t total) {
          if (options.load_progress) options.load_progress(name, done, total);
        },
        /*prefault=*/true);
  }

  // A phase of module `m` is over: its compute buffers go back, and its weights too when
  // they are kept on disk.
  void phase_done(Module m) {
    weights->phase_done(module_name(m));
    if (m == Module::Vae && taesd_weights) taesd_weights->phase_done(module_name(m));
    backends->release_caches();
  }

  // SD 2.x files do not say whether they predict eps or v: probe the UNet once, as sd.cpp
  // does (x = 0.5 on an 8x8 latent, two context tokens of 0.5, t = 999; v if mean(out - x)
  // < -1).
  void probe_prediction() {
    if (prediction_probed) return;
    prediction_probed = true;
    const int64_t w = 8, h = 8, c = 4;
    std::vector<float> x(static_cast<size_t>(w * h * c), 0.5f);
    Conditioning ctx;
    ctx.dim = unet->config().context_dim;
    ctx.tokens = 2;
    ctx.context.assign(static_cast<size_t>(ctx.dim * ctx.tokens), 0.5f);
    std::vector<float> concat;
    if (unet->config().in_channels > c)
      concat.assign(static_cast<size_t>(w * h * (unet->config().in_channels - c)), 0.0f);
    std::vector<float> out = unet->predict(x, w, h, 999.0f, {&ctx}, concat)[0];
    double sum = 0;
    for (size_t i = 0; i < out.size(); ++i) sum += out[i] - x[i];
    if (sum / static_cast<double>(out.size()) < -1.0) prediction = sampling::Prediction::V;
    schedule = sampling::DiscreteSchedule(prediction);
  }
};

StableDiffusion::StableDiffusion(const ModelOptions& options)
    : impl_(std::make_unique<Impl>(options)) {}

StableDiffusion::~StableDiffusion() = default;

std::string StableDiffusion::placement() const {
  std::string s;
  for (Module m : {Module::TextEncoder, Module::Diffusion, Module::Vae})
    s += (s.empty() ? "" : "; ") + impl_->backends->describe(m);
  if (impl_->control_net) s += "; " + impl_->backends->describe(Module::ControlNet);
  return s;
}

void StableDiffusion::load_control_net(const std::string& path) {
  impl_->load_control_net(path);
}

void StableDiffusion::unload_control_net() {
  impl_->control_net.reset();
}

bool StableDiffusion::has_control_net() const {
  return impl_->control_net != nullptr;
}

size_t StableDiffusion::resident_weight_bytes() const {
  size_t n = impl_->weights->resident_bytes() + impl_->weights->mapped_bytes();
  if (impl_->control_net) n += impl_->control_net->resident_bytes();
  if (impl_->taesd_weights)
    n += impl_->taesd_weights->resident_bytes() + impl_->taesd_weights->mapped_bytes();
  return n;
}

io::ModelVersion StableDiffusion::version() const {
  return impl_->version;
}
sampling::Prediction StableDiffusion::prediction() const {
  return impl_->prediction;
}
sampling::SampleMethod StableDiffusion::default_sample_method() const {
  return impl_->family->sample_method;
}
sampling::Scheduler StableDiffusion::default_scheduler(sampling::SampleMethod method) const {
  return impl_->family->default_scheduler(method, impl_->prediction);
}

// 1. Validation: every check before any work; sizes aligned to what the networks take.
ImageRequest StableDiffusion::Impl::validate(const ImageRequest& request) const {
  ImageRequest r = request;
  auto warn = [&](const std::string& text) {
    if (r.warn) r.warn(text);
  };
  SD_CHECK(r.width > 0 && r.height > 0 && r.width % 8 == 0 && r.height % 8 == 0,
           "image size %dx%d: width and height must be positive multiples of 8 (-W, -H)", r.width,
           r.height);
  SD_CHECK(r.steps > 0 || !r.custom_sigmas.empty(), "--steps must be at least 1 (got %d)", r.steps);
  SD_CHECK(r.batch_count >= 1, "batch count must be at least 1 (got %d)", r.batch_count);
  SD_CHECK(r.strength >= 0.0f && r.strength <= 1.0f, "--strength %g is outside [0, 1]", r.strength);
  SD_CHECK(std::isfinite(r.cfg_scale) && r.cfg_scale >= 0.0f,
           "--cfg-scale must be a finite number >= 0 (got %g)", r.cfg_scale);
  SD_CHECK(r.custom_sigmas.empty() || r.custom_sigmas.size() >= 2,
           "--sigmas needs at least two values (a start and the final 0)");
  SD_CHECK(r.timestep_shift >= 0 && r.timestep_shift <= 1000,
           "--timestep-shift must be in [0, 1000] (got %d)", r.timestep_shift);
  if (r.timestep_shift > 0 && !family->timestep_shift) {
    warn("--timestep-shift applies to SDXL models only; ignored");
    r.timestep_shift = 0;
  }
  const int unit = size_unit();
  const int aligned_w = (r.width + unit - 1) / unit * unit;
  const int aligned_h = (r.height + unit - 1) / unit * unit;
  if (aligned_w != r.width || aligned_h != r.height) {
    warn(format("image size %dx%d aligned up to %dx%d (a multiple of %d)", r.width, r.height,
                aligned_w, aligned_h, unit));
    r.width = aligned_w;
    r.height = aligned_h;
  }
  if (r.mask && !r.init_image) warn("--mask without an init image (-i) is ignored");
  if (io::is_pix2pix(version) && !r.edit_image && !r.ref_images.empty()) {
    // Instruct-pix2pix edits the first reference image, as sd.cpp.
    if (r.ref_images.size() > 1)
      warn(
          format("instruct-pix2pix edits one image: only the first of %zu reference images "
                 "(-r) is used",
                 r.ref_images.size()));
    r.edit_image = r.ref_images.front();
    r.ref_images.clear();
  }
  if (!r.ref_images.empty()) check_references(r);
  if (io::is_pix2pix(version)) {
    SD_CHECK(r.edit_image, "%s edits an image: pass it with -r/--ref-image",
             io::version_name(version));
    SD_CHECK(!r.init_image,
             "%s takes the image to edit with -r/--ref-image, not -i (it starts from noise)",
             io::version_name(version));
    const io::Image& e = *r.edit_image;
    SD_CHECK(e.width > 0 && e.height > 0 && e.channels > 0 &&
                 e.pixels.size() == static_cast<size_t>(e.width) * e.height * e.channels,
             "the reference image (-r) is empty or its pixels do not match its size");
  } else if (r.edit_image) {
    warn("a reference image (-r) is used by instruct-pix2pix models only; ignored");
    r.edit_image = nullptr;
  }
  if (r.img_cfg_scale) {
    SD_CHECK(std::isfinite(*r.img_cfg_scale) && *r.img_cfg_scale >= 0.0f,
             "--img-cfg-scale must be a finite number >= 0 (got %g)", *r.img_cfg_scale);
    // sd.cpp: image guidance needs an image input: the concatenated one of inpainting and
    // pix2pix models, or FLUX.1 Kontext's reference images (left by check_references only
    // on a FLUX transformer that takes them).
    if (!io::is_inpaint(version) && !io::is_pix2pix(version) && r.ref_images.empty()) {
      if (*r.img_cfg_scale != 1.0f)
        warn(
            format("--img-cfg-scale needs an image input (an instruct-pix2pix or inpainting "
                   "model, or reference images -r with FLUX.1 Kontext); %s has none here: "
                   "ignored",
                   io::version_name(version)));
      r.img_cfg_scale.reset();
    }
  }
  if (r.control_image && !control_net)
    warn("a control image without a ControlNet (--control-net) is ignored");
  if (control_net && !r.control_image)
    warn("--control-net without a control image (--control-image): the ControlNet is not used");
  if (control_net && r.control_image) {
    SD_CHECK(std::isfinite(r.control_strength), "--control-strength must be a finite number");
    SD_CHECK(r.control_image->width > 0 && r.control_image->height > 0 &&
                 r.control_image->channels > 0 &&
                 r.control_image->pixels.size() == static_cast<size_t>(r.control_image->width) *
                                                       r.control_image->height *
                                                       r.control_image->channels,
             "the control image is empty or its pixels do not match its size");
  }
  sampling::check_cache_options(r.cache);
  {
    const bool unet = io::is_unet_family(version);
    SD_CHECK(sampling::cache_mode_fits(r.cache.mode, unet),
             "--cache-mode %s does not work on %s (a %s); use one of: %s",
             sampling::cache_mode_name(r.cache.mode), io::version_name(version),
             unet ? "UNet" : "transformer", sampling::cache_modes_for(unet).c_str());
  }
  SD_CHECK(r.preview.mode != ImageRequest::Preview::Mode::Tae || vae->has_taesd(),
           "--preview tae needs a TAESD model: pass --taesd FILE");
  // The UNet's extra input of an inpainting model is made at the first pass's size.
  SD_CHECK(!r.hires.enabled || (!io::is_inpaint(version) && !io::is_pix2pix(version)),
           "--hires does not work with inpainting and instruct-pix2pix models; generate, then "
           "run img2img on the upscaled image");
  return r;
}

void StableDiffusion::Impl::check_references(ImageRequest& r) const {
  if (!flux) {
    if (r.warn)
      r.warn(
          format("reference images (-r) are for FLUX.1 Kontext models; %s does not take them: "
                 "ignored",
                 io::version_name(version)));
    r.ref_images.clear();
    return;
  }
  SD_CHECK(version != io::ModelVersion::FluxFill,
           "FLUX.1 Fill does not take reference images (-r); use a FLUX.1 Kontext model, or -i "
           "and --mask to inpaint with Fill");
  if (!r.ref_options.pass_to_dit) {
    r.ref_images.clear();
    return;
  }
  const int unit = size_unit();
  for (size_t i = 0; i < r.ref_images.size(); ++i) {
    const io::Image* image = r.ref_images[i];
    SD_CHECK(image && image->width > 0 && image->height > 0 && image->channels > 0 &&
                 image->pixels.size() ==
                     static_cast<size_t>(image->width) * image->height * image->channels,
             "reference image %zu is empty or its pixels do not match its size", i + 1);
    if (r.ref_options.resize_before_vae) {
      reference_vae_size(image->width, image->height, r.width, r.height,
                         r.ref_options.vae_input_max_pixels, unit);
    } else {
      SD_CHECK(image->width % unit == 0 && image->height % unit == 0,
               "reference image %zu is %dx%d; unresized (resize_before_vae=0, "
               "--disable-auto-resize-ref-image) its sides must be multiples of %d",
               i + 1, image->width, image->height, unit);
    }
  }
}

// 2. Setup: LoRAs, the prediction, the sampler and its sigmas, and the image side of
// image-to-image and inpainting (encoded once for the whole batch).
StableDiffusion::Impl::Plan StableDiffusion::Impl::setup(const ImageRequest& r) {
  auto warn = [&](const std::string& text) {
    if (r.warn) r.warn(text);
  };
  {
    std::vector<weights::ModelManager::LoraRequest> loras;
    for (const ImageRequest::Lora& l : r.loras) loras.push_back({l.path, l.multiplier});
    bool changed = false;
    for (const std::string& w : weights->set_loras(loras, &changed, io::version_name(version)))
      warn(w);
    if (changed) backends->release_caches();  // packed copies of the old weights
  }
  probe_prediction();

  Plan p;
  p.method = r.method.value_or(family->sample_method);
  p.scheduler = r.scheduler.value_or(family->default_scheduler(p.method, prediction));
  if (sampling::is_flow(prediction))
    schedule =
        sampling::DiscreteSchedule(prediction, {}, r.flow_shift.value_or(default_flow_shift));
  p.scheduler_options.ays_levels = family->ays_levels;
  // sd.cpp's sequence length for the resolution-dependent shifts: latent pixels.
  p.scheduler_options.image_seq_len = (r.width / static_cast<int>(vae->config().downscale())) *
                                      (r.height / static_cast<int>(vae->config().downscale()));
  p.sample_steps = r.steps;
  if (!r.custom_sigmas.empty()) {
    p.sigmas = r.custom_sigmas;
    p.sample_steps = std::min(p.sample_steps, static_cast<int>(p.sigmas.size()) - 1);
  } else {
    p.sigmas = sampling::make_sigmas(p.scheduler, r.steps, schedule, p.scheduler_options);
  }
  if (r.init_image && r.strength < 1.0f)
    p.sigmas = sampling::img2img_sigmas(p.sigmas, p.sample_steps, r.strength);

  const int64_t f = vae->config().downscale();
  p.w = r.width / f;
  p.h = r.height / f;
  p.c = vae->config().z_channels;
  const size_t latent_size = static_cast<size_t>(p.w * p.h * p.c);
  const bool inpaint_model = io::is_inpaint(version);

  // The generation RNG, seeded with the request's seed for the image-side draws; each
  // batch entry reseeds its own.
  std::unique_ptr<sampling::Rng> rng = sampling::make_rng(r.rng, static_cast<uint64_t>(r.seed));

  // Tiling is per request and applies to encoding and decoding alike.
  vae->set_tiling(r.vae_tiling);

  p.init_latent.assign(latent_size, 0.0f);
  auto encode = [&](const std::vector<float>& planes) {
    return this->encode(planes, r.width, r.height, *rng);
  };
  if (r.init_image) {
    const io::Image& img = *r.init_image;
    std::vector<float> planes = image_to_planes(io::to_channels(img, 3));
    if (img.width != r.width || img.height != r.height)
      planes = resize_nearest(planes, img.width, img.height, 3, r.width, r.height);
    std::vector<float> mask(static_cast<size_t>(r.width) * r.height, 1.0f);
    if (r.mask) {
      const io::Image& mk = *r.mask;
      mask = image_to_planes(io::to_channels(mk, 1));
      if (mk.width != r.width || mk.height != r.height)
        mask = resize_nearest(mask, mk.width, mk.height, 1, r.width, r.height);
      mask = binarize(std::move(mask));
    }
    p.init_latent = encode(planes);
    const std::vector<float> latent_mask = max_downsample(mask, r.width, r.height, f);
    if (inpaint_model) {
      // The UNet also sees the mask and the latent of the image with the masked part made
      // grey, so it knows what to keep.
      const size_t pixels = mask.size();
      std::vector<float> masked = planes;
      for (int k = 0; k < 3; ++k)
        for (size_t i = 0; i < pixels; ++i)
          masked[k * pixels + i] = (1.0f - mask[i]) * (planes[k * pixels + i] - 0.5f) + 0.5f;
      const std::vector<float> masked_latent = encode(masked);
      // The image-unconditional pass (--img-cfg-scale) sees the mask over a zero latent.
      const std::vector<float> zero_latent(masked_latent.size(), 0.0f);
      if (version == io::ModelVersion::FluxFill) {
        p.concat = flux_fill_concat(masked_latent, mask, r.width, r.height, f);
        p.img_uncond_concat = flux_fill_concat(zero_latent, mask, r.width, r.height, f);
      } else {
        p.concat = latent_mask;
        p.concat.insert(p.concat.end(), masked_latent.begin(), masked_latent.end());
        p.img_uncond_concat = latent_mask;
        p.img_uncond_concat.insert(p.img_uncond_concat.end(), zero_latent.begin(),
                                   zero_latent.end());
      }
      p.mask.mask = dilate3x3(latent_mask, p.w, p.h);
    } else {
      p.mask.mask = latent_mask;
    }
    p.mask.init_latent = p.init_latent;
  } else if (inpaint_model) {
    warn("an inpainting model works best with an init image (-i) and a mask (--mask)");
    if (version == io::ModelVersion::FluxFill) {
      // Nothing to keep: a zero latent and a mask over everything.
      p.concat = flux_fill_concat(std::vector<float>(latent_size, 0.0f),
                                  std::vector<float>(static_cast<size_t>(r.width) * r.height, 1.0f),
                                  r.width, r.height, f);
    } else {
      p.concat.assign(static_cast<size_t>(p.w * p.h), 1.0f);
      p.concat.resize(static_cast<size_t>(p.w * p.h * 5), 0.0f);
    }
    p.img_uncond_concat = p.concat;  // its image part is zero already
  } else if (io::is_pix2pix(version)) {
    // The image to edit, encoded near its own aspect (edit_image.h), resized (nearest) to
    // the output latent; the image-unconditional pass gets zeros.
    const io::Image& img = *r.edit_image;
    const PixelSize size = edit_image_encode_size(img.width, img.height, r.width, r.height);
    std::vector<float> planes = image_to_planes(io::to_channels(img, 3));
    if (img.width != size.width || img.height != size.height)
      planes = resize_nearest(planes, img.width, img.height, 3, size.width, size.height);
    const std::vector<float> latent = encode_mean(planes, size.width, size.height);
    p.concat = resize_nearest(latent, size.width / f, size.height / f, p.c, p.w, p.h);
    p.img_uncond_concat.assign(p.concat.size(), 0.0f);
    vae->release();
    phase_done(Module::Vae);
  }
  // sd.cpp compatibility: references are encoded after the init image, from the same RNG.
  if (!r.ref_images.empty()) p.refs = encode_references(r, *rng);
  if (r.init_image || !p.refs.empty()) {
    // Encoding is a phase of its own: the VAE is not needed again until decoding.
    vae->release();
    phase_done(Module::Vae);
  }
  p.img_cfg_scale = r.img_cfg_scale.value_or(1.0f);
  return p;
}

std::vector<FluxRunner::Reference> StableDiffusion::Impl::encode_references(const ImageRequest& r,
                                                                            sampling::Rng& rng) {
  const int f = static_cast<int>(vae->config().downscale());
  std::vector<FluxRunner::Reference> refs;
  for (const io::Image* image : r.ref_images) {
    std::vector<float> planes = image_to_planes(io::to_channels(*image, 3));
    int w = image->width, h = image->height;
    if (r.ref_options.resize_before_vae) {
      std::tie(w, h) = reference_vae_size(image->width, image->height, r.width, r.height,
                                          r.ref_options.vae_input_max_pixels, size_unit());
      if (w != image->width || h != image->height)
        planes = resize_nearest(planes, image->width, image->height, 3, w, h);
    }
    if (r.info)
      r.info(format("reference image %zu: %dx%d, encoded at %dx%d", refs.size() + 1, image->width,
                    image->height, w, h));
    refs.push_back({encode(planes, w, h, rng), w / f, h / f});
  }
  return refs;
}

std::vector<float> StableDiffusion::Impl::encode(const std::vector<float>& planes, int width,
                                                 int height, sampling::Rng& rng) {
  std::vector<float> encoded = vae->encode(planes, width, height);
  if (!vae->encodes_moments()) return encoded;
  const int64_t f = vae->config().downscale();
  const int64_t w = width / f, h = height / f, c = vae->config().z_channels;
  const std::vector<float> noise = rng.randn(static_cast<size_t>(w * h * c));  // the posterior
  return models::vae_moments_to_latent(encoded, noise, w, h, c, 1, vae->config());
}

std::vector<float> StableDiffusion::Impl::encode_mean(const std::vector<float>& planes, int width,
                                                      int height) {
  std::vector<float> encoded = vae->encode(planes, width, height);
  if (!vae->encodes_moments()) return encoded;
  const int64_t f = vae->config().downscale();
  // [w, h, 2c]: the mean's c planes, then the log-variance's.
  encoded.resize(static_cast<size_t>(width / f * (height / f) * vae->config().z_channels));
  return encoded;
}

// 3. Sampling one batch entry: noise from the entry's seed, the guided denoiser
// (sampling/guided_denoiser.h) over the UNet, and the sampler.
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

  auto send_preview = [&](int step, const std::vector<float>& latent, bool noisy) {
    const ImageRequest::Preview& pv = r.preview;
    if (pv.mode == ImageRequest::Preview::Mode::None || !pv.callback || step <= 0) return;
    if ((noisy && !pv.noisy) || (!noisy && !pv.denoised)) return;
    if (step % std::max(1, pv.interval) != 0) return;
    if (pv.mode == ImageRequest::Preview::Mode::Proj) {
      pv.callback(step, project_latent_to_rgb(latent, p.w, p.h), noisy);
      return;
    }
    const std::vector<float> planes =
        vae->decode_preview(latent, p.w, p.h, pv.mode == ImageRequest::Preview::Mode::Tae);
    const auto f = static_cast<int>(vae->config().downscale());
    pv.callback(
        step,
        planes_to_image(planes.data(), static_cast<int>(p.w) * f, static_cast<int>(p.h) * f, 3),
        noisy);
  };

  sampling::GuidanceOptions guidance;
  guidance.cfg_scale = r.cfg_scale;
  guidance.img_cfg_scale = p.img_cfg_scale;
  guidance.uncond_x0 = sampling::needs_uncond(p.method);
  guidance.timestep_shift = r.timestep_shift;
  guidance.mask = p.mask.mask.empty() ? nullptr : &p.mask;
  guidance.guidance_schedule = r.guidance_schedule;
  std::optional<sampling::AdaptiveProjectedGuidance> apg;
  if (r.apg.enabled()) guidance.apg = &apg.emplace(r.apg);
  std::unique_ptr<sampling::SpectrumForecast> spectrum;
  const size_t steps = p.sigmas.size() - 1;
  std::unique_ptr<sampling::OutputCache> output_cache =
      sampling::make_output_cache(r.cache, p.sigmas, schedule);
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
    if (mmdit) {
      skip_layer.schedule_size = static_cast<int>(p.sigmas.size());
      skip_layer.predict = [&](const std::vector<float>& x_in, float timestep) {
        return mmdit->predict_skipping(x_in, p.w, p.h, timestep, cond, skip_layer.layers);
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
        auto out = diffusion->predict(x_in, p.w, p.h, timestep, conds, p.concat);
        if (passes.img_uncond) {
          // The negative prompt again without the image input (sd.cpp's img_uncond): the
          // concatenated image zeroed, or FLUX.1 Kontext's reference images left out.
          const bool without_refs = flux && !p.refs.empty();
          if (without_refs) flux->use_references(false);
          out.push_back(
              diffusion->predict(x_in, p.w, p.h, timestep, {&uncond}, p.img_uncond_concat)[0]);
          if (without_refs) flux->use_references(true);
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
      send_preview(step, noisy, true);
    }
  };
  auto last = std::chrono::steady_clock::now();
  const int total_steps = static_cast<int>(p.sigmas.size()) - 1;
  denoiser.after = [&](const sampling::Denoised& d, int step) {
    send_preview(step, d.x0, false);
    if (step > 0 && r.progress) {
      const auto now = std::chrono::steady_clock::now();
      r.progress(step, total_steps, std::chrono::duration<double>(now - last).count());
      last = now;
    }
  };

  sampling::SamplerOptions sampler_options;
  sampler_options.eta = r.eta;
  sampler_options.prediction = prediction;
  x = sampling::sample(p.method, std::cref(denoiser), std::move(x), p.sigmas, *sampler_rng,
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
  return schedule.inverse_noise_scaling(p.sigmas.back(), std::move(x));
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
  report_streaming(r.info, "diffusion", diffusion->streaming_report());
  diffusion->release();
  phase_done(Module::Diffusion);
  return out;
}

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
  const Impl::Plan plan = m.setup(r);

  // Conditioning, once for the whole batch; the negative prompt only matters with CFG.
  PhaseTimer timer(r.info, *m.weights);
  Conditioning cond = m.text->encode(r.prompt, r.clip_skip);
  Conditioning uncond;
  const sampling::GuidancePasses passes =
      sampling::guidance_passes(r.cfg_scale, plan.img_cfg_scale);
  if (passes.uncond || passes.img_uncond) {
    uncond = m.text->encode(r.negative_prompt, r.clip_skip);
    if (m.family->zero_context_for_empty_negative && r.negative_prompt.empty())
      std::fill(uncond.context.begin(), uncond.context.end(), 0.0f);
  }
  if (m.family->conditioning == ConditioningKind::ContextAndVector) {
    cond.vector = sdxl_vector(cond.pooled, r.width, r.height);
    if (!uncond.pooled.empty()) uncond.vector = sdxl_vector(uncond.pooled, r.width, r.height);
  } else if (m.family->conditioning == ConditioningKind::ContextAndAestheticVector) {
    cond.vector = sdxl_refiner_vector(cond.pooled, r.width, r.height, kRefinerAestheticScore);
    if (!uncond.pooled.empty())
      uncond.vector =
          sdxl_refiner_vector(uncond.pooled, r.width, r.height, kRefinerNegativeAestheticScore);
  }
  report_streaming(r.info, "text encoders", m.text->streaming_report());
  m.text->release();
  m.phase_done(Module::TextEncoder);
  m.diffusion->set_distilled_guidance(r.guidance);
  timer.done("text encoding");

  // FLUX.1 Kontext: the references join every prediction of this request, the highres
  // fix's second pass included.
  struct ReferencesOff {
    FluxRunner* flux;
    ~ReferencesOff() {
      if (flux) flux->set_references({}, models::RefIndexMode::Fixed);
    }
  } references_off{plan.refs.empty() ? nullptr : m.flux};
  if (references_off.flux) m.flux->set_references(plan.refs, r.ref_options.index_mode);

  // ControlNet guidance for a pass over `lw` x `lh` latents: the control image resized to
  // 8x that size (its hint block's factor; the pass's image size with SD's VAE). The highres
  // fix's second pass is guided by the same image at its own size, as the first.
  const bool controlled = m.control_net && r.control_image && m.unet;
  auto control_on = [&](int64_t lw, int64_t lh) {
    const io::Image& img = *r.control_image;
    const int64_t hint_c = m.control_net->runner().config().hint_channels;
    const int64_t hint_w = 8 * lw, hint_h = 8 * lh;
    std::vector<float> hint = image_to_planes(io::to_channels(img, static_cast<int>(hint_c)));
    if (img.width != hint_w || img.height != hint_h)
      hint = resize_nearest(hint, img.width, img.height, hint_c, hint_w, hint_h);
    m.unet->set_control(&m.control_net->runner(), std::move(hint), r.control_strength);
  };
  if (controlled) control_on(plan.w, plan.h);
  struct ControlOff {
    Impl& m;
    bool on;
    void operator()() {
      if (!on) return;
      on = false;
      m.unet->set_control(nullptr);
      m.control_net->phase_done();
    }
    ~ControlOff() { (*this)(); }
  } control_off{m, controlled};

  std::vector<std::vector<float>> latents;
  // A latent upscale goes straight back to the UNet: keep it.
  const bool unet_again = hires && upscales_latent(r.hires.upscaler);
  for (int b = 0; b < r.batch_count; ++b) {
    const bool stop = b > 0 && r.stop_new_images && r.stop_new_images();
    if (!stop) {
      std::unique_ptr<sampling::Rng> rng =
          sampling::make_rng(r.rng, static_cast<uint64_t>(r.seed + b));
      latents.push_back(m.sample(r, plan, cond, uncond, r.seed + b, *rng));
    }
    if ((stop || b + 1 == r.batch_count) && !unet_again) {
      // Each phase gives its memory back before the next starts: peak memory is the
      // largest phase's, not their sum.
      report_streaming(r.info, "diffusion", m.diffusion->streaming_report());
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
  for (const std::vector<float>& latent : latents) {
    std::vector<float> planes = m.vae->decode(latent, width / f, height / f);
    images.push_back(planes_to_image(planes.data(), width, height, 3));
    timer.done("decoding");
  }
  report_streaming(r.info, "vae", m.vae->streaming_report());
  m.vae->release();
  m.phase_done(Module::Vae);
  return images;
}

}  // namespace sd::pipeline
