#include "io/video.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

extern "C" {
#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
#include <libavutil/dict.h>
#include <libavutil/imgutils.h>
}
#include <webp/demux.h>

#include <filesystem>
#include <fstream>
#include <iterator>

#include "io/image_metadata.h"
#include "io/image_test_util.h"
#include "io/io_test_util.h"

namespace sd::io {
namespace {

using test::difference;
using test::expect_error;
using test::TempDir;
using test::test_image;

const std::string kParameters = "a lighthouse at dusk\nSteps: 20, Seed: 42, Size: 64x48";

// A gradient sliding right by 2 pixels a frame: something for inter frames to predict.
std::vector<Image> moving_frames(int count, int width = 64, int height = 48) {
  const Image base = test_image(width + 2 * count, height, 3, 7);
  std::vector<Image> frames;
  for (int i = 0; i < count; ++i) {
    Image f{width, height, 3, {}};
    f.pixels.resize(f.size());
    for (int y = 0; y < height; ++y)
      for (int x = 0; x < width; ++x)
        for (int c = 0; c < 3; ++c) f.at(x, y, c) = base.at(x + 2 * i, y, c);
    frames.push_back(f);
  }
  return frames;
}

// What FFmpeg's demuxer and decoder (the library behind ffprobe) find in a video file.
struct Probed {
  AVCodecID codec = AV_CODEC_ID_NONE;
  int width = 0, height = 0, frames = 0, key_frames = 0;
  double fps = 0;
  std::string comment;
  Image first;  // decoded, RGB
};

Probed probe(const std::string& path) {
  Probed p;
  AVFormatContext* in = nullptr;
  if (avformat_open_input(&in, path.c_str(), nullptr, nullptr) < 0) {
    ADD_FAILURE() << "FFmpeg cannot open " << path;
    return p;
  }
  avformat_find_stream_info(in, nullptr);
  const AVStream* s = in->streams[0];
  p.codec = s->codecpar->codec_id;
  p.width = s->codecpar->width;
  p.height = s->codecpar->height;
  p.fps = av_q2d(s->avg_frame_rate.num ? s->avg_frame_rate : s->r_frame_rate);
  if (const AVDictionaryEntry* e = av_dict_get(in->metadata, "comment", nullptr, 0))
    p.comment = e->value;
  const AVCodec* codec = avcodec_find_decoder(p.codec);
  AVCodecContext* dec = avcodec_alloc_context3(codec);
  avcodec_parameters_to_context(dec, s->codecpar);
  avcodec_open2(dec, codec, nullptr);
  AVPacket* packet = av_packet_alloc();
  AVFrame* frame = av_frame_alloc();
  auto take_frames = [&] {
    while (avcodec_receive_frame(dec, frame) == 0) {
      if (p.first.pixels.empty()) {
        // Luma only is enough to see the right picture; chroma is checked by the coders.
        p.first = {frame->width, frame->height, 1, {}};
        p.first.pixels.resize(p.first.size());
        for (int y = 0; y < frame->height; ++y)
          std::copy_n(frame->data[0] + y * frame->linesize[0], frame->width,
                      p.first.pixels.begin() + static_cast<size_t>(y) * frame->width);
      }
      ++p.frames;
    }
  };
  while (av_read_frame(in, packet) >= 0) {
    if (packet->flags & AV_PKT_FLAG_KEY) ++p.key_frames;
    avcodec_send_packet(dec, packet);
    av_packet_unref(packet);
    take_frames();
  }
  avcodec_send_packet(dec, nullptr);
  take_frames();
  av_frame_free(&frame);
  av_packet_free(&packet);
  avcodec_free_context(&dec);
  avformat_close_input(&in);
  return p;
}

// The frame's luma as the encoders compute it (BT.601), limited or full range.
Image luma_of(const Image& rgb, bool full_range) {
  Image y{rgb.width, rgb.height, 1, {}};
  y.pixels.resize(y.size());
  for (int j = 0; j < rgb.height; ++j)
    for (int i = 0; i < rgb.width; ++i) {
      const double l = 0.299 * rgb.at(i, j, 0) + 0.587 * rgb.at(i, j, 1) + 0.114 * rgb.at(i, j, 2);
      y.at(i, j, 0) = static_cast<uint8_t>(std::lround(full_range ? l : 16 + l * 219.0 / 255.0));
    }
  return y;
}

void expect_video(const std::string& path, AVCodecID codec, bool full_range, int max_key_frames) {
  const std::vector<Image> frames = moving_frames(12);
  write_video(path, frames, {16, 90, kParameters});
  const Probed p = probe(path);
  EXPECT_EQ(p.codec, codec);
  EXPECT_EQ(p.width, 64);
  EXPECT_EQ(p.height, 48);
  EXPECT_EQ(p.frames, 12);
  EXPECT_NEAR(p.fps, 16.0, 0.01);
  EXPECT_LE(p.key_frames, max_key_frames);
  EXPECT_EQ(p.comment, kParameters);
  ASSERT_FALSE(p.first.pixels.empty());
  EXPECT_LT(difference(p.first, luma_of(frames[0], full_range)).mean, 3.0);
  // Nothing else was left beside it.
  int files = 0;
  for (const auto& entry :
       std::filesystem::directory_iterator(std::filesystem::path(path).parent_path())) {
    (void)entry;
    ++files;
  }
  EXPECT_EQ(files, 1);
}

TEST(Video, Mp4IsH264WithInterFramesAndTheParameters) {
  TempDir dir;
  expect_video(dir.file("clip.mp4"), AV_CODEC_ID_H264, false, 1);
}

TEST(Video, WebmIsVp9WithInterFramesAndTheParameters) {
  TempDir dir;
  expect_video(dir.file("clip.webm"), AV_CODEC_ID_VP9, false, 1);
}

TEST(Video, AviIsMotionJpegEveryFrameAKeyFrame) {
  TempDir dir;
  expect_video(dir.file("clip.avi"), AV_CODEC_ID_MJPEG, true, 12);
}

TEST(Video, AnimatedWebpHasEveryFrameItsTimingAndTheParameters) {
  TempDir dir;
  const std::vector<Image> frames = moving_frames(5);
  write_video(dir.file("clip.webp"), frames, {10, 90, kParameters});
  std::ifstream in(dir.file("clip.webp"), std::ios::binary);
  const std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), {});
  WebPAnimDecoderOptions options;
  ASSERT_TRUE(WebPAnimDecoderOptionsInit(&options));
  options.color_mode = MODE_RGBA;
  const WebPData data = {bytes.data(), bytes.size()};
  WebPAnimDecoder* decoder = WebPAnimDecoderNew(&data, &options);
  ASSERT_NE(decoder, nullptr);
  WebPAnimInfo info;
  ASSERT_TRUE(WebPAnimDecoderGetInfo(decoder, &info));
  EXPECT_EQ(info.canvas_width, 64u);
  EXPECT_EQ(info.canvas_height, 48u);
  EXPECT_EQ(info.frame_count, 5u);
  EXPECT_EQ(info.loop_count, 0u);
  std::vector<int> timestamps;
  uint8_t* rgba = nullptr;
  int timestamp = 0;
  while (WebPAnimDecoderGetNext(decoder, &rgba, &timestamp)) {
    if (timestamps.empty()) {
      Image first{64, 48, 4, std::vector<uint8_t>(rgba, rgba + 64 * 48 * 4)};
      EXPECT_LT(difference(to_channels(first, 3), frames[0]).mean, 4.0);
    }
    timestamps.push_back(timestamp);
  }
  WebPAnimDecoderDelete(decoder);
  // Each timestamp is when the frame ends: 100 ms apart at 10 fps.
  EXPECT_EQ(timestamps, (std::vector<int>{100, 200, 300, 400, 500}));
  const std::string text(bytes.begin(), bytes.end());
  EXPECT_NE(text.find("XMP "), std::string::npos);
  EXPECT_NE(text.find("Steps: 20, Seed: 42"), std::string::npos);
}

