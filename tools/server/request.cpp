#include "server/request.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>
#include <limits>
#include <mutex>
#include <random>

#include "io/folder_lookup.h"
#include "tensor/base64.h"
#include "tensor/error.h"
#include "tensor/text.h"

namespace sd::server {

namespace {

const std::vector<std::string> kLoraExtensions = {".safetensors", ".gguf", ".pt", ".ckpt"};
constexpr double kBig = 1e9;

std::string sampler_list() {
  std::string out;
  for (int i = 0; i < SAMPLE_METHOD_COUNT; ++i)
    out += (i ? ", " : "") + std::string(sd_sample_method_name(sample_method_t(i)));
  return out;
}

std::string scheduler_list() {
  std::string out;
  for (int i = 0; i < SCHEDULER_COUNT; ++i)
    out += (i ? ", " : "") + std::string(sd_scheduler_name(scheduler_t(i)));
  return out;
}

int round_up_to_8(int v) {
  return (v + 7) / 8 * 8;
}

void apply_output_format(RequestDraft& d, const std::string& format, const std::string& field) {
  const std::string f = ascii_lower(format);
  if (f == "png" || f == "jpeg" || f == "webp") {
    d.output_format = f;
  } else if (f == "jpg") {
    d.output_format = "jpeg";
  } else {
    throw BadRequest("field '" + field + "': unknown output format '" + format +
                     "'; valid: png, jpeg, webp");
  }
}

void apply_loras(const nlohmann::json& list, const std::string& field, RequestDraft& d) {
  if (!list.is_array()) throw BadRequest("field '" + field + "' must be an array of objects");
  for (size_t i = 0; i < list.size(); ++i) {
    const std::string at = field + "[" + std::to_string(i) + "]";
    JsonFields entry(list[i], at + ".");
    entry.reject_unknown({"path", "name", "multiplier", "is_high_noise"});
    std::optional<std::string> name = entry.text("path");
    if (!name) name = entry.text("name");
    if (!name || name->empty())
      throw BadRequest("field '" + at + ".path' is required: a LoRA name from /sdapi/v1/loras");
    const bool high_noise = entry.boolean("is_high_noise").value_or(false);
    if (high_noise && !d.high_noise_expert)
      throw BadRequest("field '" + at +
                       ".is_high_noise': this model has no high-noise expert (Wan 2.2 A14B's)");
    d.loras.push_back({*name,
                       static_cast<float>(entry.number("multiplier", -kBig, kBig).value_or(1.0)),
                       high_noise});
  }
}

}  // namespace

RequestDraft new_draft(const RequestContext& rc) {
  RequestDraft d;
  d.max_input_side = max_input_side(rc.max_image_side);
  d.g = rc.defaults;
  d.high_noise_expert = !rc.context.high_noise_diffusion_model_path.empty();
  return d;
}

io::Image decode_image_bytes(const std::string& bytes, const std::string& field, int max_side) {
  try {
    return io::decode_image(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), field,
                            max_side);
  } catch (const std::exception& e) {
    throw BadRequest("field '" + field +
                     "' is not a readable image (PNG, JPEG, WebP or BMP): " + e.what());
  }
}

io::Image decode_image_field(const std::string& text, const std::string& field, int max_side) {
  const std::optional<std::string> bytes = base64_decode(text);
  if (!bytes || bytes->empty())
    throw BadRequest("field '" + field +
                     "' is not base64; send the image file's bytes in base64 or as a data URL "
                     "(data:image/png;base64,...)");
  return decode_image_bytes(*bytes, field, max_side);
}

