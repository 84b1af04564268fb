// Entry points of the C API for features this engine does not have yet. They exist so
// that programs and bindings written for sd.cpp link and run; each call says what is
// missing through the log callback and fails the way sd.cpp reports failure (NULL,
// false, 0), never by crashing. A feature that lands moves out of this file.
#include "api/callbacks.h"
#include "stable-diffusion.h"

namespace {

void unavailable(const char* function, const char* feature) {
  sd::api::log(SD_LOG_ERROR, "%s: %s is not supported by this build yet", function, feature);
}

}  // namespace

extern "C" {

adetailer_ctx_t* new_adetailer_ctx(const char*, int, const char*, const char*) {
  unavailable("new_adetailer_ctx", "ADetailer");
  return nullptr;
}

void free_adetailer_ctx(adetailer_ctx_t*) {}

bool adetail_image(adetailer_ctx_t*, sd_ctx_t*, sd_image_t, const sd_adetailer_params_t*,
                   const sd_img_gen_params_t*, sd_image_t** images_out, int* num_images_out) {
  if (images_out) *images_out = nullptr;
  if (num_images_out) *num_images_out = 0;
  unavailable("adetail_image", "ADetailer");
  return false;
}

bool load_imatrix(const char*) {
  unavailable("load_imatrix", "importance-matrix quantization");
  return false;
}

void save_imatrix(const char*) {
  unavailable("save_imatrix", "importance-matrix collection");
}

void enable_imatrix_collection(void) {
  unavailable("enable_imatrix_collection", "importance-matrix collection");
}

void disable_imatrix_collection(void) {}

}  // extern "C"