TEST(Video, PngFramesAreNumberedFromZeroWithTheParameters) {
  TempDir dir;
  const std::vector<Image> frames = moving_frames(3);
  write_video(dir.file("frame_%03d.png"), frames, {16, 90, kParameters});
  for (int i = 0; i < 3; ++i) {
    const std::string name = dir.file("frame_00" + std::to_string(i) + ".png");
    EXPECT_EQ(difference(read_image(name), frames[i]).max, 0) << name;
    EXPECT_EQ(read_image_metadata(name).parameters, kParameters);
  }
  EXPECT_EQ(frame_file_name("out/f%d.png", 12), "out/f12.png");
  EXPECT_EQ(frame_file_name("f%05d_x.png", 7), "f00007_x.png");
}

TEST(Video, GrayAndRgbaFramesAreWrittenAsRgb) {
  TempDir dir;
  std::vector<Image> frames = {test_image(32, 32, 4, 1), test_image(32, 32, 4, 2)};
  write_video(dir.file("a.avi"), frames, {});
  EXPECT_EQ(probe(dir.file("a.avi")).frames, 2);
  frames = {test_image(32, 32, 1, 1)};
  write_video(dir.file("a.webp"), frames, {});
  EXPECT_TRUE(std::filesystem::exists(dir.file("a.webp")));
}

