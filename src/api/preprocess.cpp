// preprocess_canny: the canny preprocessor for ControlNet control images, in place
// (pipeline/canny.h).
#include "api/callbacks.h"
#include "pipeline/canny.h"
#include "stable-diffusion.h"
#include "tensor/error.h"

extern "C" {

bool preprocess_canny(sd_image_t image, float high_threshold, float low_threshold, float weak,
                      float strong, bool inverse) {
  return sd::api::c_boundary("preprocess_canny", false, [&] {
    SD_CHECK(image.data && image.width > 0 && image.height > 0, "the image is empty");
    SD_CHECK(image.channel >= 3, "the image has %u channels; the canny preprocessor needs RGB",
             image.channel);
    sd::pipeline::CannyParams p{high_threshold, low_threshold, weak, strong, inverse};
    sd::pipeline::canny_edges(image.data, static_cast<int>(image.width),
                              static_cast<int>(image.height), static_cast<int>(image.channel), p);
    return true;
  });
}

}  // extern "C"
