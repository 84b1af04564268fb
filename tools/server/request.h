// From a request body of any of the three APIs to a checked GenRequest. Every API first
// fills a RequestDraft (the command line's generation flags are its defaults), then
// finish_request checks it the way sd-cli checks its flags, plus the server's limits, and
// prepares the input images as sd-cli prepares image files.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/args.h"
#include "io/image.h"
#include "io/video.h"
#include "server/generator.h"
#include "server/json_fields.h"

namespace sd::server {

struct RequestContext {
  cli::GenerationOptions defaults;  // the command line's generation flags, unresolved
  cli::ContextOptions context;      // resolved
  int max_image_side = 2048;
  int max_batch = 8;
  // Work one request may ask for: images x (width x height x steps + the hires pass's),
  // in millions of pixel-steps.
  int64_t max_megapixel_steps = 1024;
  bool canny = false;  // --canny: every control image goes through the edge detector
};

// Reference images one request may send (FLUX.2 and Kontext take a few; each is kept decoded
// until its job runs).
inline constexpr size_t kMaxRequestImages = 16;

// The widest input image a server with --max-image-side `side` decodes: inputs are resized
// to the output, so twice its side (a phone's 4032 x 3024 photo at the default), checked
// from the file's header before decoding.
inline int max_input_side(int max_image_side) {
  return 2 * max_image_side;
}

struct RequestDraft {
  int max_input_side = 4096;
  cli::GenerationOptions g;
  std::optional<io::Image> init, mask, control;
  bool invert_mask = false;
  std::vector<io::Image> refs;
  struct Lora {
    std::string name;  // inside --lora-model-dir
    float multiplier = 1.0f;
    bool high_noise = false;  // for the high-noise expert (Wan 2.2 A14B)
  };
  std::vector<Lora> loras;
  bool high_noise_expert = false;  // the model has one: high-noise fields apply
  std::string output_format = "png";
  int quality = 90;
  // A video (vid_gen): its last frame, and the container.
  bool video = false;
  std::optional<io::Image> end;
  std::vector<io::Image> control_frames;  // a Wan VACE model's control video
  io::VideoFormat video_format = io::VideoFormat::Webm;
};

RequestDraft new_draft(const RequestContext& rc);
GenRequest finish_request(RequestDraft draft, const RequestContext& rc);
// sd-cli's and the engine's messages name flags (--cfg-scale, --clip-skip); a client sends
// fields: the flags a request can set become their field names.
std::string flags_to_fields(std::string message);

// An image sent as base64 or a data URL; BadRequest naming `field` when it is not one, or
// when a side is over `max_side`.
io::Image decode_image_field(const std::string& text, const std::string& field, int max_side);
io::Image decode_image_bytes(const std::string& bytes, const std::string& field, int max_side);

// Names as sd-cli takes them, plus AUTOMATIC1111's sampler names ("Euler a", "DPM++ 2M").
sample_method_t parse_sampler(const std::string& name, const std::string& field);
scheduler_t parse_scheduler(const std::string& name, const std::string& field);

// The native schema (POST /sdcpp/v1/img_gen), also what sd_cpp_extra_args holds.
void apply_native_fields(const JsonFields& f, RequestDraft& d, bool strict);
GenRequest parse_native_request(const nlohmann::json& body, const RequestContext& rc);
// POST /sdcpp/v1/vid_gen: img_gen's fields for one clip, plus video_frames, fps, end_image,
// control_frames and vace_strength (Wan VACE), and a container as output_format (webm, the
// default; mp4, avi, webp).
GenRequest parse_native_video_request(const nlohmann::json& body, const RequestContext& rc);

// POST /sdapi/v1/txt2img and img2img.
GenRequest parse_sdapi_request(const nlohmann::json& body, const RequestContext& rc, bool img2img);
// What an A1111 answer echoes as "parameters": the request's fields this server reads, no
// images and nothing it ignores.
nlohmann::json sdapi_parameters(const nlohmann::json& body, bool img2img);

// POST /v1/images/generations (JSON) and /v1/images/edits (form fields, images decoded).
struct OpenAiForm {
  nlohmann::json fields = nlohmann::json::object();  // text fields as strings or numbers
  std::vector<io::Image> images;
  std::optional<io::Image> mask;
};
GenRequest parse_openai_request(const OpenAiForm& form, const RequestContext& rc);

// A request as a shared queue stored it (routes.cpp builds it: {"api", the body or form,
// "seed"}), parsed again by the worker that runs it, with that worker's own limits; the
// seed drawn by the server that accepted it is kept.
GenRequest parse_queued_request(const nlohmann::json& payload, const RequestContext& rc);

// Moves "<sd_cpp_extra_args>{...}</sd_cpp_extra_args>" out of a prompt; nullopt if none.
std::optional<nlohmann::json> take_extra_args(std::string& prompt);

}  // namespace sd::server