sample_method_t parse_sampler(const std::string& name, const std::string& field) {
  const sample_method_t exact = str_to_sample_method(name.c_str());
  if (exact != SAMPLE_METHOD_COUNT) return exact;
  // AUTOMATIC1111's display names and k-diffusion's function names, as its clients send.
  static const std::vector<std::pair<const char*, sample_method_t>> aliases = {
      {"euler a", EULER_A_SAMPLE_METHOD},
      {"k_euler_a", EULER_A_SAMPLE_METHOD},
      {"k_euler", EULER_SAMPLE_METHOD},
      {"k_heun", HEUN_SAMPLE_METHOD},
      {"k_dpm_2", DPM2_SAMPLE_METHOD},
      {"dpm++ 2s a", DPMPP2S_A_SAMPLE_METHOD},
      {"k_dpmpp_2s_a", DPMPP2S_A_SAMPLE_METHOD},
      {"dpm++ 2m", DPMPP2M_SAMPLE_METHOD},
      {"k_dpmpp_2m", DPMPP2M_SAMPLE_METHOD},
      {"dpm++ 2m sde", DPMPP2M_SDE_SAMPLE_METHOD},
      {"k_dpmpp_2m_sde", DPMPP2M_SDE_SAMPLE_METHOD},
      {"ddim", DDIM_TRAILING_SAMPLE_METHOD},
      {"k_lms", LMS_SAMPLE_METHOD},
  };
  const std::string l = ascii_lower(name);
  for (const auto& [alias, method] : aliases)
    if (l == alias) return method;
  const sample_method_t lowered = str_to_sample_method(l.c_str());
  if (lowered != SAMPLE_METHOD_COUNT) return lowered;
  throw BadRequest("field '" + field + "': unknown sampler '" + name +
                   "'; valid samplers: " + sampler_list() + " (GET /sdapi/v1/samplers)");
}

scheduler_t parse_scheduler(const std::string& name, const std::string& field) {
  const std::string l = ascii_lower(name);
  if (l == "normal" || l == "automatic")
    return l == "normal" ? DISCRETE_SCHEDULER : SCHEDULER_COUNT;
  const scheduler_t s = str_to_scheduler(l.c_str());
  if (s != SCHEDULER_COUNT) return s;
  throw BadRequest("field '" + field + "': unknown scheduler '" + name +
                   "'; valid schedulers: " + scheduler_list() + " (GET /sdapi/v1/schedulers)");
}

// sd.cpp's sample_params object (and high_noise_sample_params, which has no custom sigmas).
void apply_sample_params(const JsonFields& s, bool strict, sd_sample_params_t& p,
                         std::vector<int>& skip_layers, std::vector<float>* custom_sigmas) {
  if (strict) {
    std::vector<std::string> known = {"scheduler",        "sample_method", "sample_steps", "eta",
                                      "shifted_timestep", "flow_shift",    "guidance"};
    if (custom_sigmas) known.push_back("custom_sigmas");
    s.reject_unknown(known);
  }
  if (auto v = s.text("sample_method"))
    p.sample_method = parse_sampler(*v, s.path("sample_method"));
  if (auto v = s.text("scheduler")) p.scheduler = parse_scheduler(*v, s.path("scheduler"));
  if (auto v = s.integer("sample_steps", 1, 10000)) p.sample_steps = static_cast<int>(*v);
  if (auto v = s.number("eta", -kBig, kBig)) p.eta = static_cast<float>(*v);
  if (auto v = s.integer("shifted_timestep", 0, 1000)) p.shifted_timestep = static_cast<int>(*v);
  if (auto v = s.number("flow_shift", -kBig, kBig)) p.flow_shift = static_cast<float>(*v);
  if (custom_sigmas)
    if (auto v = s.numbers("custom_sigmas")) custom_sigmas->assign(v->begin(), v->end());
  if (auto guidance = s.object("guidance")) {
    if (strict) guidance->reject_unknown({"txt_cfg", "img_cfg", "distilled_guidance", "slg"});
    if (auto v = guidance->number("txt_cfg", 0, kBig)) p.guidance.txt_cfg = static_cast<float>(*v);
    if (auto v = guidance->number("img_cfg", 0, kBig)) p.guidance.img_cfg = static_cast<float>(*v);
    if (auto v = guidance->number("distilled_guidance", 0, kBig))
      p.guidance.distilled_guidance = static_cast<float>(*v);
    if (auto slg = guidance->object("slg")) {
      if (strict) slg->reject_unknown({"layers", "layer_start", "layer_end", "scale"});
      if (auto v = slg->integers("layers", 0, 1000)) skip_layers.assign(v->begin(), v->end());
      if (auto v = slg->number("layer_start", 0, 1))
        p.guidance.slg.layer_start = static_cast<float>(*v);
      if (auto v = slg->number("layer_end", 0, 1))
        p.guidance.slg.layer_end = static_cast<float>(*v);
      if (auto v = slg->number("scale", 0, kBig)) p.guidance.slg.scale = static_cast<float>(*v);
    }
  }
}

