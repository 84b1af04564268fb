// Video files from 8-bit frames, in the format the output name asks for:
//   .mp4   H.264 (FFmpeg's libx264), yuv420p: plays in browsers and every player;
//   .webm  VP9 (libvpx), yuv420p, keyframes every 10 seconds and inter frames between;
//   .avi   Motion JPEG, every frame a JPEG, as stable-diffusion.cpp writes it;
//   .webp  animated WebP (libwebp's animation encoder), lossy, looping;
//   NAME%03d.png  one PNG per frame (any printf-style frame number: %d, %03d, ...),
//                 numbered from 0.
// The generation parameters go in the container's metadata: the "comment" tag of MP4, WebM
// and AVI, an XMP packet in the WebP (as in still WebPs), each PNG's "parameters" text.
// Every file is written whole or not at all (io/whole_file.h).
#pragma once

#include <string>
#include <vector>

#include "io/image.h"

namespace sd::io {

enum class VideoFormat { Mp4, Webm, Avi, AnimatedWebp, PngFrames };

// The format `path` names by its extension (case-insensitive) or its frame-number
// pattern. Throws sd::Error naming the choices for anything else.
VideoFormat video_format_for(const std::string& path);

struct VideoOptions {
  int fps = 16;      // 1-240
  int quality = 90;  // 1-100: higher is better and larger (CRF for H.264 and VP9, JPEG's scale)
  std::string parameters;  // embedded as said above; empty: none
};

// Writes `frames` (all one size; gray, RGB or RGBA, alpha dropped) to `path`. H.264 and VP9
// need even sides. Throws sd::Error "<path>: <reason>" and leaves no file behind.
void write_video(const std::string& path, const std::vector<Image>& frames,
                 const VideoOptions& options);

// Fails, naming the path and the reason, unless write_video could write `path` now (its
// format is known and a file can be created there), so a long generation is not wasted.
void check_video_writable(const std::string& path);

// Frame `index`'s file name for a PNG-frames pattern ("out_%03d.png", 7 -> "out_007.png").
std::string frame_file_name(const std::string& pattern, int index);

}  // namespace sd::io
