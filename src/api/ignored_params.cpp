#include "api/ignored_params.h"

#include <cmath>
#include <mutex>
#include <set>

#include "api/callbacks.h"

namespace sd::api {

namespace {

bool given(const char* s) {
  return s && *s;
}

}  // namespace

std::vector<IgnoredFlag> ignored_flags(const sd_img_gen_params_t& p) {
  sd_img_gen_params_t d;
  sd_img_gen_params_init(&d);
  std::vector<IgnoredFlag> out;
  auto add_if = [&](bool differs, const char* flag, const char* what) {
    if (differs) out.push_back({flag, what});
  };
  // --img-cfg-scale is used by inpainting and instruct-pix2pix models; the pipeline warns
  // for models without an image input.
  // --slg-scale is used by SD3's MMDiT; the pipeline warns for models without it.
  add_if(given(p.vae_tiling_params.extra_tiling_args), "--extra-tiling-args",
         "extra VAE tiling arguments");
  add_if(p.vae_tiling_params.temporal_tiling, "--temporal-tiling", "tiling over video frames");
  add_if(p.qwen_image_layers != d.qwen_image_layers, "--qwen-image-layers",
         "Qwen-Image-Layered outputs");
  return out;
}

void warn_ignored_flags(const sd_img_gen_params_t& p) {
  static std::mutex mutex;
  static std::set<std::string> warned;
  for (const IgnoredFlag& f : ignored_flags(p)) {
    {
      std::lock_guard<std::mutex> lock(mutex);
      if (!warned.insert(f.flag).second) continue;
    }
    log(SD_LOG_WARN, "%s (%s) is not used by this build yet; ignored", f.flag, f.what);
  }
}

}  // namespace sd::api