std::optional<nlohmann::json> take_extra_args(std::string& prompt) {
  static const std::string open = "<sd_cpp_extra_args>", close = "</sd_cpp_extra_args>";
  const size_t begin = prompt.find(open);
  if (begin == std::string::npos) return std::nullopt;
  const size_t end = prompt.find(close, begin);
  if (end == std::string::npos)
    throw BadRequest("prompt: <sd_cpp_extra_args> has no closing </sd_cpp_extra_args>");
  const std::string text = prompt.substr(begin + open.size(), end - begin - open.size());
  prompt.erase(begin, end + close.size() - begin);
  return parse_json_object(text, "prompt: the text inside <sd_cpp_extra_args>");
}

// The native fields an image and a clip share (img_gen's and vid_gen's schemas).
const std::vector<std::string> kSharedNativeFields = {"prompt",
                                                      "negative_prompt",
                                                      "clip_skip",
                                                      "width",
                                                      "height",
                                                      "strength",
                                                      "seed",
                                                      "embed_image_metadata",
                                                      "init_image",
                                                      "sample_params",
                                                      "lora",
                                                      "vae_tiling_params",
                                                      "cache_mode",
                                                      "cache_option",
                                                      "scm_mask",
                                                      "scm_policy_dynamic",
                                                      "output_compression"};

