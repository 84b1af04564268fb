#include "cli/save_video.h"

#include <filesystem>
#include <vector>

#include "cli/cli_log.h"
#include "cli/image_params.h"
#include "cli/input_images.h"
#include "cli/save_images.h"
#include "io/image.h"
#include "io/video.h"
#include "tensor/error.h"

namespace sd::cli {

namespace {

bool names_video(const std::string& path) {
  try {
    io::video_format_for(path);
    return true;
  } catch (const sd::Error&) {
    return false;
  }
}

}  // namespace

std::string video_output_path(const std::string& output, int frames) {
  if (frames <= 1 || names_video(output)) return output;
  return std::filesystem::path(output).replace_extension(".avi").string();
}

void check_video_writable(const Arguments& a) {
  const std::string path = video_output_path(a.cli.output_path, a.generation.video_frames);
  if (a.generation.video_frames <= 1) {
    check_outputs_writable(a, 1);
    return;
  }
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  std::error_code ec;
  if (!parent.empty() && !std::filesystem::exists(parent, ec)) {
    std::filesystem::create_directories(parent, ec);
    SD_CHECK(!ec, "cannot create the output folder '%s': %s; choose another -o",
             parent.string().c_str(), ec.message().c_str());
    log_message(SD_LOG_INFO, "created the output folder '%s'", parent.string().c_str());
  }
  if (path != a.cli.output_path)
    log_message(SD_LOG_INFO, "-o %s does not name a video format; writing %s",
                a.cli.output_path.c_str(), path.c_str());
  io::check_video_writable(path);
}

bool save_video(const Arguments& a, const sd_image_t* frames, int count) {
  const GenerationOptions& g = a.generation;
  if (g.video_frames <= 1) return save_images(a, frames, count);
  const std::string path = video_output_path(a.cli.output_path, g.video_frames);
  std::vector<io::Image> images;
  images.reserve(static_cast<size_t>(count));
  for (int i = 0; i < count; ++i) images.push_back(to_image(frames[i]));
  io::VideoOptions options;
  options.fps = g.fps;
  if (g.embed_image_metadata)
    options.parameters = image_parameters(a.context, g, g.seed, a.cli.mode);
  try {
    io::write_video(path, images, options);
  } catch (const std::exception& e) {
    log_message(SD_LOG_ERROR, "%s", e.what());
    return false;
  }
  log_message(SD_LOG_INFO, "save result video (%d frames, %d fps) to '%s'", count, g.fps,
              path.c_str());
  return true;
}

}  // namespace sd::cli
