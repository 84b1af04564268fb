// MP4, WebM and AVI through FFmpeg's libraries (Debian's libavformat, libavcodec, libswscale):
// frames converted from RGB to the codec's YUV by libswscale, encoded, and muxed with the
// parameters as the container's "comment" tag. FFmpeg's own log is silenced; every call's
// result is checked and becomes "<path>: cannot write the video: <step>: <FFmpeg's reason>".
extern "C" {
#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
#include <libavutil/dict.h>
#include <libavutil/imgutils.h>
#include <libavutil/opt.h>
#include <libswscale/swscale.h>
}

#include <algorithm>
#include <cmath>
#include <memory>
#include <mutex>

#include "io/file_error.h"
#include "io/video_codecs.h"
#include "tensor/error.h"

namespace sd::io::detail {

namespace {

struct Target {
  const char* muxer;
  const char* encoder;
  AVPixelFormat pixels;
  const char* needs;  // the Debian package whose encoder this is, for the message
};

Target target_of(VideoFormat format) {
  switch (format) {
    case VideoFormat::Mp4:
      return {"mp4", "libx264", AV_PIX_FMT_YUV420P, "libx264 (libavcodec59 built with it)"};
    case VideoFormat::Webm:
      return {"webm", "libvpx-vp9", AV_PIX_FMT_YUV420P, "libvpx (libavcodec59 built with it)"};
    default:
      // Full-range YUV, as JPEG files are.
      return {"avi", "mjpeg", AV_PIX_FMT_YUVJ420P, "libavcodec59"};
  }
}

struct FormatContextFree {
  void operator()(AVFormatContext* c) const {
    if (c && c->pb) avio_closep(&c->pb);
    avformat_free_context(c);
  }
};
struct CodecContextFree {
  void operator()(AVCodecContext* c) const { avcodec_free_context(&c); }
};
struct FrameFree {
  void operator()(AVFrame* f) const { av_frame_free(&f); }
};
struct PacketFree {
  void operator()(AVPacket* p) const { av_packet_free(&p); }
};
struct ScaleFree {
  void operator()(SwsContext* s) const { sws_freeContext(s); }
};

class Encoder {
 public:
  Encoder(const std::string& path) : path_(path) {}

  [[noreturn]] void fail_step(const char* step, int error) const {
    char reason[AV_ERROR_MAX_STRING_SIZE] = {};
    av_strerror(error, reason, sizeof reason);
    fail_file(path_, format("cannot write the video: %s: %s", step, reason));
  }
  void check(int result, const char* step) const {
    if (result < 0) fail_step(step, result);
  }

