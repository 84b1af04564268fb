// The encoders behind video.h (one file each), given checked RGB frames of one size.
#pragma once

#include <string>
#include <vector>

#include "io/video.h"

namespace sd::io::detail {

// MP4 (H.264), WebM (VP9) or AVI (MJPEG) through FFmpeg's libavformat and libavcodec,
// into the file at `file` (a temporary one the caller renames); `path` names the target in
// messages.
void encode_with_libav(VideoFormat format, const std::string& file, const std::string& path,
                       const std::vector<Image>& frames, const VideoOptions& options);

// An animated WebP file's bytes.
std::vector<uint8_t> encode_animated_webp(const std::vector<Image>& frames,
                                          const VideoOptions& options, const std::string& path);

}  // namespace sd::io::detail
