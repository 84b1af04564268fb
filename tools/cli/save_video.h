// Writing a vid_gen run's frames as one video file (io/video.h), the generation parameters
// in its metadata unless --disable-image-metadata.
#pragma once

#include <string>

#include "cli/args.h"
#include "stable-diffusion.h"

namespace sd::cli {

// The file -M vid_gen writes: -o itself when it names a video (.mp4, .webm, .avi, .webp or a
// PNG frame pattern such as out_%03d.png); otherwise, as sd.cpp does, -o with its extension
// replaced by .avi. A one-frame clip is an image: -o as given.
std::string video_output_path(const std::string& output, int frames);

// Before any heavy work: the output folder made if missing and the file checked writable.
void check_video_writable(const Arguments& args);

// Writes the frames whole or not at all; false (after logging why) when it could not.
bool save_video(const Arguments& args, const sd_image_t* frames, int count);

}  // namespace sd::cli