 private:
  std::string path_;
};

// Encoder settings for a 1-100 quality: constant-quality modes, so that a short clip and a
// long one look alike (H.264 CRF 51..14, VP9 CRF 63..20, JPEG scale 31..2).
void set_quality(AVCodecContext* c, VideoFormat format, int quality) {
  char value[16];
  if (format == VideoFormat::Mp4) {
    std::snprintf(value, sizeof value, "%d", static_cast<int>(std::lround(51 - 0.37 * quality)));
    av_opt_set(c->priv_data, "crf", value, 0);
    av_opt_set(c->priv_data, "preset", "medium", 0);
  } else if (format == VideoFormat::Webm) {
    std::snprintf(value, sizeof value, "%d", static_cast<int>(std::lround(63 - 0.43 * quality)));
    av_opt_set(c->priv_data, "crf", value, 0);
    c->bit_rate = 0;  // constant quality, no bitrate target
  } else {
    c->flags |= AV_CODEC_FLAG_QSCALE;
    const int scale = std::clamp(static_cast<int>(std::lround(31 - 0.29 * quality)), 2, 31);
    c->global_quality = FF_QP2LAMBDA * scale;
  }
}

}  // namespace

void encode_with_libav(VideoFormat format, const std::string& file, const std::string& path,
                       const std::vector<Image>& frames, const VideoOptions& options) {
  static std::once_flag quiet;
  std::call_once(quiet, [] { av_log_set_level(AV_LOG_QUIET); });
  const Encoder e(path);
  const Target target = target_of(format);
  const int width = frames[0].width, height = frames[0].height;
  if (format != VideoFormat::Avi && (width % 2 != 0 || height % 2 != 0))
    fail_file(path, sd::format("%s needs even width and height; the frames are %d x %d",
                               format == VideoFormat::Mp4 ? "H.264" : "VP9", width, height));

  AVFormatContext* raw_format = nullptr;
  e.check(avformat_alloc_output_context2(&raw_format, nullptr, target.muxer, file.c_str()),
          "the container");
  std::unique_ptr<AVFormatContext, FormatContextFree> out(raw_format);
  const AVCodec* codec = avcodec_find_encoder_by_name(target.encoder);
  if (!codec)
    fail_file(path, sd::format("this FFmpeg has no %s encoder (it comes with %s)", target.encoder,
                               target.needs));
  AVStream* stream = avformat_new_stream(out.get(), nullptr);
  std::unique_ptr<AVCodecContext, CodecContextFree> enc(avcodec_alloc_context3(codec));
  if (!stream || !enc) fail_file(path, "cannot write the video: out of memory");
  enc->width = width;
  enc->height = height;
  enc->pix_fmt = target.pixels;
  enc->time_base = AVRational{1, options.fps};
  enc->framerate = AVRational{options.fps, 1};
  enc->gop_size = 10 * options.fps;
  enc->color_range = format == VideoFormat::Avi ? AVCOL_RANGE_JPEG : AVCOL_RANGE_MPEG;
  set_quality(enc.get(), format, options.quality);
  if (out->oformat->flags & AVFMT_GLOBALHEADER) enc->flags |= AV_CODEC_FLAG_GLOBAL_HEADER;
  e.check(avcodec_open2(enc.get(), codec, nullptr), "opening the encoder");
  e.check(avcodec_parameters_from_context(stream->codecpar, enc.get()), "the stream");
  stream->time_base = enc->time_base;
  stream->avg_frame_rate = enc->framerate;
  if (!options.parameters.empty())
    av_dict_set(&out->metadata, "comment", options.parameters.c_str(), 0);
  e.check(avio_open(&out->pb, file.c_str(), AVIO_FLAG_WRITE), "opening the file");
  e.check(avformat_write_header(out.get(), nullptr), "the header");

  std::unique_ptr<SwsContext, ScaleFree> scale(
      sws_getContext(width, height, AV_PIX_FMT_RGB24, width, height, target.pixels,
                     SWS_BICUBIC | SWS_ACCURATE_RND, nullptr, nullptr, nullptr));
  std::unique_ptr<AVFrame, FrameFree> frame(av_frame_alloc());
  std::unique_ptr<AVPacket, PacketFree> packet(av_packet_alloc());
  if (!scale || !frame || !packet) fail_file(path, "cannot write the video: out of memory");
  frame->format = target.pixels;
  frame->width = width;
  frame->height = height;
  frame->color_range = enc->color_range;
  e.check(av_frame_get_buffer(frame.get(), 0), "a frame buffer");

  // Sends one frame (null: the end) and writes every packet the encoder has ready.
  auto encode = [&](AVFrame* f) {
    e.check(avcodec_send_frame(enc.get(), f), "encoding a frame");
    for (;;) {
      const int got = avcodec_receive_packet(enc.get(), packet.get());
      if (got == AVERROR(EAGAIN) || got == AVERROR_EOF) return;
      e.check(got, "encoding a frame");
      av_packet_rescale_ts(packet.get(), enc->time_base, stream->time_base);
      packet->stream_index = stream->index;
      e.check(av_interleaved_write_frame(out.get(), packet.get()), "writing a frame");
    }
  };
  for (size_t i = 0; i < frames.size(); ++i) {
    e.check(av_frame_make_writable(frame.get()), "a frame buffer");
    const uint8_t* rows[1] = {frames[i].pixels.data()};
    const int stride[1] = {3 * width};
    sws_scale(scale.get(), rows, stride, 0, height, frame->data, frame->linesize);
    frame->pts = static_cast<int64_t>(i);
    encode(frame.get());
  }
  encode(nullptr);
  e.check(av_write_trailer(out.get()), "the trailer");
  e.check(avio_closep(&out->pb), "closing the file");
}

}  // namespace sd::io::detail
