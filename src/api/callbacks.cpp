// The callback registry behind sd_set_*_callback. One lock guards the registrations so a
// binding may swap callbacks while another thread generates.
#include "api/callbacks.h"

#include <cstdio>
#include <mutex>
#include <string>
#include <vector>

#include "tensor/error.h"

namespace sd::api {
namespace {

struct Registry {
  std::mutex mutex;
  sd_log_cb_t log = nullptr;
  void* log_data = nullptr;
  sd_progress_cb_t progress = nullptr;
  void* progress_data = nullptr;
  PreviewRequest preview;
};

Registry& registry() {
  static Registry r;
  return r;
}

constexpr int kBarWidth = 50;

}  // namespace

void vlog(sd_log_level_t level, const char* fmt, va_list args) {
  sd_log_cb_t callback;
  void* data;
  {
    std::lock_guard<std::mutex> lock(registry().mutex);
    callback = registry().log;
    data = registry().log_data;
  }
  if (!callback) return;
  va_list measure;
  va_copy(measure, args);
  const int n = std::vsnprintf(nullptr, 0, fmt, measure);
  va_end(measure);
  if (n < 0) return;
  std::string text(static_cast<size_t>(n) + 1, '\0');
  std::vsnprintf(text.data(), text.size(), fmt, args);
  text.resize(static_cast<size_t>(n));
  // Messages quote names and text from files; one line each, nothing the terminal runs.
  if (!text.empty() && text.back() == '\n') text.pop_back();
  text = escape_control_chars(text) + '\n';
  callback(level, text.c_str(), data);
}

void log(sd_log_level_t level, const char* fmt, ...) {
  va_list args;
  va_start(args, fmt);
  vlog(level, fmt, args);
  va_end(args);
}

std::string progress_line(int step, int steps, float seconds) {
  if (step <= 0 || steps <= 0) return "";
  // sd.cpp's bar: '=' up to the current cell, a '>' head on it (except in the last cell).
  const int current = static_cast<int>(step * 1.f * kBarWidth / steps);
  std::string bar = "  |";
  for (int i = 0; i < kBarWidth; ++i) {
    bar += i > current ? ' ' : (i == current && i != kBarWidth - 1 ? '>' : '=');
  }
  bar += "|";
  // Under a second per step reads better as a rate.
  const bool rate = seconds > 0.f && seconds < 1.f;
  char speed[64];
  std::snprintf(speed, sizeof speed, "%.2f%s", rate ? 1.f / seconds : seconds,
                rate ? "it/s" : "s/it");
  return bar + " " + std::to_string(step) + "/" + std::to_string(steps) + " - " + speed;
}

void progress(int step, int steps, float seconds) {
  sd_progress_cb_t callback;
  void* data;
  {
    std::lock_guard<std::mutex> lock(registry().mutex);
    callback = registry().progress;
    data = registry().progress_data;
  }
  if (callback) {
    callback(step, steps, seconds, data);
    return;
  }
  const std::string line = progress_line(step, steps, seconds);
  if (line.empty()) return;
  // "\033[K" clears what a longer previous line left behind.
  std::printf("\r%s\033[K%s", line.c_str(), step >= steps ? "\n" : "");
  std::fflush(stdout);
}

PreviewRequest preview_request() {
  std::lock_guard<std::mutex> lock(registry().mutex);
  return registry().preview;
}

bool preview_due(int step) {
  const PreviewRequest r = preview_request();
  if (!r.callback || r.mode == PREVIEW_NONE) return false;
  const int interval = r.interval > 0 ? r.interval : 1;
  return step % interval == 0;
}

void send_preview(int step, int frame_count, sd_image_t* frames, bool is_noisy) {
  const PreviewRequest r = preview_request();
  if (r.callback) r.callback(step, frame_count, frames, is_noisy, r.data);
}

}  // namespace sd::api

extern "C" {

void sd_set_log_callback(sd_log_cb_t cb, void* data) {
  auto& r = sd::api::registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  r.log = cb;
  r.log_data = data;
}

void sd_set_progress_callback(sd_progress_cb_t cb, void* data) {
  auto& r = sd::api::registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  r.progress = cb;
  r.progress_data = data;
}

void sd_set_preview_callback(sd_preview_cb_t cb, enum preview_t mode, int interval, bool denoised,
                             bool noisy, void* data) {
  auto& r = sd::api::registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  r.preview = {cb, mode, interval, denoised, noisy, data};
}

void sd_set_backend_eval_callback(sd_graph_eval_callback_t cb, void* data) {
  // There are no ggml graphs to observe; say so rather than never calling back.
  if (cb) {
    sd::api::log(SD_LOG_WARN,
                 "sd_set_backend_eval_callback: this engine does not evaluate ggml graphs; "
                 "the callback will not be called");
  }
}

}  // extern "C"
