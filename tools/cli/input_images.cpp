#include "cli/input_images.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "cli/cli_log.h"
#include "tensor/error.h"
#include "tensor/text.h"

namespace sd::cli {

namespace {

int round_up_to_8(int v) {
  return (v + 7) / 8 * 8;
}

io::Image read_rgb(const std::string& path) {
  return io::to_channels(io::read_image(path), 3);
}

// The output size follows the first image read when -W/-H were not both given. sd.cpp
// compatibility: it then aligns the size up to the latent grid and fits the image to it.
void take_size_if_unset(GenerationOptions& g, const io::Image& image) {
  if (g.size_is_set()) return;
  g.width = round_up_to_8(image.width);
  g.height = round_up_to_8(image.height);
  if (g.width != image.width || g.height != image.height) {
    log_message(SD_LOG_WARN, "image size %dx%d aligned up to %dx%d (a multiple of 8)", image.width,
                image.height, g.width, g.height);
  } else {
    log_message(SD_LOG_INFO, "set width x height to %d x %d", g.width, g.height);
  }
}

// The folder's images in file-name order, at most `limit` (0: all).
std::vector<io::Image> read_image_folder(const std::string& dir, size_t limit = 0) {
  namespace fs = std::filesystem;
  std::error_code ec;
  SD_CHECK(fs::is_directory(dir, ec), "'%s' is not a folder", dir.c_str());
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    if (!entry.is_regular_file()) continue;
    const std::string ext = ascii_lower(entry.path().extension().string());
    if (ext == ".jpg" || ext == ".jpeg" || ext == ".png" || ext == ".bmp" || ext == ".webp") {
      files.push_back(entry.path());
    }
  }
  std::sort(files.begin(), files.end(),
            [](const fs::path& a, const fs::path& b) { return a.filename() < b.filename(); });
  std::vector<io::Image> images;
  if (limit > 0 && files.size() > limit) files.resize(limit);
  for (const auto& f : files) images.push_back(read_rgb(f.string()));
  return images;
}

}  // namespace

bool apply_canny(io::Image& control) {
  return preprocess_canny(view_of(control), 0.08f, 0.08f, 0.8f, 1.0f, false);
}

InputImages load_input_images(const CliOptions& cli, GenerationOptions& g) {
  InputImages in;
  if (!g.init_image_path.empty()) {
    in.init = read_rgb(g.init_image_path);
    // Upscale mode keeps the init image as it is, at any size.
    if (cli.mode == Mode::Upscale) return in;
    take_size_if_unset(g, in.init);
    in.init = io::fit_to_size(in.init, g.resolved_width(), g.resolved_height());
  }
  for (const auto& path : g.ref_image_paths) {
    in.refs.push_back(read_rgb(path));
    take_size_if_unset(g, in.refs.back());
  }
  const int width = g.resolved_width();
  const int height = g.resolved_height();

  if (!g.mask_image_path.empty()) {
    in.mask = io::fit_to_size(io::to_channels(io::read_image(g.mask_image_path), 1), width, height);
  } else {
    in.mask.width = width;
    in.mask.height = height;
    in.mask.channels = 1;
    in.mask.pixels.assign(static_cast<size_t>(width) * height, 255);
  }
  if (!g.end_image_path.empty())
    in.end = io::fit_to_size(read_rgb(g.end_image_path), width, height);
  if (!g.control_image_path.empty()) {
    in.control = io::fit_to_size(read_rgb(g.control_image_path), width, height);
    if (cli.canny) {
      SD_CHECK(apply_canny(in.control),
               "--canny: the canny preprocessor failed (see the messages above)");
    }
  }
  if (!g.ip_adapter_image_path.empty()) in.ip_adapter = read_rgb(g.ip_adapter_image_path);
  if (!g.pm_id_images_dir.empty()) in.pm_ids = read_image_folder(g.pm_id_images_dir);
  if (!g.control_video_path.empty()) {
    // At most the clip's frames are read (sd.cpp compatibility), each fitted to the size.
    in.control_frames = read_image_folder(g.control_video_path, std::max(g.video_frames, 1));
    SD_CHECK(!in.control_frames.empty(),
             "--control-video %s: the folder holds no .png, .jpg, .jpeg, .bmp or .webp frames",
             g.control_video_path.c_str());
    for (io::Image& frame : in.control_frames) frame = io::fit_to_size(frame, width, height);
  }
  return in;
}

void attach_input_images(InputImages& in, sd_img_gen_params_t& params) {
  params.init_image = view_of(in.init);
  params.mask_image = view_of(in.mask);
  params.control_image = view_of(in.control);
  params.ip_adapter_image = view_of(in.ip_adapter);
  in.ref_views.clear();
  for (auto& image : in.refs) in.ref_views.push_back(view_of(image));
  params.ref_images = in.ref_views.empty() ? nullptr : in.ref_views.data();
  params.ref_images_count = static_cast<int>(in.ref_views.size());
  in.pm_id_views.clear();
  for (auto& image : in.pm_ids) in.pm_id_views.push_back(view_of(image));
  params.pm_params.id_images = in.pm_id_views.empty() ? nullptr : in.pm_id_views.data();
  params.pm_params.id_images_count = static_cast<int>(in.pm_id_views.size());
}

void attach_video_images(InputImages& in, sd_vid_gen_params_t& params) {
  params.init_image = view_of(in.init);
  params.end_image = view_of(in.end);
  in.control_frame_views.clear();
  for (auto& frame : in.control_frames) in.control_frame_views.push_back(view_of(frame));
  params.control_frames = in.control_frame_views.empty() ? nullptr : in.control_frame_views.data();
  params.control_frames_size = static_cast<int>(in.control_frame_views.size());
}

sd_image_t view_of(io::Image& image) {
  if (image.pixels.empty()) return {0, 0, static_cast<uint32_t>(image.channels), nullptr};
  return {static_cast<uint32_t>(image.width), static_cast<uint32_t>(image.height),
          static_cast<uint32_t>(image.channels), image.pixels.data()};
}

sd_image_t copy_to_sd_image(const io::Image& image) {
  auto* data = static_cast<uint8_t*>(std::malloc(std::max<size_t>(image.pixels.size(), 1)));
  SD_CHECK(data, "out of memory copying a %dx%d image", image.width, image.height);
  if (!image.pixels.empty()) std::memcpy(data, image.pixels.data(), image.pixels.size());
  return {static_cast<uint32_t>(image.width), static_cast<uint32_t>(image.height),
          static_cast<uint32_t>(image.channels), data};
}

io::Image to_image(const sd_image_t& image) {
  io::Image out;
  out.width = static_cast<int>(image.width);
  out.height = static_cast<int>(image.height);
  out.channels = static_cast<int>(image.channel);
  if (image.data) out.pixels.assign(image.data, image.data + out.size());
  return out;
}

}  // namespace sd::cli
