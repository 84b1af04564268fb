// sd_cancel_generation's state for one context, as sd.cpp's modes mean it: ALL stops the
// running generation at its next model call; NEW_LATENTS lets the image being sampled
// finish (and be decoded) but starts no more; RESET withdraws a request not yet acted on.
// A new generation starts with nothing requested.
#pragma once

#include <atomic>

#include "stable-diffusion.h"

namespace sd::api {

class Cancellation {
 public:
  void request(sd_cancel_mode_t mode) {
    switch (mode) {
      case SD_CANCEL_ALL:
        all_ = true;
        break;
      case SD_CANCEL_NEW_LATENTS:
        new_latents_ = true;
        break;
      case SD_CANCEL_RESET:
        reset();
        break;
    }
  }
  void reset() {
    all_ = false;
    new_latents_ = false;
  }
  // Stop now, mid-image.
  bool stop_now() const { return all_.load(); }
  // Start no further image of the batch.
  bool stop_new_images() const { return all_.load() || new_latents_.load(); }

 private:
  std::atomic<bool> all_{false};
  std::atomic<bool> new_latents_{false};
};

}  // namespace sd::api
