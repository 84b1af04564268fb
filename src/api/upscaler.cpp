// upscaler_ctx_t: the C API's ESRGAN upscaler over pipeline::Upscaler, with sd.cpp's
// semantics: a context loads one model (NULL after logging why when it cannot), upscale()
// returns one image `get_upscale_factor()` times larger and ignores the factor it is
// given (the model's own scale decides), and every failure is logged and returned as
// false, never thrown or crashed.
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>

#include "api/callbacks.h"
#include "pipeline/upscaler.h"
#include "stable-diffusion.h"
#include "tensor/dtype.h"
#include "tensor/error.h"

struct upscaler_ctx_t {
  std::unique_ptr<sd::pipeline::Upscaler> upscaler;
};

extern "C" {

upscaler_ctx_t* new_upscaler_ctx(const char* esrgan_path, bool direct, int n_threads, int tile_size,
                                 const char* backend, const char* params_backend) {
  return new_upscaler_ctx_with_type(esrgan_path, direct, n_threads, tile_size, backend,
                                    params_backend, SD_TYPE_COUNT);
}

upscaler_ctx_t* new_upscaler_ctx_with_type(const char* esrgan_path, bool direct, int n_threads,
                                           int tile_size, const char* backend,
                                           const char* params_backend, enum sd_type_t wtype) {
  return sd::api::c_boundary("new_upscaler_ctx", static_cast<upscaler_ctx_t*>(nullptr), [&] {
    SD_CHECK(esrgan_path && *esrgan_path, "no upscaler model given");
    sd::pipeline::UpscalerOptions o;
    o.model = esrgan_path;
    o.threads = n_threads > 0 ? n_threads : 0;
    o.tile_size = tile_size;
    o.backend = backend ? backend : "";
    o.params_backend = params_backend ? params_backend : "";
    if (wtype != SD_TYPE_COUNT) {
      const char* name = sd_type_name(wtype);
      o.weight_type = name ? sd::dtype_from_name(name) : std::nullopt;
      SD_CHECK(o.weight_type.has_value(), "weight type %d is not supported",
               static_cast<int>(wtype));
    }
    // `direct` asks sd.cpp for direct convolutions; the CPU backend picks its kernels itself.
    (void)direct;
    auto ctx = std::make_unique<upscaler_ctx_t>();
    ctx->upscaler = std::make_unique<sd::pipeline::Upscaler>(o);
    const sd::models::EsrganConfig& c = ctx->upscaler->config();
    sd::api::log(SD_LOG_INFO,
                 "upscaler: ESRGAN x%d, %d blocks, %lld features, growth %lld (%s), tile size %d",
                 c.scale(), c.num_block, static_cast<long long>(c.num_feat),
                 static_cast<long long>(c.num_grow_ch), ctx->upscaler->placement().c_str(),
                 tile_size);
    return ctx.release();
  });
}

void free_upscaler_ctx(upscaler_ctx_t* upscaler_ctx) {
  delete upscaler_ctx;
}

bool upscale(upscaler_ctx_t* upscaler_ctx, sd_image_t input_image, uint32_t upscale_factor,
             sd_image_t** images_out, int* num_images_out) {
  if (images_out) *images_out = nullptr;
  if (num_images_out) *num_images_out = 0;
  (void)upscale_factor;  // sd.cpp compatibility: the model's scale decides
  return sd::api::c_boundary("upscale", false, [&] {
    SD_CHECK(upscaler_ctx && upscaler_ctx->upscaler, "no upscaler context");
    SD_CHECK(input_image.data && input_image.width > 0 && input_image.height > 0 &&
                 (input_image.channel == 1 || input_image.channel == 3 || input_image.channel == 4),
             "the input image must have a size and 1, 3 or 4 channels of 8-bit pixels");
    sd::io::Image in;
    in.width = static_cast<int>(input_image.width);
    in.height = static_cast<int>(input_image.height);
    in.channels = static_cast<int>(input_image.channel);
    in.pixels.assign(input_image.data, input_image.data + in.size());
    const int s = upscaler_ctx->upscaler->scale();
    sd::api::log(SD_LOG_INFO, "upscaling from (%d x %d) to (%d x %d)", in.width, in.height,
                 in.width * s, in.height * s);
    const auto start = std::chrono::steady_clock::now();
    const sd::io::Image out = upscaler_ctx->upscaler->upscale(in);
    sd::api::log(SD_LOG_INFO, "upscaled, taking %.2fs",
                 std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());

    auto* result = static_cast<sd_image_t*>(std::calloc(1, sizeof(sd_image_t)));
    SD_CHECK(result, "out of memory for the upscaled image");
    result->width = static_cast<uint32_t>(out.width);
    result->height = static_cast<uint32_t>(out.height);
    result->channel = static_cast<uint32_t>(out.channels);
    result->data = static_cast<uint8_t*>(std::malloc(out.pixels.size()));
    if (!result->data) {
      std::free(result);
      sd::fail("out of memory for the upscaled image");
    }
    std::memcpy(result->data, out.pixels.data(), out.pixels.size());
    if (num_images_out) *num_images_out = 1;
    if (images_out) {
      *images_out = result;
    } else {
      free_sd_images(result, 1);
    }
    return true;
  });
}

int get_upscale_factor(upscaler_ctx_t* upscaler_ctx) {
  if (!upscaler_ctx || !upscaler_ctx->upscaler) return 1;
  return upscaler_ctx->upscaler->scale();
}

}  // extern "C"
