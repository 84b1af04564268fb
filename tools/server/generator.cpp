#include "server/generator.h"

#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "cli/cli_log.h"
#include "cli/image_params.h"
#include "tensor/error.h"

namespace sd::server {

namespace {

struct ImagesDeleter {
  int count;
  void operator()(sd_image_t* images) const { free_sd_images(images, count); }
};

const char* video_format_name(io::VideoFormat format) {
  switch (format) {
    case io::VideoFormat::Mp4:
      return "mp4";
    case io::VideoFormat::Avi:
      return "avi";
    case io::VideoFormat::AnimatedWebp:
      return "webp";
    default:
      return "webm";
  }
}

const char* format_name(io::ImageFormat format) {
  switch (format) {
    case io::ImageFormat::Jpeg:
      return "jpeg";
    case io::ImageFormat::Webp:
      return "webp";
    default:
      return "png";
  }
}

}  // namespace

Generator::Generator(const cli::Arguments& args, preview_t live_preview) : args_(args) {
  sd_set_log_callback(on_log, this);
  sd_set_progress_callback(on_progress, this);
  if (live_preview != PREVIEW_NONE) {
    const cli::CliOptions& c = args_.cli;
    sd_set_preview_callback(on_preview, live_preview, std::max(1, c.preview_interval),
                            !c.preview_noisy, c.preview_noisy, this);
  }
  sd_ctx_params_t params = args_.context.to_c_params(args_.cli.taesd_preview_only);
  ctx_ = new_sd_ctx(&params);
  SD_CHECK(ctx_, "could not load the model (see the messages above)");
  default_method_ = sd_get_default_sample_method(ctx_);
}

Generator::~Generator() {
  if (ctx_) free_sd_ctx(ctx_);
}

scheduler_t Generator::default_scheduler(sample_method_t method) const {
  return sd_get_default_scheduler(ctx_, method);
}

void Generator::on_progress(int step, int steps, float seconds, void* data) {
  auto* self = static_cast<Generator*>(data);
  if (self->report_ && self->report_->progress) self->report_->progress(step, steps, seconds);
}

void Generator::on_preview(int step, int frame_count, sd_image_t* frames, bool, void* data) {
  auto* self = static_cast<Generator*>(data);
  if (!self->report_ || !self->report_->preview || frame_count < 1 || !frames || !frames[0].data)
    return;
  try {
    const std::vector<uint8_t> png =
        io::encode_image(cli::to_image(frames[0]), io::ImageFormat::Png, "");
    self->report_->preview(step, std::string(png.begin(), png.end()));
  } catch (const std::exception& e) {
    // A preview that cannot be encoded costs the client a picture, not the job; said once.
    if (!self->preview_failed_.exchange(true))
      cli::print_log(SD_LOG_WARN,
                     (std::string("live previews skipped: ") + e.what() + "\n").c_str());
  }
}

void Generator::on_log(sd_log_level_t level, const char* text, void* data) {
  auto* self = static_cast<Generator*>(data);
  if (level == SD_LOG_ERROR) {
    std::lock_guard<std::mutex> lock(self->error_mutex_);
    self->last_error_ = text;
    while (!self->last_error_.empty() && self->last_error_.back() == '\n')
      self->last_error_.pop_back();
  }
  cli::print_log(level, text);
}

void Generator::cancel() {
  if (ctx_) sd_cancel_generation(ctx_, SD_CANCEL_ALL);
}

bool Generator::makes_video() const {
  return sd_ctx_supports_video_generation(ctx_);
}

std::string Generator::check(const GenRequest& request) const {
  if (request.video && !makes_video())
    return "the server's model makes images, not video: use POST /sdcpp/v1/img_gen";
  // to_c_params points into the options it is called on: a copy of this request's.
  cli::GenerationOptions generation = request.generation;
  cli::InputImages images = request.images;
  char* problem = nullptr;
  if (request.video) {
    sd_vid_gen_params_t params = generation.to_vid_c_params();
    cli::attach_video_images(images, params);
    problem = sd_vid_gen_params_check(ctx_, &params);
  } else {
    sd_img_gen_params_t params = generation.to_c_params();
    cli::attach_input_images(images, params);
    problem = sd_img_gen_params_check(ctx_, &params);
  }
  if (!problem) return "";
  std::string text = problem;
  std::free(problem);
  return text;
}

JobResult Generator::run(GenRequest& r, const JobReporter& report) {
  cli::GenerationOptions& g = r.generation;
  // Resolved here as sd-cli resolves them, so the embedded parameters name what was used.
  if (g.sample_params.sample_method == SAMPLE_METHOD_COUNT)
    g.sample_params.sample_method = default_method_;
  if (g.sample_params.scheduler == SCHEDULER_COUNT)
    g.sample_params.scheduler = default_scheduler(g.sample_params.sample_method);
  {
    std::lock_guard<std::mutex> lock(error_mutex_);
    last_error_.clear();
  }
  report_ = &report;
  preview_failed_ = false;
  if (r.video) {
    struct Done {
      const JobReporter*& report;
      ~Done() { report = nullptr; }
    } done{report_};
    return run_video(r);
  }
  sd_img_gen_params_t params = g.to_c_params();
  cli::attach_input_images(r.images, params);
  sd_image_t* images = nullptr;
  int count = 0;
  const bool ok = generate_image(ctx_, &params, &images, &count);
  report_ = nullptr;
  std::unique_ptr<sd_image_t, ImagesDeleter> owned(images, ImagesDeleter{count});
  if (!ok || !images || count <= 0) {
    std::lock_guard<std::mutex> lock(error_mutex_);
    fail("generation failed: %s",
         last_error_.empty() ? "the engine returned no image" : last_error_.c_str());
  }

  JobResult result;
  result.output_format = format_name(r.format);
  // A batch may hold several images per seed (layered models), as sd-cli numbers them.
  const int per_seed = g.batch_count > 0 ? std::max(1, count / g.batch_count) : 1;
  for (int i = 0; i < count; ++i) {
    if (!images[i].data) continue;
    const int64_t seed = g.seed + i / per_seed;
    const std::string parameters = cli::image_parameters(args_.context, g, seed, cli::Mode::ImgGen);
    const std::vector<uint8_t> bytes = io::encode_image(
        cli::to_image(images[i]), r.format, g.embed_image_metadata ? parameters : "", r.quality);
    result.images.emplace_back(bytes.begin(), bytes.end());
    result.seeds.push_back(seed);
    result.infotexts.push_back(parameters);
  }
  SD_CHECK(!result.images.empty(), "generation failed: the engine returned no image");
  return result;
}

JobResult Generator::run_video(GenRequest& r) {
  cli::GenerationOptions& g = r.generation;
  sd_vid_gen_params_t params = g.to_vid_c_params();
  cli::attach_video_images(r.images, params);
  sd_image_t* frames = nullptr;
  int count = 0;
  const bool ok = generate_video(ctx_, &params, &frames, &count, nullptr);
  std::unique_ptr<sd_image_t, ImagesDeleter> owned(frames, ImagesDeleter{count});
  if (!ok || !frames || count <= 0) {
    std::lock_guard<std::mutex> lock(error_mutex_);
    fail("generation failed: %s",
         last_error_.empty() ? "the engine returned no frame" : last_error_.c_str());
  }
  std::vector<io::Image> clip;
  for (int i = 0; i < count; ++i) clip.push_back(cli::to_image(frames[i]));
  owned.reset();

  // The container is written whole to a private temporary file (the muxers seek), read
  // back and removed.
  const std::string parameters = cli::image_parameters(args_.context, g, g.seed, cli::Mode::VidGen);
  io::VideoOptions options;
  options.fps = g.fps;
  options.quality = r.quality;
  if (g.embed_image_metadata) options.parameters = parameters;
  JobResult result;
  result.output_format = video_format_name(r.video_format);
  const std::filesystem::path path =
      std::filesystem::temp_directory_path() /
      ("sd-server-" + new_job_id() + "." +
       (r.video_format == io::VideoFormat::AnimatedWebp ? std::string("webp")
                                                        : result.output_format));
  struct Remove {
    const std::filesystem::path& path;
    ~Remove() {
      std::error_code ec;
      std::filesystem::remove(path, ec);
    }
  } remove{path};
  io::write_video(path.string(), clip, options);
  std::ifstream in(path, std::ios::binary);
  SD_CHECK(in, "could not read back the encoded video %s", path.string().c_str());
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  result.images.push_back(std::move(bytes));
  result.seeds.push_back(g.seed);
  result.infotexts.push_back(parameters);
  result.fps = g.fps;
  result.frame_count = count;
  return result;
}

}  // namespace sd::server
