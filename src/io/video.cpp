#include "io/video.h"

#include <cctype>
#include <cstdio>
#include <filesystem>
#include <memory>

#include "io/file_error.h"
#include "io/video_codecs.h"
#include "io/whole_file.h"
#include "tensor/error.h"
#include "tensor/text.h"

namespace sd::io {

namespace {

// Where the one printf-style frame number ("%d", "%03d") of a PNG-frames name is:
// {position, length}; {npos, 0} when the name has none. Any other '%' is refused.
std::pair<size_t, size_t> frame_number_field(const std::string& name, const std::string& path) {
  size_t found = std::string::npos, length = 0;
  for (size_t i = name.find('%'); i != std::string::npos; i = name.find('%', i + 1)) {
    size_t j = i + 1;
    while (j < name.size() && std::isdigit(static_cast<unsigned char>(name[j]))) ++j;
    if (j >= name.size() || name[j] != 'd' || j - i - 1 > 2 || found != std::string::npos)
      fail_file(path,
                "a frame-sequence name takes one frame number, such as %d or %03d (up to 2 "
                "digits of width), and no other '%'");
    found = i;
    length = j + 1 - i;
  }
  return {found, length};
}

void check_frames(const std::vector<Image>& frames, const std::string& path) {
  if (frames.empty()) fail_file(path, "no frames to write");
  for (size_t i = 0; i < frames.size(); ++i) {
    const Image& f = frames[i];
    if (f.width < 1 || f.height < 1 || f.size() != f.pixels.size() ||
        (f.channels != 1 && f.channels != 3 && f.channels != 4))
      fail_file(path, format("frame %zu is not an 8-bit gray, RGB or RGBA image", i));
    if (f.width != frames[0].width || f.height != frames[0].height)
      fail_file(path, format("frame %zu is %d x %d, frame 0 %d x %d: every frame needs one size", i,
                             f.width, f.height, frames[0].width, frames[0].height));
  }
}

void write_png_frames(const std::string& pattern, const std::vector<Image>& frames,
                      const VideoOptions& options) {
  // All frames to temporary files first, then renamed; if a rename fails, the frames
  // already in place are removed again.
  std::vector<std::unique_ptr<TempFileBeside>> files;
  std::vector<std::string> names;
  for (size_t i = 0; i < frames.size(); ++i) {
    names.push_back(frame_file_name(pattern, static_cast<int>(i)));
    const std::vector<uint8_t> bytes =
        encode_image(frames[i], ImageFormat::Png, options.parameters);
    files.push_back(std::make_unique<TempFileBeside>(names.back(), "frame"));
    files.back()->write(bytes.data(), bytes.size());
  }
  for (size_t i = 0; i < files.size(); ++i) {
    try {
      files[i]->commit();
    } catch (...) {
      for (size_t j = 0; j < i; ++j) std::remove(names[j].c_str());
      throw;
    }
  }
}

}  // namespace

VideoFormat video_format_for(const std::string& path) {
  const std::filesystem::path p(path);
  const std::string ext = ascii_lower(p.extension().string());
  const std::string name = p.filename().string();
  if (ext == ".png" && frame_number_field(name, path).first != std::string::npos)
    return VideoFormat::PngFrames;
  if (ext == ".mp4") return VideoFormat::Mp4;
  if (ext == ".webm") return VideoFormat::Webm;
  if (ext == ".avi") return VideoFormat::Avi;
  if (ext == ".webp") return VideoFormat::AnimatedWebp;
  fail_file(path,
            "a video is written as .mp4 (H.264), .webm (VP9), .avi (MJPEG), .webp (animated) or "
            "frames named with a number such as out_%03d.png; give -o one of those");
}

std::string frame_file_name(const std::string& pattern, int index) {
  const std::filesystem::path p(pattern);
  const std::string name = p.filename().string();
  const auto [at, length] = frame_number_field(name, pattern);
  SD_CHECK(at != std::string::npos, "%s: not a frame-sequence name", pattern.c_str());
  const std::string spec = name.substr(at, length);
  char number[32];
  std::snprintf(number, sizeof number, spec.c_str(), index);
  return (p.parent_path() / (name.substr(0, at) + number + name.substr(at + length))).string();
}

void write_video(const std::string& path, const std::vector<Image>& frames,
                 const VideoOptions& options) {
  const VideoFormat format = video_format_for(path);
  check_frames(frames, path);
  if (options.fps < 1 || options.fps > 240)
    fail_file(path, sd::format("%d frames per second is outside 1-240", options.fps));
  if (options.quality < 1 || options.quality > 100)
    fail_file(path, sd::format("quality %d is outside 1-100", options.quality));
  // The encoders take RGB.
  std::vector<Image> rgb;
  const std::vector<Image>* source = &frames;
  if (frames[0].channels != 3) {
    for (const Image& f : frames) rgb.push_back(to_channels(f, 3));
    source = &rgb;
  }
  switch (format) {
    case VideoFormat::PngFrames:
      return write_png_frames(path, *source, options);
    case VideoFormat::AnimatedWebp: {
      const std::vector<uint8_t> bytes = detail::encode_animated_webp(*source, options, path);
      return write_file_whole(path, bytes.data(), bytes.size(), "video");
    }
    default: {
      TempFileBeside file(path, "video");
      detail::encode_with_libav(format, file.path(), path, *source, options);
      file.commit();
    }
  }
}

void check_video_writable(const std::string& path) {
  const VideoFormat format = video_format_for(path);
  check_file_writable(format == VideoFormat::PngFrames ? frame_file_name(path, 0) : path, "video");
}

}  // namespace sd::io