void apply_native_fields(const JsonFields& f, RequestDraft& d, bool strict) {
  cli::GenerationOptions& g = d.g;
  if (strict) {
    std::vector<std::string> known = kSharedNativeFields;
    known.insert(known.end(), {"batch_count", "mask_image", "ref_images", "hires", "output_format",
                               "auto_resize_ref_image", "increase_ref_index", "control_image",
                               "control_strength", "ip_adapter_image", "ip_adapter_strength"});
    f.reject_unknown(known);
  }
  if (auto v = f.text("prompt")) g.prompt = *v;
  if (auto v = f.text("negative_prompt")) g.negative_prompt = *v;
  if (auto v = f.integer("clip_skip", -1, 64)) g.clip_skip = static_cast<int>(*v);
  if (auto v = f.integer("width", 1, 1 << 20)) g.width = static_cast<int>(*v);
  if (auto v = f.integer("height", 1, 1 << 20)) g.height = static_cast<int>(*v);
  if (auto v = f.number("strength", 0, 1)) g.strength = static_cast<float>(*v);
  if (auto v = f.integer("seed", std::numeric_limits<int64_t>::min(),
                         std::numeric_limits<int64_t>::max()))
    g.seed = *v;
  if (auto v = f.integer("batch_count", 1, 1 << 20)) g.batch_count = static_cast<int>(*v);
  if (auto v = f.boolean("embed_image_metadata")) g.embed_image_metadata = *v;
  if (auto v = f.boolean("auto_resize_ref_image")) g.auto_resize_ref_image = *v;
  if (auto v = f.boolean("increase_ref_index")) g.increase_ref_index = *v;
  if (auto v = f.number("control_strength", 0, kBig)) g.control_strength = static_cast<float>(*v);
  if (auto v = f.number("ip_adapter_strength", 0, kBig))
    g.ip_adapter_strength = static_cast<float>(*v);
  if (f.get("ip_adapter_image"))
    throw BadRequest("field 'ip_adapter_image' is not supported by this server yet; leave it out");
  if (auto v = f.text("control_image"))
    d.control = decode_image_field(*v, f.path("control_image"), d.max_input_side);
  if (auto v = f.text("init_image"))
    d.init = decode_image_field(*v, f.path("init_image"), d.max_input_side);
  if (auto v = f.text("mask_image"))
    d.mask = decode_image_field(*v, f.path("mask_image"), d.max_input_side);
  if (auto v = f.texts("ref_images")) {
    if (v->size() + d.refs.size() > kMaxRequestImages)
      throw BadRequest("field '" + f.path("ref_images") + "': at most " +
                       std::to_string(kMaxRequestImages) + " reference images per request");
    for (size_t i = 0; i < v->size(); ++i)
      d.refs.push_back(decode_image_field(
          (*v)[i], f.path("ref_images") + "[" + std::to_string(i) + "]", d.max_input_side));
  }
  if (const nlohmann::json* v = f.get("lora")) apply_loras(*v, f.path("lora"), d);
  if (auto v = f.text("cache_mode")) g.cache_mode = *v == "disabled" ? "" : *v;
  if (auto v = f.text("cache_option")) g.cache_option = *v;
  if (auto v = f.text("scm_mask")) g.scm_mask = *v;
  if (auto v = f.boolean("scm_policy_dynamic")) g.scm_policy_dynamic = *v;
  if (auto v = f.text("output_format")) apply_output_format(d, *v, f.path("output_format"));
  if (auto v = f.integer("output_compression", 0, 100)) d.quality = std::max<int>(1, *v);

  if (auto s = f.object("sample_params"))
    apply_sample_params(*s, strict, g.sample_params, g.skip_layers, &g.custom_sigmas);
  if (auto h = f.object("hires")) {
    if (strict)
      h->reject_unknown({"enabled", "upscaler", "scale", "target_width", "target_height", "steps",
                         "denoising_strength", "custom_sigmas", "upscale_tile_size"});
    if (auto v = h->boolean("enabled")) g.hires_enabled = *v;
    if (auto v = h->text("upscaler")) g.hires_upscaler = *v;
    if (auto v = h->number("scale", 0, 16)) g.hires_scale = static_cast<float>(*v);
    if (auto v = h->integer("target_width", 0, 1 << 20)) g.hires_width = static_cast<int>(*v);
    if (auto v = h->integer("target_height", 0, 1 << 20)) g.hires_height = static_cast<int>(*v);
    if (auto v = h->integer("steps", 0, 10000)) g.hires_steps = static_cast<int>(*v);
    if (auto v = h->number("denoising_strength", 0, 1))
      g.hires_denoising_strength = static_cast<float>(*v);
    if (auto v = h->numbers("custom_sigmas")) g.hires_custom_sigmas.assign(v->begin(), v->end());
    if (auto v = h->integer("upscale_tile_size", 1, 1 << 16))
      g.hires_upscale_tile_size = static_cast<int>(*v);
  }
  if (auto t = f.object("vae_tiling_params")) {
    if (strict)
      t->reject_unknown({"enabled", "tile_size_x", "tile_size_y", "target_overlap", "rel_size_x",
                         "rel_size_y", "extra_tiling_args"});
    sd_tiling_params_t& p = g.vae_tiling_params;
    if (auto v = t->boolean("enabled")) p.enabled = *v;
    if (auto v = t->integer("tile_size_x", 0, 1 << 16)) p.tile_size_x = static_cast<int>(*v);
    if (auto v = t->integer("tile_size_y", 0, 1 << 16)) p.tile_size_y = static_cast<int>(*v);
    if (auto v = t->number("target_overlap", 0, 1)) p.target_overlap = static_cast<float>(*v);
    if (auto v = t->number("rel_size_x", 0, kBig)) p.rel_size_x = static_cast<float>(*v);
    if (auto v = t->number("rel_size_y", 0, kBig)) p.rel_size_y = static_cast<float>(*v);
    if (auto v = t->text("extra_tiling_args")) g.extra_tiling_args = *v;
  }
}

