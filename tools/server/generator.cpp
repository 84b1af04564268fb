#include "server/generator.h"

#include <cstdio>
#include <cstdlib>
#include <ctime>

#include "cli/cli_log.h"
#include "cli/image_params.h"
#include "tensor/error.h"

namespace sd::server {

namespace {

struct ImagesDeleter {
  int count;
  void operator()(sd_image_t* images) const { free_sd_images(images, count); }
};

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

Generator::Generator(const cli::Arguments& args) : args_(args) {
  sd_set_log_callback(on_log, this);
  sd_set_progress_callback(on_progress, this);
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
  if (self->progress_ && *self->progress_) (*self->progress_)(step, steps, seconds);
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

JobResult Generator::run(GenRequest& r, const ProgressFn& progress) {
  cli::GenerationOptions& g = r.generation;
  // Resolved here as sd-cli resolves them, so the embedded parameters name what was used.
  if (g.sample_params.sample_method == SAMPLE_METHOD_COUNT)
    g.sample_params.sample_method = default_method_;
  if (g.sample_params.scheduler == SCHEDULER_COUNT)
    g.sample_params.scheduler = default_scheduler(g.sample_params.sample_method);
  sd_img_gen_params_t params = g.to_c_params();
  cli::attach_input_images(r.images, params);
  {
    std::lock_guard<std::mutex> lock(error_mutex_);
    last_error_.clear();
  }
  progress_ = &progress;
  sd_image_t* images = nullptr;
  int count = 0;
  const bool ok = generate_image(ctx_, &params, &images, &count);
  progress_ = nullptr;
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

}  // namespace sd::server
