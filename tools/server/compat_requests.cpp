// The AUTOMATIC1111 and OpenAI request shapes, mapped onto the native fields. Their
// clients send fields this engine has no use for (restore_faces, save_images, styles...),
// so unknown fields are ignored here; fields they share with us are type-checked as
// strictly as the native API's.
#include <algorithm>
#include <cstdint>
#include <cstdio>

#include "server/request.h"

namespace sd::server {

namespace {

void apply_extra_args(RequestDraft& d) {
  if (std::optional<nlohmann::json> extra = take_extra_args(d.g.prompt)) {
    apply_native_fields(JsonFields(*extra, "sd_cpp_extra_args."), d, true);
  }
}

}  // namespace

GenRequest parse_sdapi_request(const nlohmann::json& body, const RequestContext& rc, bool img2img) {
  RequestDraft d = new_draft(rc);
  cli::GenerationOptions& g = d.g;
  const JsonFields f(body, "");
  if (auto v = f.text("prompt")) g.prompt = *v;
  if (auto v = f.text("negative_prompt")) g.negative_prompt = *v;
  if (auto v = f.integer("width", 1, 1 << 20)) g.width = static_cast<int>(*v);
  if (auto v = f.integer("height", 1, 1 << 20)) g.height = static_cast<int>(*v);
  if (auto v = f.integer("steps", 1, 10000)) g.sample_params.sample_steps = static_cast<int>(*v);
  if (auto v = f.number("cfg_scale", 0, 1e9))
    g.sample_params.guidance.txt_cfg = static_cast<float>(*v);
  if (auto v = f.integer("seed", INT64_MIN, INT64_MAX)) g.seed = *v;
  // Each up to 2^20: their product is formed in 64 bits, then bounded like any batch.
  const int64_t batch = f.integer("batch_size", 1, 1 << 20).value_or(1);
  const int64_t iterations = f.integer("n_iter", 1, 1 << 20).value_or(1);
  g.batch_count = static_cast<int>(std::min<int64_t>(batch * iterations, INT32_MAX));
  if (auto v = f.integer("clip_skip", -1, 64)) g.clip_skip = static_cast<int>(*v);
  if (auto v = f.text("sampler_name")) {
    g.sample_params.sample_method = parse_sampler(*v, "sampler_name");
  } else if (auto v = f.text("sampler_index")) {  // older clients
    g.sample_params.sample_method = parse_sampler(*v, "sampler_index");
  }
  if (auto v = f.text("scheduler")) g.sample_params.scheduler = parse_scheduler(*v, "scheduler");
  if (const nlohmann::json* v = f.get("lora")) {
    nlohmann::json wrapped = {{"lora", *v}};
    apply_native_fields(JsonFields(wrapped, ""), d, false);
  }
  if (auto v = f.texts("extra_images")) {
    if (v->size() > kMaxRequestImages)
      throw BadRequest("field 'extra_images': at most " + std::to_string(kMaxRequestImages) +
                       " images per request");
    for (size_t i = 0; i < v->size(); ++i)
      d.refs.push_back(
          decode_image_field((*v)[i], "extra_images[" + std::to_string(i) + "]", d.max_input_side));
  }
  if (img2img) {
    const std::optional<std::vector<std::string>> init = f.texts("init_images");
    if (!init || init->empty())
      throw BadRequest(
          "field 'init_images' is required for img2img: an array with one base64 image");
    d.init = decode_image_field(init->front(), "init_images[0]", d.max_input_side);
    if (auto v = f.text("mask")) d.mask = decode_image_field(*v, "mask", d.max_input_side);
    if (auto v = f.boolean("inpainting_mask_invert")) d.invert_mask = *v;
    if (auto v = f.number("denoising_strength", 0, 1)) g.strength = static_cast<float>(*v);
  } else {
    if (auto v = f.boolean("enable_hr")) g.hires_enabled = *v;
    if (auto v = f.text("hr_upscaler")) g.hires_upscaler = *v;
    if (auto v = f.number("hr_scale", 0, 16)) g.hires_scale = static_cast<float>(*v);
    if (auto v = f.integer("hr_resize_x", 0, 1 << 20)) g.hires_width = static_cast<int>(*v);
    if (auto v = f.integer("hr_resize_y", 0, 1 << 20)) g.hires_height = static_cast<int>(*v);
    if (auto v = f.integer("hr_second_pass_steps", 0, 10000)) g.hires_steps = static_cast<int>(*v);
    if (auto v = f.integer("hr_steps", 0, 10000)) g.hires_steps = static_cast<int>(*v);
    if (auto v = f.number("denoising_strength", 0, 1))
      g.hires_denoising_strength = static_cast<float>(*v);
  }
  apply_extra_args(d);
  return finish_request(std::move(d), rc);
}

nlohmann::json sdapi_parameters(const nlohmann::json& body, bool img2img) {
  // The fields parse_sdapi_request reads, images left out (the client has them).
  static const char* const kCommon[] = {"prompt",       "negative_prompt",
                                        "width",        "height",
                                        "steps",        "cfg_scale",
                                        "seed",         "batch_size",
                                        "n_iter",       "clip_skip",
                                        "sampler_name", "sampler_index",
                                        "scheduler",    "lora"};
  static const char* const kImg2img[] = {"inpainting_mask_invert", "denoising_strength"};
  static const char* const kTxt2img[] = {"enable_hr",   "hr_upscaler",       "hr_scale",
                                         "hr_resize_x", "hr_resize_y",       "hr_second_pass_steps",
                                         "hr_steps",    "denoising_strength"};
  nlohmann::json out = nlohmann::json::object();
  auto copy = [&](const char* key) {
    if (auto it = body.find(key); it != body.end()) out[key] = *it;
  };
  for (const char* key : kCommon) copy(key);
  if (img2img)
    for (const char* key : kImg2img) copy(key);
  else
    for (const char* key : kTxt2img) copy(key);
  return out;
}

GenRequest parse_openai_request(const OpenAiForm& form, const RequestContext& rc) {
  RequestDraft d = new_draft(rc);
  cli::GenerationOptions& g = d.g;
  const JsonFields f(form.fields, "");
  const std::optional<std::string> prompt = f.text("prompt");
  if (!prompt) throw BadRequest("field 'prompt' is required");
  g.prompt = *prompt;
  if (auto v = f.integer("n", 1, 1 << 20)) g.batch_count = static_cast<int>(*v);
  if (auto v = f.text("size")) {
    int w = 0, h = 0;
    char tail = 0;
    // Digits, 'x', digits: nothing else (sscanf alone would skip a leading space).
    const bool shape = !v->empty() && std::all_of(v->begin(), v->end(), [](char c) {
      return (c >= '0' && c <= '9') || c == 'x';
    });
    if (!shape || std::sscanf(v->c_str(), "%dx%d%c", &w, &h, &tail) != 2 || w <= 0 || h <= 0)
      throw BadRequest("field 'size' must be WIDTHxHEIGHT, e.g. 512x512, got '" + *v + "'");
    g.width = w;
    g.height = h;
  }
  if (auto v = f.text("response_format"); v && *v != "b64_json")
    throw BadRequest("field 'response_format': only 'b64_json' is served (no image URLs)");
  if (auto v = f.text("output_format")) {
    nlohmann::json wrapped = {{"output_format", *v}};
    apply_native_fields(JsonFields(wrapped, ""), d, false);
  }
  if (auto v = f.integer("output_compression", 0, 100)) d.quality = std::max<int>(1, *v);
  if (!form.images.empty()) d.init = form.images.front();
  for (size_t i = 1; i < form.images.size(); ++i) d.refs.push_back(form.images[i]);
  if (form.mask) {
    // OpenAI masks mark the area to repaint with transparency; ours with white.
    io::Image m = *form.mask;
    if (m.channels == 4) {
      io::Image gray;
      gray.width = m.width;
      gray.height = m.height;
      gray.channels = 1;
      gray.pixels.resize(static_cast<size_t>(m.width) * m.height);
      for (size_t i = 0; i < gray.pixels.size(); ++i)
        gray.pixels[i] = static_cast<uint8_t>(255 - m.pixels[i * 4 + 3]);
      m = gray;
    }
    d.mask = m;
  }
  apply_extra_args(d);
  return finish_request(std::move(d), rc);
}

}  // namespace sd::server