namespace {

// The hires pass's target size as the engine works it out (pipeline/hires_fix.h): both
// sides, one side for a square, or the first pass's size times the scale.
std::pair<int64_t, int64_t> hires_target(const cli::GenerationOptions& g) {
  if (g.hires_width > 0 && g.hires_height > 0) return {g.hires_width, g.hires_height};
  if (g.hires_width > 0 || g.hires_height > 0) {
    const int64_t side = std::max(g.hires_width, g.hires_height);
    return {side, side};
  }
  return {std::llround(g.width * static_cast<double>(g.hires_scale)),
          std::llround(g.height * static_cast<double>(g.hires_scale))};
}

// Every size a request reaches is within --max-image-side, and its whole work within
// --max-megapixel-steps, before it is queued: one request must not hold the machine for
// hours (a 2048x2048 request with hires_scale 16 asked for a 32768-pixel image).
void check_work(const cli::GenerationOptions& g, const RequestContext& rc, bool video) {
  const int64_t steps = g.sample_params.sample_steps;
  double work = static_cast<double>(g.width) * g.height * steps;
  if (video) work *= std::max(1, g.video_frames);  // every frame is pixels to denoise
  if (g.hires_enabled) {
    const auto [w, h] = hires_target(g);
    if (w > rc.max_image_side || h > rc.max_image_side)
      throw BadRequest("the hires pass would make a " + std::to_string(w) + "x" +
                       std::to_string(h) + " image; sizes must be at most " +
                       std::to_string(rc.max_image_side) +
                       " (the server's --max-image-side): lower hires scale or target size");
    work += static_cast<double>(w) * h * (g.hires_steps > 0 ? g.hires_steps : steps);
  }
  work *= std::max(1, g.batch_count);
  const double megapixel_steps = work / 1e6;
  if (megapixel_steps > static_cast<double>(rc.max_megapixel_steps))
    throw BadRequest("this request is " + std::to_string(std::llround(megapixel_steps)) +
                     " million pixel-steps of work (width x height x steps x images or video "
                     "frames, plus the hires pass); the server takes at most " +
                     std::to_string(rc.max_megapixel_steps) +
                     " (--max-megapixel-steps): ask for fewer steps, images or pixels");
}

}  // namespace

std::string flags_to_fields(std::string message) {
  static const std::pair<const char*, const char*> kFields[] = {
      {"--width", "width"},
      {"--height", "height"},
      {"--steps", "steps"},
      {"--strength", "strength"},
      {"--cfg-scale", "cfg scale"},
      {"--batch-count", "batch count"},
      {"--hires-", "hires "},
      {"--cache-option", "cache_option"},
      {"--cache-mode", "cache_mode"},
      {"--sigmas", "custom_sigmas"},
      {"--clip-skip", "clip_skip"},
      {"--control-video", "control_frames"},
      {"--vace-strength", "vace_strength"},
      {"--end-img", "end_image"}};
  for (const auto& [flag, field] : kFields) {
    for (size_t at = message.find(flag); at != std::string::npos; at = message.find(flag, at))
      message.replace(at, std::strlen(flag), field);
  }
  return message;
}

