// The process-wide callbacks of the C API (sd_set_log_callback, sd_set_progress_callback,
// sd_set_preview_callback), seen from inside the library: code that generates images logs
// and reports progress through these functions, and C entry points run their bodies in
// c_boundary so that no exception crosses into C.
#pragma once

#include <cstdarg>
#include <exception>
#include <string>
#include <utility>

#include "stable-diffusion.h"

namespace sd::api {

// Formats like printf and hands the text, ending in '\n', to the log callback; without a
// callback the message is dropped (sd.cpp compatibility: the library never prints logs
// on its own).
void log(sd_log_level_t level, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
void vlog(sd_log_level_t level, const char* fmt, va_list args);

// `step` of `steps` done, `seconds` per step so far. With a progress callback it is
// called; without one a bar is drawn on stdout, as sd.cpp does.
void progress(int step, int steps, float seconds);

// sd.cpp's progress line: "  |=====>     | 3/20 - 1.52s/it" (it/s under one second per
// step); no line for step 0.
std::string progress_line(int step, int steps, float seconds);

// What sd_set_preview_callback asked for; callback == nullptr or mode == PREVIEW_NONE:
// no previews.
struct PreviewRequest {
  sd_preview_cb_t callback = nullptr;
  preview_t mode = PREVIEW_NONE;
  int interval = 1;      // every `interval` steps
  bool denoised = true;  // preview the denoised prediction
  bool noisy = false;    // preview the noisy latent
  void* data = nullptr;
};
PreviewRequest preview_request();
// Whether a preview is due after `step` (1-based).
bool preview_due(int step);
void send_preview(int step, int frame_count, sd_image_t* frames, bool is_noisy);

// Runs `body` for a C entry point: an exception becomes an SD_LOG_ERROR message
// "<what>: <reason>" and the call returns `on_error`.
//   return c_boundary("generate_image", false, [&] { ...; return true; });
template <class R, class F>
R c_boundary(const char* what, R on_error, F&& body) noexcept {
  try {
    return std::forward<F>(body)();
  } catch (const std::exception& e) {
    log(SD_LOG_ERROR, "%s: %s", what, e.what());
  } catch (...) {
    log(SD_LOG_ERROR, "%s: unknown error", what);
  }
  return on_error;
}

}  // namespace sd::api
