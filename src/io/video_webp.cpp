// Animated WebP through libwebp's animation encoder (libwebpmux): lossy frames at the
// requested quality, one per 1000/fps ms, looping forever, the parameters in an XMP chunk.
#include <webp/encode.h>
#include <webp/mux.h>

#include <cmath>
#include <memory>

#include "io/file_error.h"
#include "io/image_codecs.h"
#include "io/video_codecs.h"
#include "tensor/error.h"

namespace sd::io::detail {

namespace {

struct AnimEncoderFree {
  void operator()(WebPAnimEncoder* e) const { WebPAnimEncoderDelete(e); }
};
struct MuxFree {
  void operator()(WebPMux* m) const { WebPMuxDelete(m); }
};
struct PictureFree {
  void operator()(WebPPicture* p) const { WebPPictureFree(p); }
};

}  // namespace

std::vector<uint8_t> encode_animated_webp(const std::vector<Image>& frames,
                                          const VideoOptions& options, const std::string& path) {
  const int width = frames[0].width, height = frames[0].height;
  if (width > WEBP_MAX_DIMENSION || height > WEBP_MAX_DIMENSION)
    fail_file(path, format("WebP takes at most %d pixels a side; the frames are %d x %d",
                           WEBP_MAX_DIMENSION, width, height));
  WebPAnimEncoderOptions anim;
  WebPConfig config;
  if (!WebPAnimEncoderOptionsInit(&anim) || !WebPConfigInit(&config))
    fail_file(path, "cannot write the video: this libwebp does not match its headers");
  anim.anim_params.loop_count = 0;  // forever
  config.quality = static_cast<float>(options.quality);
  std::unique_ptr<WebPAnimEncoder, AnimEncoderFree> encoder(
      WebPAnimEncoderNew(width, height, &anim));
  if (!encoder) fail_file(path, "cannot write the video: out of memory");

  auto timestamp_ms = [&](size_t i) {
    return static_cast<int>(std::lround(1000.0 * static_cast<double>(i) / options.fps));
  };
  for (size_t i = 0; i < frames.size(); ++i) {
    WebPPicture picture;
    if (!WebPPictureInit(&picture)) fail_file(path, "cannot write the video: libwebp mismatch");
    picture.width = width;
    picture.height = height;
    picture.use_argb = 1;
    std::unique_ptr<WebPPicture, PictureFree> owned(&picture);
    if (!WebPPictureImportRGB(&picture, frames[i].pixels.data(), 3 * width) ||
        !WebPAnimEncoderAdd(encoder.get(), &picture, timestamp_ms(i), &config))
      fail_file(path, format("cannot write the video: frame %zu: %s", i,
                             WebPAnimEncoderGetError(encoder.get())));
  }
  WebPData assembled;
  WebPDataInit(&assembled);
  if (!WebPAnimEncoderAdd(encoder.get(), nullptr, timestamp_ms(frames.size()), nullptr) ||
      !WebPAnimEncoderAssemble(encoder.get(), &assembled))
    fail_file(path, format("cannot write the video: %s", WebPAnimEncoderGetError(encoder.get())));
  std::unique_ptr<uint8_t, void (*)(uint8_t*)> assembled_bytes(
      const_cast<uint8_t*>(assembled.bytes), [](uint8_t* p) { WebPFree(p); });
  if (options.parameters.empty())
    return std::vector<uint8_t>(assembled.bytes, assembled.bytes + assembled.size);

  std::unique_ptr<WebPMux, MuxFree> mux(WebPMuxCreate(&assembled, /*copy_data=*/1));
  const std::string xmp = parameters_xmp_packet(options.parameters);
  const WebPData xmp_data = {reinterpret_cast<const uint8_t*>(xmp.data()), xmp.size()};
  WebPData with_xmp;
  WebPDataInit(&with_xmp);
  if (!mux || WebPMuxSetChunk(mux.get(), "XMP ", &xmp_data, 1) != WEBP_MUX_OK ||
      WebPMuxAssemble(mux.get(), &with_xmp) != WEBP_MUX_OK)
    fail_file(path, "cannot write the video: adding the parameters to the WebP failed");
  std::vector<uint8_t> out(with_xmp.bytes, with_xmp.bytes + with_xmp.size);
  WebPDataClear(&with_xmp);
  return out;
}

}  // namespace sd::io::detail