GenRequest finish_request(RequestDraft d, const RequestContext& rc) {
  cli::GenerationOptions& g = d.g;
  // Checked before the engine sees them: a size or count a client can set never reaches
  // an allocation the machine cannot hold.
  if (g.width > rc.max_image_side || g.height > rc.max_image_side)
    throw BadRequest("width and height must be at most " + std::to_string(rc.max_image_side) +
                     " (the server's --max-image-side), got " + std::to_string(g.width) + "x" +
                     std::to_string(g.height));
  if (g.batch_count > rc.max_batch)
    throw BadRequest("at most " + std::to_string(rc.max_batch) +
                     " images per request (the server's --max-batch), got " +
                     std::to_string(g.batch_count));

  GenRequest r;
  // The size follows the first image when the request names none, as sd-cli does.
  const io::Image* sizing = d.init ? &*d.init : (d.refs.empty() ? nullptr : &d.refs.front());
  if (sizing && !g.size_is_set()) {
    g.width = round_up_to_8(sizing->width);
    g.height = round_up_to_8(sizing->height);
    if (g.width > rc.max_image_side || g.height > rc.max_image_side)
      throw BadRequest("the input image is " + std::to_string(sizing->width) + "x" +
                       std::to_string(sizing->height) + ", larger than the server's " +
                       "--max-image-side " + std::to_string(rc.max_image_side) +
                       "; give a smaller width and height");
  }

  // LoRAs come from the structured field only, confined to --lora-model-dir; prompt tags
  // are left in the prompt (a client's text must not pick files).
  // sd-cli draws a random seed from the clock; requests in the same second must differ.
  if (g.seed < 0) {
    static std::mutex mutex;
    static std::mt19937 rng{std::random_device{}()};
    std::lock_guard<std::mutex> lock(mutex);
    g.seed = static_cast<int64_t>(rng() & 0x7fffffff);
  }
  cli::ContextOptions context = rc.context;
  context.lora_model_dir.clear();
  context.confine_model_dirs = true;
  try {
    cli::resolve_and_validate_generation(g, context,
                                         d.video ? cli::Mode::VidGen : cli::Mode::ImgGen);
  } catch (const Error& e) {
    throw BadRequest("invalid request: " + flags_to_fields(e.what()));
  }
  check_work(g, rc, d.video);
  for (const auto& [name, multiplier, high_noise] : d.loras) {
    if (rc.context.lora_model_dir.empty())
      throw BadRequest("LoRA '" + name + "': the server has no --lora-model-dir");
    const io::FolderMatch m =
        io::find_in_folder(name, rc.context.lora_model_dir, kLoraExtensions, true);
    if (!m.refused.empty())
      throw BadRequest("LoRA '" + name + "' is refused: " + m.refused +
                       "; name a file inside the server's LoRA folder (GET /sdapi/v1/loras)");
    if (m.path.empty())
      throw BadRequest("LoRA '" + name + "' is not in the server's LoRA folder; " +
                       "GET /sdapi/v1/loras lists the names");
    (high_noise ? g.high_noise_lora_map : g.lora_map)[m.path] += multiplier;
  }

  const int width = g.resolved_width(), height = g.resolved_height();
  if (d.init) r.images.init = io::fit_to_size(io::to_channels(*d.init, 3), width, height);
  if (d.end) r.images.end = io::fit_to_size(io::to_channels(*d.end, 3), width, height);
  for (const io::Image& frame : d.control_frames)
    r.images.control_frames.push_back(io::fit_to_size(io::to_channels(frame, 3), width, height));
  r.video = d.video;
  r.video_format = d.video_format;
  for (auto& ref : d.refs) r.images.refs.push_back(io::to_channels(ref, 3));
  if (d.mask) {
    r.images.mask = io::fit_to_size(io::to_channels(*d.mask, 1), width, height);
  } else {
    r.images.mask.width = width;
    r.images.mask.height = height;
    r.images.mask.channels = 1;
    r.images.mask.pixels.assign(static_cast<size_t>(width) * height, 255);
  }
  if (d.invert_mask)
    for (auto& p : r.images.mask.pixels) p = static_cast<uint8_t>(255 - p);
  if (d.control) {
    if (rc.context.control_net_path.empty())
      throw BadRequest(
          "control_image: the server has no ControlNet (start it with --control-net FILE)");
    r.images.control = io::fit_to_size(io::to_channels(*d.control, 3), width, height);
    if (rc.canny && !cli::apply_canny(r.images.control))
      throw BadRequest("control_image: the canny preprocessor failed on it");
  }
  r.format = d.output_format == "jpeg"   ? io::ImageFormat::Jpeg
             : d.output_format == "webp" ? io::ImageFormat::Webp
                                         : io::ImageFormat::Png;
  r.quality = d.quality;
  r.generation = std::move(g);
  return r;
}

GenRequest parse_native_request(const nlohmann::json& body, const RequestContext& rc) {
  RequestDraft d = new_draft(rc);
  apply_native_fields(JsonFields(body, ""), d, true);
  return finish_request(std::move(d), rc);
}

