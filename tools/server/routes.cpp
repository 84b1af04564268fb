#include "server/routes.h"

#include <algorithm>
#include <chrono>
#include <ctime>
#include <filesystem>
#include <thread>

#include <xxhash.h>

#include "backend/rpc/access.h"
#include "server/multipart.h"
#include "server/request_guard.h"
#include "tensor/base64.h"
#include "tensor/error.h"
#include "tensor/text.h"

namespace sd::server {

namespace {

using nlohmann::json;

const char* kJson = "application/json";

void send_json(Response& res, int status, const json& body) {
  res.status = status;
  // Messages may quote what a client sent: bytes that are not UTF-8 are replaced, not thrown.
  res.set_content(body.dump(-1, ' ', false, json::error_handler_t::replace), kJson);
}

void send_error(Response& res, int status, const std::string& code, const std::string& message) {
  send_json(res, status, {{"error", {{"code", code}, {"message", message}}}});
}

const char* code_for(int status) {
  switch (status) {
    case 400:
      return "invalid_request";
    case 401:
      return "unauthorized";
    case 403:
      return "forbidden";
    case 404:
      return "not_found";
    case 405:
      return "method_not_allowed";
    case 409:
      return "conflict";
    case 413:
      return "request_too_large";
    case 429:
      return "queue_full";
    case 503:
      return "unavailable";
    default:
      return status >= 500 ? "server_error" : "error";
  }
}

// Runs a handler, turning a client's mistake into 400 and anything else into 500, so no
// request can take the server down.
template <typename F>
HttpServer::Handler guarded(F f) {
  return [f](const Request& req, Response& res) {
    try {
      f(req, res);
    } catch (const BadRequest& e) {
      send_error(res, e.status(), code_for(e.status()), e.what());
    } catch (const QueueUnavailable& e) {
      res.set_header("Retry-After", "5");
      send_error(res, 503, "queue_unavailable",
                 std::string("the job queue's database cannot be reached; retry after the "
                             "Retry-After seconds (") +
                     e.what() + ")");
    } catch (const std::exception& e) {
      send_error(res, 500, "server_error", std::string("internal error: ") + e.what());
    }
  };
}

json job_json(const JobState& s, bool with_images) {
  json j = {{"id", s.id},
            {"kind", s.kind},
            {"status", job_status_name(s.status)},
            {"created", s.created},
            {"started", s.started ? json(s.started) : json(nullptr)},
            {"completed", s.completed ? json(s.completed) : json(nullptr)},
            {"queue_position", s.queue_position},
            {"progress",
             {{"step", s.progress.step},
              {"steps", s.progress.steps},
              {"seconds_per_step", s.progress.seconds_per_step}}},
            {"preview", nullptr},
            {"result", nullptr},
            {"error", nullptr}};
  // The latest live preview, while the job runs; the URL changes with the step, so a
  // page can use it as an <img> source without caching an old picture.
  if (s.preview.step > 0 && s.status == JobStatus::Generating)
    j["preview"] = {
        {"step", s.preview.step},
        {"url", "/sdcpp/v1/jobs/" + s.id + "/preview?step=" + std::to_string(s.preview.step)}};
  if (s.status == JobStatus::Completed && s.kind == "vid_gen") {
    // One container, as the reference's vid_gen answers.
    json video = {{"output_format", s.result.output_format},
                  {"mime_type", video_mime_type(s.result.output_format)},
                  {"fps", s.result.fps},
                  {"frame_count", s.result.frame_count},
                  {"seed", s.result.seeds.empty() ? json(nullptr) : json(s.result.seeds[0])}};
    if (with_images && !s.result.images.empty())
      video["b64_json"] = base64_encode(s.result.images[0]);
    j["result"] = video;
  } else if (s.status == JobStatus::Completed) {
    json images = json::array();
    for (size_t i = 0; i < s.result.images.size(); ++i) {
      json image = {{"index", i}, {"seed", s.result.seeds[i]}};
      if (with_images) image["b64_json"] = base64_encode(s.result.images[i]);
      images.push_back(image);
    }
    j["result"] = {{"output_format", s.result.output_format}, {"images", images}};
  }
  if (!s.error_code.empty()) j["error"] = {{"code", s.error_code}, {"message", s.error_message}};
  // A shared queue runs a job again when its worker dies: how often, where and why.
  if (!s.history.is_null()) {
    j["attempts"] = s.attempts;
    j["history"] = s.history;
  }
  return j;
}

// Seconds a refused client should wait: the queue's length times the last job's time.
std::string retry_after(ServerState& s, const std::string& tenant) {
  int waiting = s.queue->max_waiting();
  try {
    waiting = s.queue->waiting(tenant);
  } catch (const QueueUnavailable&) {
  }
  const int64_t seconds = std::clamp<int64_t>(s.queue->last_run_seconds() * (waiting + 1), 1, 3600);
  return std::to_string(seconds);
}

Work make_work(ServerState& s, GenRequest request) {
  Generator* generator = s.generator;
  auto shared = std::make_shared<GenRequest>(std::move(request));
  return [generator, shared](const JobReporter& report) { return generator->run(*shared, report); };
}

// Whose waiting jobs a request counts against on a shared queue: clients of a server with
// a token are its token's (by a hash: the token itself is never stored), others share one.
std::string tenant_of(const ServerState& s) {
  if (s.options->token.empty()) return "";
  char text[24];
  std::snprintf(text, sizeof text, "token:%016llx",
                static_cast<unsigned long long>(
                    XXH3_64bits(s.options->token.data(), s.options->token.size())));
  return text;
}

// Submits and, for the synchronous APIs, waits. Returns nullopt after answering an error.
// `payload` is the request as the client sent it, stored by a shared queue for a worker to
// parse again (request.h: parse_queued_request); built only for such a queue.
std::optional<JobState> submit(ServerState& s, GenRequest request,
                               const std::function<json()>& payload, Response& res, bool wait) {
  // What only the loaded model can tell (a clip_skip past its text encoder's layers, a step
  // cache for another kind of network) is refused before queueing too; an --accept-only
  // server has no model, and its workers refuse such a job when they take it.
  if (s.generator) {
    if (const std::string problem = s.generator->check(request); !problem.empty()) {
      send_error(res, 400, "invalid_request", "invalid request: " + flags_to_fields(problem));
      return std::nullopt;
    }
  }
  const std::string tenant = tenant_of(s);
  JobTicket ticket;
  ticket.tenant = tenant;
  ticket.kind = request.video ? "vid_gen" : "img_gen";
  if (s.durable_queue()) {
    ticket.payload = payload();
    // The seed drawn here for seed -1: a job run again gives the same image.
    ticket.payload["seed"] = request.generation.seed;
  } else {
    ticket.work = make_work(s, std::move(request));
  }
  Jobs::Submitted submitted = s.queue->submit(std::move(ticket));
  if (submitted.refusal == Jobs::Refusal::Full) {
    res.set_header("Retry-After", retry_after(s, tenant));
    send_error(
        res, 429, "queue_full",
        "the job queue is full (" + std::to_string(s.queue->max_waiting()) +
            (s.durable_queue() ? " waiting for this client" : " waiting behind the running job") +
            "); retry after the Retry-After seconds");
    return std::nullopt;
  }
  if (submitted.refusal == Jobs::Refusal::Stopping) {
    send_error(res, 503, "shutdown", "the server is shutting down; retry on its next start");
    return std::nullopt;
  }
  if (submitted.refusal == Jobs::Refusal::Unavailable) {
    res.set_header("Retry-After", "5");
    send_error(res, 503, "queue_unavailable",
               "the job queue's database cannot be reached; the job was not taken, retry "
               "after the Retry-After seconds");
    return std::nullopt;
  }
  if (!wait) return submitted.job;
  const std::string id = submitted.job->id;
  std::optional<JobState> done =
      s.queue->wait_finished(id, int64_t{s.options->sync_timeout} * 1000);
  if (!done) {
    send_error(res, 500, "server_error", "the job was lost before it finished");
    return std::nullopt;
  }
  if (done->status == JobStatus::Queued || done->status == JobStatus::Generating) {
    send_error(res, 504, "timeout",
               "job " + id + " has not finished after " + std::to_string(s.options->sync_timeout) +
                   " s (--sync-timeout); it goes on: poll GET /sdcpp/v1/jobs/" + id);
    return std::nullopt;
  }
  if (done->status == JobStatus::Completed) return done;
  const int status =
      done->status == JobStatus::Cancelled ? (done->error_code == "shutdown" ? 503 : 409) : 500;
  send_error(res, status, done->error_code, done->error_message);
  return std::nullopt;
}

std::string file_stem(const std::string& path) {
  return std::filesystem::path(path).stem().string();
}

bool has_model_extension(const std::filesystem::path& p) {
  const std::string ext = ascii_lower(p.extension().string());
  return ext == ".safetensors" || ext == ".gguf" || ext == ".ckpt" || ext == ".pt" || ext == ".pth";
}

// Model files under `dir`, by path relative to it (bounded: the folder may be large, and
// this runs per request).
json list_model_files(const std::string& dir) {
  namespace fs = std::filesystem;
  json out = json::array();
  std::error_code ec;
  if (dir.empty() || !fs::is_directory(dir, ec)) return out;
  int seen = 0;
  for (auto it =
           fs::recursive_directory_iterator(dir, fs::directory_options::skip_permission_denied, ec);
       it != fs::recursive_directory_iterator() && seen < 10000; it.increment(ec), ++seen) {
    if (ec) break;
    if (it.depth() > 3) it.disable_recursion_pending();
    if (!it->is_regular_file(ec) || !has_model_extension(it->path())) continue;
    // A link out of the folder is not the folder's (and its target is not shown).
    const fs::path target = fs::weakly_canonical(it->path(), ec);
    const fs::path root = fs::weakly_canonical(dir, ec);
    if (ec ||
        std::mismatch(root.begin(), root.end(), target.begin(), target.end()).first != root.end())
      continue;
    out.push_back({{"name", file_stem(it->path().string())},
                   {"path", fs::relative(it->path(), dir, ec).string()}});
  }
  std::sort(out.begin(), out.end(),
            [](const json& a, const json& b) { return a["path"] < b["path"]; });
  return out;
}

json list_loras(const ServerState& s) {
  return list_model_files(s.requests.context.lora_model_dir);
}

// The built-in image upscalers, then the ESRGAN models of --hires-upscalers-dir, which a
// request names by their path (hires.upscaler, hr_upscaler).
json list_upscalers(const ServerState& s) {
  json out = json::array();
  auto add = [&out](const std::string& name, const json& model_name, const json& model_path) {
    out.push_back({{"name", name},
                   {"model_name", model_name},
                   {"model_path", model_path},
                   {"model_url", nullptr},
                   {"scale", 4}});
  };
  for (int i : {SD_HIRES_UPSCALER_NONE, SD_HIRES_UPSCALER_LANCZOS, SD_HIRES_UPSCALER_NEAREST})
    add(sd_hires_upscaler_name(sd_hires_upscaler_t(i)), nullptr, nullptr);
  for (const json& model : list_model_files(s.requests.context.hires_upscalers_dir))
    add(model["path"], model["name"], model["path"]);
  return out;
}

json list_samplers() {
  json out = json::array();
  for (int i = 0; i < SAMPLE_METHOD_COUNT; ++i) {
    const char* name = sd_sample_method_name(sample_method_t(i));
    out.push_back({{"name", name}, {"aliases", {name}}, {"options", json::object()}});
  }
  return out;
}

json list_schedulers() {
  json out = json::array();
  for (int i = 0; i < SCHEDULER_COUNT; ++i) {
    const char* name = sd_scheduler_name(scheduler_t(i));
    out.push_back({{"name", name}, {"label", name}});
  }
  return out;
}

json defaults_json(const ServerState& s) {
  const cli::GenerationOptions& g = s.requests.defaults;
  // The model's own defaults where none is given; an --accept-only server has no model
  // loaded and names them as its workers will pick them ("default").
  const sample_method_t method = g.sample_params.sample_method == SAMPLE_METHOD_COUNT && s.generator
                                     ? s.generator->default_sample_method()
                                     : g.sample_params.sample_method;
  const scheduler_t scheduler = g.sample_params.scheduler == SCHEDULER_COUNT && s.generator
                                    ? s.generator->default_scheduler(method)
                                    : g.sample_params.scheduler;
  return {{"prompt", g.prompt},
          {"negative_prompt", g.negative_prompt},
          {"clip_skip", g.clip_skip},
          {"width", g.resolved_width()},
          {"height", g.resolved_height()},
          {"strength", g.strength},
          {"seed", g.seed},
          {"batch_count", g.batch_count},
          {"sample_params",
           {{"scheduler",
             scheduler == SCHEDULER_COUNT ? json("default") : json(sd_scheduler_name(scheduler))},
            {"sample_method",
             method == SAMPLE_METHOD_COUNT ? json("default") : json(sd_sample_method_name(method))},
            {"sample_steps", g.sample_params.sample_steps},
            {"guidance", {{"txt_cfg", g.sample_params.guidance.txt_cfg}}}}},
          {"output_format", "png"},
          {"output_compression", 100}};
}

json capabilities(const ServerState& s) {
  json samplers = json::array(), schedulers = json::array();
  for (int i = 0; i < SAMPLE_METHOD_COUNT; ++i)
    samplers.push_back(sd_sample_method_name(sample_method_t(i)));
  for (int i = 0; i < SCHEDULER_COUNT; ++i) schedulers.push_back(sd_scheduler_name(scheduler_t(i)));
  // What every job offers, then what an image and a clip take.
  const json job_features = {{"lora", true},
                             {"vae_tiling", true},
                             {"cache", true},
                             {"cancel_queued", true},
                             {"cancel_generating", true},
                             {"progress", true},
                             {"events", true},
                             {"live_preview", s.live_preview != PREVIEW_NONE}};
  json features = {{"init_image", true},
                   {"mask_image", true},
                   {"control_image", !s.requests.context.control_net_path.empty()},
                   {"ip_adapter_image", false},
                   {"ref_images", true},
                   {"hires", true}};
  features.update(job_features);
  const json formats = {"png", "jpeg", "webp"};
  const json defaults = defaults_json(s);
  json upscalers = json::array();
  for (int i = 0; i < SD_HIRES_UPSCALER_COUNT; ++i)
    if (i != SD_HIRES_UPSCALER_MODEL)  // a model is named by its file, as below
      upscalers.push_back({{"name", sd_hires_upscaler_name(sd_hires_upscaler_t(i))}});
  for (const json& model : list_model_files(s.requests.context.hires_upscalers_dir))
    upscalers.push_back({{"name", model["path"]}});
  const std::string path = model_path(s);
  // A video model (Wan) serves vid_gen too; one frame of it is an image, as in sd-cli.
  const bool video = s.generator && s.generator->makes_video();
  json video_features = {
      {"init_image", true},
      {"end_image", true},
      {"control_frames", false},
      {"high_noise_sample_params", !s.requests.context.high_noise_diffusion_model_path.empty()}};
  video_features.update(job_features);
  const json video_formats = {"webm", "mp4", "avi", "webp"};
  json video_defaults = defaults;
  video_defaults["video_frames"] = s.requests.defaults.video_frames;
  video_defaults["fps"] = s.requests.defaults.fps;
  video_defaults["output_format"] = "webm";
  json modes = {"img_gen"}, defaults_by_mode = {{"img_gen", defaults}},
       formats_by_mode = {{"img_gen", formats}}, features_by_mode = {{"img_gen", features}};
  if (video) {
    modes.push_back("vid_gen");
    defaults_by_mode["vid_gen"] = video_defaults;
    formats_by_mode["vid_gen"] = video_formats;
    features_by_mode["vid_gen"] = video_features;
  }
  json fleet = nullptr;
  try {
    fleet = s.queue->fleet();
  } catch (const QueueUnavailable& e) {
    fleet = {{"queue", "postgresql"}, {"error", e.what()}};
  }
  return {{"fleet", fleet},
          {"model",
           {{"name", std::filesystem::path(path).filename().string()}, {"stem", file_stem(path)}}},
          {"current_mode", "img_gen"},
          {"supported_modes", modes},
          {"defaults", defaults},
          {"output_formats", formats},
          {"features", features},
          {"defaults_by_mode", defaults_by_mode},
          {"output_formats_by_mode", formats_by_mode},
          {"features_by_mode", features_by_mode},
          {"samplers", samplers},
          {"schedulers", schedulers},
          {"loras", list_loras(s)},
          {"upscalers", upscalers},
          {"limits",
           {{"min_width", 8},
            {"max_width", s.requests.max_image_side},
            {"min_height", 8},
            {"max_height", s.requests.max_image_side},
            {"max_batch_count", s.requests.max_batch},
            {"max_queue_size", s.queue->max_waiting()},
            {"max_event_streams", s.max_event_streams},
            {"max_body_bytes", static_cast<int64_t>(s.options->max_body_mb) << 20}}}};
}

// The parts of /v1/images/edits' multipart form.
std::vector<FormPart> read_form_parts(const Request& req) {
  const std::optional<std::string> boundary = multipart_boundary(req.header("Content-Type"));
  if (!boundary)
    throw BadRequest(
        "/v1/images/edits takes multipart/form-data with 'prompt' and 'image' "
        "fields (curl -F)");
  return parse_multipart(req.body, *boundary);
}

OpenAiForm read_edit_form(const std::vector<FormPart>& parts, int max_side) {
  OpenAiForm form;
  for (const FormPart& part : parts) {
    const std::string& name = part.name;
    if (name == "image" || name == "image[]") {
      if (form.images.size() == kMaxRequestImages)
        throw BadRequest("at most " + std::to_string(kMaxRequestImages) + " images per request");
      form.images.push_back(decode_image_bytes(part.content, name, max_side));
    } else if (name == "mask") {
      form.mask = decode_image_bytes(part.content, name, max_side);
    } else if (name == "n" || name == "output_compression") {
      char* end = nullptr;
      const long long v = std::strtoll(part.content.c_str(), &end, 10);
      if (part.content.empty() || *end != '\0')
        throw BadRequest("field '" + name + "' must be a whole number, got '" + part.content + "'");
      form.fields[name] = v;
    } else {
      form.fields[name] = part.content;
    }
  }
  if (form.images.empty())
    throw BadRequest("field 'image' is required: the image to edit, as a file part");
  return form;
}

// The edit form as a shared queue stores it: its text fields and the image files' bytes.
json edit_form_payload(const std::vector<FormPart>& parts, const OpenAiForm& form) {
  json images = json::array(), mask = nullptr;
  for (const FormPart& part : parts) {
    if (part.name == "image" || part.name == "image[]")
      images.push_back(base64_encode(part.content));
    if (part.name == "mask") mask = base64_encode(part.content);
  }
  return {{"api", "openai_edit"}, {"fields", form.fields}, {"images", images}, {"mask", mask}};
}

json openai_response(const JobState& job) {
  json data = json::array();
  for (const auto& image : job.result.images) data.push_back({{"b64_json", base64_encode(image)}});
  return {{"created", static_cast<int64_t>(std::time(nullptr))},
          {"output_format", job.result.output_format},
          {"data", data}};
}

json sdapi_response(const JobState& job, const json& body) {
  json images = json::array();
  for (const auto& image : job.result.images) images.push_back(base64_encode(image));
  json info = {{"all_seeds", job.result.seeds},
               {"seed", job.result.seeds.empty() ? json(nullptr) : json(job.result.seeds[0])},
               {"infotexts", job.result.infotexts}};
  return {{"images", images}, {"parameters", body}, {"info", info.dump()}};
}

bool authorized(const ServerState& s, const Request& req) {
  if (s.options->token.empty()) return true;
  const std::string header = req.header("Authorization");
  const std::string prefix = "Bearer ";
  if (header.compare(0, prefix.size(), prefix) != 0) return false;
  return rpc::same_secret(header.substr(prefix.size()), s.options->token);
}

}  // namespace

std::string model_path(const ServerState& s) {
  const cli::ContextOptions& c = s.requests.context;
  return c.model_path.empty() ? c.diffusion_model_path : c.model_path;
}

std::string model_name(const ServerState& s) {
  return file_stem(model_path(s));
}

void install_routes(HttpServer& svr, ServerState& s) {
  // CORS and the token, judged from the head before the body is read: a browser's
  // preflight carries no token.
  svr.set_gate([&s](const Request& req, Response& res) {
    RequestHeaders h{req.method, req.path, {}, {}, {}, {}, {}, {}};
    const std::pair<const char*, std::vector<std::string>*> wanted[] = {
        {"Host", &h.host},
        {"Origin", &h.origin},
        {"Content-Type", &h.content_type},
        {"Content-Length", &h.content_length},
        {"Transfer-Encoding", &h.transfer_encoding},
        {"Content-Encoding", &h.content_encoding}};
    for (const auto& [name, values] : wanted)
      for (size_t i = 0; i < req.header_count(name); ++i) values->push_back(req.header(name, i));
    if (const std::optional<Refusal> refusal = guard_request(*s.options, h)) {
      send_error(res, refusal->status, refusal->code, refusal->message);
      return true;
    }
    const std::string origin = req.header("Origin");
    const auto& allowed = s.options->allowed_origins;
    const bool origin_ok =
        !origin.empty() && std::find(allowed.begin(), allowed.end(), origin) != allowed.end();
    if (origin_ok) {
      res.set_header("Access-Control-Allow-Origin", origin);
      res.set_header("Vary", "Origin");
    }
    if (req.method == "OPTIONS") {
      if (!origin_ok) {
        send_error(res, 403, "forbidden",
                   "origin '" + origin +
                       "' may not call this server; start it with "
                       "--cors-origins " +
                       (origin.empty() ? "ORIGIN" : origin));
        return true;
      }
      res.set_header("Access-Control-Allow-Methods", "GET, POST, OPTIONS");
      res.set_header("Access-Control-Allow-Headers", "Authorization, Content-Type");
      res.set_header("Access-Control-Max-Age", "600");
      res.status = 204;
      return true;
    }
    if (req.path != "/" && !authorized(s, req)) {
      res.set_header("WWW-Authenticate", "Bearer");
      send_error(res, 401, "unauthorized",
                 "missing or wrong API token; send 'Authorization: Bearer TOKEN' with the "
                 "server's token");
      return true;
    }
    return false;
  });
  // Errors the HTTP layer answers itself (unknown path, body or head too large) get a JSON
  // body too.
  svr.set_error_filler([&s](const Request& req, Response& res, const std::string& what) {
    std::string message = what;
    if (res.status == 404) {
      message = "no endpoint " + req.method + " " + req.path + "; see GET /sdcpp/v1/capabilities";
    } else if (res.status == 413) {
      message = "the request body is larger than the server's limit of " +
                std::to_string(s.options->max_body_mb) + " MiB (--max-body-mb)";
    }
    send_error(res, res.status, code_for(res.status), message);
  });

  svr.route("GET", "/", [&s](const Request&, Response& res) {
    // The page talks to this server only, and is never framed (clickjacking).
    res.set_header("Content-Security-Policy",
                   "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; "
                   "img-src 'self' data: blob:; connect-src 'self'; frame-ancestors 'none'; "
                   "base-uri 'none'; form-action 'none'");
    res.set_header("X-Frame-Options", "DENY");
    res.set_header("X-Content-Type-Options", "nosniff");
    res.set_content(s.index_html, "text/html; charset=utf-8");
  });

  // OpenAI
  svr.route("GET", "/v1/models", guarded([&s](const Request&, Response& res) {
              send_json(res, 200,
                        {{"object", "list"},
                         {"data",
                          {{{"id", "sd-cpp-local"},
                            {"object", "model"},
                            {"owned_by", "local"},
                            {"name", model_name(s)}}}}});
            }));
  svr.route("POST", "/v1/images/generations", guarded([&s](const Request& req, Response& res) {
              OpenAiForm form;
              form.fields = parse_json_body(req.body);
              GenRequest r = parse_openai_request(form, s.requests);
              auto payload = [&form] { return json{{"api", "openai"}, {"body", form.fields}}; };
              if (auto job = submit(s, std::move(r), payload, res, true))
                send_json(res, 200, openai_response(*job));
            }));
  svr.route("POST", "/v1/images/edits", guarded([&s](const Request& req, Response& res) {
              const std::vector<FormPart> parts = read_form_parts(req);
              const OpenAiForm form =
                  read_edit_form(parts, max_input_side(s.requests.max_image_side));
              GenRequest r = parse_openai_request(form, s.requests);
              if (auto job = submit(
                      s, std::move(r), [&] { return edit_form_payload(parts, form); }, res, true))
                send_json(res, 200, openai_response(*job));
            }));

  // AUTOMATIC1111
  for (const bool img2img : {false, true}) {
    svr.route("POST", img2img ? "/sdapi/v1/img2img" : "/sdapi/v1/txt2img",
              guarded([&s, img2img](const Request& req, Response& res) {
                const json body = parse_json_body(req.body);
                GenRequest r = parse_sdapi_request(body, s.requests, img2img);
                const json echoed = sdapi_parameters(body, img2img);
                auto payload = [&] {
                  return json{{"api", "sdapi"}, {"img2img", img2img}, {"body", body}};
                };
                if (auto job = submit(s, std::move(r), payload, res, true))
                  send_json(res, 200, sdapi_response(*job, echoed));
              }));
  }
  svr.route("GET", "/sdapi/v1/loras",
            guarded([&s](const Request&, Response& res) { send_json(res, 200, list_loras(s)); }));
  svr.route("GET", "/sdapi/v1/upscalers", guarded([&s](const Request&, Response& res) {
              send_json(res, 200, list_upscalers(s));
            }));
  svr.route("GET", "/sdapi/v1/latent-upscale-modes", guarded([](const Request&, Response& res) {
              json out = json::array();
              for (int i = SD_HIRES_UPSCALER_LATENT;
                   i <= SD_HIRES_UPSCALER_LATENT_BICUBIC_ANTIALIASED; ++i)
                out.push_back({{"name", sd_hires_upscaler_name(sd_hires_upscaler_t(i))}});
              send_json(res, 200, out);
            }));
  svr.route("GET", "/sdapi/v1/samplers",
            guarded([](const Request&, Response& res) { send_json(res, 200, list_samplers()); }));
  svr.route("GET", "/sdapi/v1/schedulers",
            guarded([](const Request&, Response& res) { send_json(res, 200, list_schedulers()); }));
  svr.route("GET", "/sdapi/v1/sd-models", guarded([&s](const Request&, Response& res) {
              const std::string path = model_path(s);
              send_json(res, 200,
                        json::array({{{"title", file_stem(path)},
                                      {"model_name", file_stem(path)},
                                      {"filename", std::filesystem::path(path).filename().string()},
                                      {"hash", ""},
                                      {"sha256", ""},
                                      {"config", nullptr}}}));
            }));
  svr.route(
      "GET", "/sdapi/v1/options", guarded([&s](const Request&, Response& res) {
        send_json(res, 200, {{"samples_format", "png"}, {"sd_model_checkpoint", model_name(s)}});
      }));

  // Native, asynchronous
  svr.route("GET", "/sdcpp/v1/capabilities",
            guarded([&s](const Request&, Response& res) { send_json(res, 200, capabilities(s)); }));
  // An image or a clip as an asynchronous job: 202 with where to follow it.
  auto native_job = [&s](const char* api, GenRequest (*parse)(const json&, const RequestContext&)) {
    return guarded([&s, api, parse](const Request& req, Response& res) {
      const json body = parse_json_body(req.body);
      GenRequest r = parse(body, s.requests);
      auto payload = [&body, api] { return json{{"api", api}, {"body", body}}; };
      if (auto job = submit(s, std::move(r), payload, res, false)) {
        send_json(res, 202,
                  {{"id", job->id},
                   {"kind", job->kind},
                   {"status", job_status_name(job->status)},
                   {"created", job->created},
                   {"queue_position", job->queue_position},
                   {"poll_url", "/sdcpp/v1/jobs/" + job->id},
                   {"events_url", "/sdcpp/v1/jobs/" + job->id + "/events"}});
      }
    });
  };
  svr.route("POST", "/sdcpp/v1/img_gen", native_job("native", parse_native_request));
  svr.route("POST", "/sdcpp/v1/vid_gen", native_job("native_video", parse_native_video_request));
  static const char* kUnknownJob =
      "no job '%s' (finished jobs are kept for the last --job-history jobs, or --keep-results "
      "on a shared queue)";
  auto unknown_job = [](Response& res, const std::string& id) {
    send_error(res, 404, "not_found", format(kUnknownJob, id.c_str()));
  };
  svr.route("GET", R"(/sdcpp/v1/jobs/([A-Za-z0-9_\-]+))",
            guarded([&s, unknown_job](const Request& req, Response& res) {
              const std::string id = req.matches[1];
              const std::optional<JobState> job = s.queue->find(id);
              if (!job) return unknown_job(res, id);
              send_json(res, 200, job_json(*job, true));
            }));
  svr.route("POST", R"(/sdcpp/v1/jobs/([A-Za-z0-9_\-]+)/cancel)",
            guarded([&s, unknown_job](const Request& req, Response& res) {
              const std::string id = req.matches[1];
              switch (s.queue->cancel(id)) {
                case Jobs::CancelOutcome::NotFound:
                  return unknown_job(res, id);
                case Jobs::CancelOutcome::AlreadyFinished:
                  send_error(res, 409, "conflict", "job '" + id + "' has already finished");
                  return;
                default:
                  break;
              }
              const std::optional<JobState> job = s.queue->find(id);
              if (!job) return unknown_job(res, id);  // swept in between
              send_json(res, 200, job_json(*job, false));
            }));
  // The latest live preview of a running job, as a PNG.
  svr.route("GET", R"(/sdcpp/v1/jobs/([A-Za-z0-9_\-]+)/preview)",
            guarded([&s, unknown_job](const Request& req, Response& res) {
              const std::string id = req.matches[1];
              const std::optional<JobState> job = s.queue->find(id);
              if (!job) return unknown_job(res, id);
              if (!job->preview.png || job->status != JobStatus::Generating) {
                send_error(res, 404, "not_found",
                           "job '" + id +
                               "' has no live preview (none yet, the job is not running, or "
                               "the server runs with --preview none)");
                return;
              }
              res.set_header("Cache-Control", "no-store");
              res.set_content(*job->preview.png, "image/png");
            }));
  // Server-Sent Events: one "progress" event per change, then "done" with the result.
  svr.route("GET", R"(/sdcpp/v1/jobs/([A-Za-z0-9_\-]+)/events)",
            guarded([&s, unknown_job](const Request& req, Response& res) {
              const std::string id = req.matches[1];
              if (!s.queue->find(id)) return unknown_job(res, id);
              if (s.event_streams.fetch_add(1) >= s.max_event_streams) {
                --s.event_streams;
                res.set_header("Retry-After", "5");
                send_error(res, 503, "too_many_streams",
                           std::to_string(s.max_event_streams) +
                               " event streams are open, the most this server keeps; poll GET "
                               "/sdcpp/v1/jobs/" +
                               id + " instead");
                return;
              }
              // The stream's place is given back when its provider is gone, however it ends.
              struct StreamPlace {
                explicit StreamPlace(std::atomic<int>& open) : open(open) {}
                StreamPlace(const StreamPlace&) = delete;
                ~StreamPlace() { --open; }
                std::atomic<int>& open;
              };
              auto place = std::make_shared<StreamPlace>(s.event_streams);
              auto version = std::make_shared<uint64_t>(~uint64_t{0});
              res.set_header("Cache-Control", "no-cache");
              // The stream runs on a thread of its own; each call sends what changed.
              res.set_stream("text/event-stream", [&s, id, version, place](StreamSink& sink) {
                std::optional<JobState> job;
                try {
                  job = s.queue->wait_changed(id, *version, 1000);
                } catch (const QueueUnavailable&) {
                  // The shared queue's database is away: keep the stream, say so.
                  std::this_thread::sleep_for(std::chrono::seconds(1));
                  return sink.write(": queue database unavailable\n\n");
                }
                if (!job || s.stopping) return false;
                const bool done = job->status == JobStatus::Completed ||
                                  job->status == JobStatus::Failed ||
                                  job->status == JobStatus::Cancelled;
                std::string event;
                if (job->version == *version) {
                  event = ": waiting\n\n";  // keeps proxies from closing an idle stream
                } else {
                  event = std::string("event: ") + (done ? "done" : "progress") +
                          "\ndata: " + job_json(*job, done).dump() + "\n\n";
                }
                *version = job->version;
                return sink.write(event) && !done;
              });
            }));
}

}  // namespace sd::server
