// The one loaded model behind the server: a C API context made from sd-cli's options once
// at start, and the call that turns a request into encoded images. Used by the job queue's
// worker only, one request at a time (the C API's progress callback is process-wide).
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <string>

#include "cli/args.h"
#include "cli/input_images.h"
#include "io/image.h"
#include "io/video.h"
#include "server/job_queue.h"
#include "stable-diffusion.h"

namespace sd::server {

// One request, checked and with its input images decoded.
struct GenRequest {
  cli::GenerationOptions generation;  // resolved and validated
  cli::InputImages images;            // a video's first frame is `init`, its last `end`
  io::ImageFormat format = io::ImageFormat::Png;
  int quality = 90;  // JPEG and WebP; a video's encoder quality
  // A video (POST /sdcpp/v1/vid_gen): one clip of generation.video_frames frames, encoded as
  // one container.
  bool video = false;
  io::VideoFormat video_format = io::VideoFormat::Webm;
};

class Generator {
 public:
  // Loads the model as sd-cli would for `args` (resolved). Throws sd::Error when the
  // context cannot be created.
  explicit Generator(const cli::Arguments& args) : Generator(args, PREVIEW_NONE) {}
  ~Generator();

  // `live_preview`: the --preview mode for jobs' live previews (PREVIEW_NONE: none).
  Generator(const cli::Arguments& args, preview_t live_preview);

  JobResult run(GenRequest& request, const JobReporter& report);
  // Why the loaded model would refuse `request` ("" when it takes it): the checks a run
  // makes before any work. Any thread, also while another request runs.
  std::string check(const GenRequest& request) const;
  // Stops the generation in progress at its next model call; any thread.
  void cancel();

  // Whether the loaded model makes video clips (Wan).
  bool makes_video() const;
  sample_method_t default_sample_method() const { return default_method_; }
  scheduler_t default_scheduler(sample_method_t method) const;
  const cli::ContextOptions& context() const { return args_.context; }

 private:
  JobResult run_video(GenRequest& request);
  static void on_progress(int step, int steps, float seconds, void* data);
  static void on_preview(int step, int frame_count, sd_image_t* frames, bool is_noisy, void* data);
  static void on_log(sd_log_level_t level, const char* text, void* data);

  cli::Arguments args_;
  sd_ctx_t* ctx_ = nullptr;
  sample_method_t default_method_ = SAMPLE_METHOD_COUNT;
  const JobReporter* report_ = nullptr;  // of the request running now
  std::atomic<bool> preview_failed_{false};
  std::mutex error_mutex_;
  std::string last_error_;  // the engine's last error message in this request
};

}  // namespace sd::server