GenRequest parse_native_video_request(const nlohmann::json& body, const RequestContext& rc) {
  static const std::vector<std::string> kVideoOnly = {
      "video_frames",  "fps",          "end_image",     "control_frames",
      "output_format", "moe_boundary", "vace_strength", "high_noise_sample_params"};
  const JsonFields f(body, "");
  std::vector<std::string> known = kSharedNativeFields;
  known.insert(known.end(), kVideoOnly.begin(), kVideoOnly.end());
  f.reject_unknown(known);
  // The fields a clip shares with an image, read as img_gen reads them.
  nlohmann::json shared = body;
  for (const std::string& key : kVideoOnly) shared.erase(key);
  RequestDraft d = new_draft(rc);
  d.video = true;
  d.output_format = "webm";
  apply_native_fields(JsonFields(shared, ""), d, true);
  cli::GenerationOptions& g = d.g;
  g.batch_count = 1;
  if (auto v = f.integer("video_frames", 1, 1025)) g.video_frames = static_cast<int>(*v);
  if (auto v = f.integer("fps", 1, 240)) g.fps = static_cast<int>(*v);
  if (auto v = f.text("end_image"))
    d.end = decode_image_field(*v, f.path("end_image"), d.max_input_side);
  if (auto v = f.number("moe_boundary", 0, 1)) g.moe_boundary = static_cast<float>(*v);
  if (auto v = f.number("vace_strength", 0, kBig)) g.vace_strength = static_cast<float>(*v);
  if (auto v = f.texts("control_frames")) {
    // At most the clip's frames are used (as sd-cli reads at most that many).
    const size_t used = std::min(v->size(), static_cast<size_t>(std::max(g.video_frames, 1)));
    for (size_t i = 0; i < used; ++i)
      d.control_frames.push_back(decode_image_field(
          (*v)[i], f.path("control_frames") + "[" + std::to_string(i) + "]", d.max_input_side));
  }
  if (auto s = f.object("high_noise_sample_params")) {
    if (!d.high_noise_expert)
      throw BadRequest(
          "field 'high_noise_sample_params' needs a model with a high-noise expert (Wan 2.2 "
          "A14B's pair, --high-noise-diffusion-model); leave it out");
    apply_sample_params(*s, true, g.high_noise_sample_params, g.high_noise_skip_layers, nullptr);
  }
  if (auto v = f.text("output_format")) {
    const std::string name = ascii_lower(*v);
    if (name == "webm") {
      d.video_format = io::VideoFormat::Webm;
    } else if (name == "mp4") {
      d.video_format = io::VideoFormat::Mp4;
    } else if (name == "avi") {
      d.video_format = io::VideoFormat::Avi;
    } else if (name == "webp") {
      d.video_format = io::VideoFormat::AnimatedWebp;
    } else {
      throw BadRequest("field 'output_format': unknown video format '" + *v +
                       "'; valid: webm, mp4, avi, webp");
    }
    d.output_format = name;
  }
  return finish_request(std::move(d), rc);
}

GenRequest parse_queued_request(const nlohmann::json& payload, const RequestContext& rc) {
  const std::string api = payload.at("api").get<std::string>();
  GenRequest r;
  if (api == "native") {
    r = parse_native_request(payload.at("body"), rc);
  } else if (api == "native_video") {
    r = parse_native_video_request(payload.at("body"), rc);
  } else if (api == "sdapi") {
    r = parse_sdapi_request(payload.at("body"), rc, payload.at("img2img").get<bool>());
  } else if (api == "openai" || api == "openai_edit") {
    OpenAiForm form;
    const int max_side = max_input_side(rc.max_image_side);
    auto image = [&](const nlohmann::json& b64, const std::string& field) {
      const std::optional<std::string> bytes = base64_decode(b64.get<std::string>());
      if (!bytes) throw BadRequest("queued request: field '" + field + "' is not base64");
      return decode_image_bytes(*bytes, field, max_side);
    };
    if (api == "openai") {
      form.fields = payload.at("body");
    } else {
      form.fields = payload.at("fields");
      for (const auto& b64 : payload.at("images")) form.images.push_back(image(b64, "image"));
      if (!payload.at("mask").is_null()) form.mask = image(payload.at("mask"), "mask");
    }
    r = parse_openai_request(form, rc);
  } else {
    throw BadRequest("a queued request of kind '" + api +
                     "', which this sd-server does not know (written by a newer one?)");
  }
  r.generation.seed = payload.at("seed").get<int64_t>();
  return r;
}

}  // namespace sd::server