TEST(Video, BadNamesAndFramesAreRefusedAndNothingIsWritten) {
  TempDir dir;
  const std::vector<Image> frames = moving_frames(2);
  expect_error([&] { write_video(dir.file("clip.gif"), frames, {}); },
               {"clip.gif", ".mp4 (H.264), .webm (VP9), .avi (MJPEG), .webp"});
  expect_error([&] { write_video(dir.file("still.png"), frames, {}); }, {"out_%03d.png"});
  expect_error([&] { write_video(dir.file("f%s.png"), frames, {}); }, {"one frame number"});
  expect_error([&] { write_video(dir.file("f%d_%d.png"), frames, {}); }, {"one frame number"});
  expect_error([&] { write_video(dir.file("none.mp4"), {}, {}); }, {"none.mp4", "no frames"});
  std::vector<Image> mixed = frames;
  mixed[1] = test_image(32, 48, 3);
  expect_error([&] { write_video(dir.file("mixed.webm"), mixed, {}); },
               {"frame 1 is 32 x 48, frame 0 64 x 48"});
  const std::vector<Image> odd = {test_image(63, 47, 3)};
  expect_error([&] { write_video(dir.file("odd.mp4"), odd, {}); },
               {"odd.mp4", "H.264 needs even width and height", "63 x 47"});
  expect_error(
      [&] {
        write_video(dir.file("fast.mp4"), frames, {1000, 90, ""});
      },
      {"1000 frames per second"});
  expect_error([&] { write_video(dir.file("no/such/folder/clip.mp4"), frames, {}); },
               {"clip.mp4", "cannot create the video file"});
  EXPECT_TRUE(std::filesystem::is_empty(dir.path()));
  // MJPEG takes odd sizes.
  write_video(dir.file("odd.avi"), odd, {});
  EXPECT_EQ(probe(dir.file("odd.avi")).width, 63);
}

TEST(Video, WritabilityIsCheckedBeforeAnyWork) {
  TempDir dir;
  check_video_writable(dir.file("clip.mp4"));
  check_video_writable(dir.file("f_%02d.png"));
  EXPECT_TRUE(std::filesystem::is_empty(dir.path()));
  expect_error([&] { check_video_writable(dir.file("clip.mov")); }, {"clip.mov", ".mp4"});
  std::filesystem::create_directory(dir.file("taken.mp4"));
  expect_error([&] { check_video_writable(dir.file("taken.mp4")); },
               {"is a folder; give -o a file name for the video"});
  if (::geteuid() != 0) {
    ::chmod(dir.path().c_str(), 0500);
    expect_error([&] { check_video_writable(dir.file("clip.webm")); }, {"choose another -o"});
    ::chmod(dir.path().c_str(), 0700);
  }
}

}  // namespace
}  // namespace sd::io
