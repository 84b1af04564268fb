#include "cli/save_images.h"

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "cli/cli_log.h"
#include "cli/image_params.h"
#include "cli/input_images.h"
#include "cli/output_paths.h"
#include "io/image.h"
#include "tensor/error.h"

namespace sd::cli {

void check_outputs_writable(const Arguments& a, int count) {
  const CliOptions& cli = a.cli;
  for (const std::string& path :
       output_paths(cli.output_path, count, std::max(0, cli.output_begin_idx))) {
    const std::filesystem::path parent = std::filesystem::path(path).parent_path();
    std::error_code ec;
    if (!parent.empty() && !std::filesystem::exists(parent, ec)) {
      std::filesystem::create_directories(parent, ec);
      SD_CHECK(!ec, "cannot create the output folder '%s': %s; choose another -o",
               parent.string().c_str(), ec.message().c_str());
      log_message(SD_LOG_INFO, "created the output folder '%s'", parent.string().c_str());
    }
    io::check_image_writable(path);
  }
}

bool save_images(const Arguments& a, const sd_image_t* images, int count) {
  const CliOptions& cli = a.cli;
  const GenerationOptions& g = a.generation;
  const std::filesystem::path parent = std::filesystem::path(cli.output_path).parent_path();
  if (!parent.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(parent, ec);
    SD_CHECK(!ec, "cannot create the output folder '%s': %s", parent.string().c_str(),
             ec.message().c_str());
  }
  const std::vector<std::string> paths =
      output_paths(cli.output_path, count, std::max(0, cli.output_begin_idx));
  // A batch of N images may hold several images per seed (layered models).
  const int per_seed = g.batch_count > 0 ? std::max(1, count / g.batch_count) : 1;
  int saved = 0;
  for (int i = 0; i < count; ++i) {
    if (!images[i].data) continue;
    const std::string parameters =
        g.embed_image_metadata && cli.mode != Mode::Upscale
            ? image_parameters(a.context, g, g.seed + i / per_seed, cli.mode)
            : "";
    try {
      sd::io::write_image(paths[i], to_image(images[i]), parameters, 90);
      log_message(SD_LOG_INFO, "save result image %d to '%s'", i, paths[i].c_str());
      ++saved;
    } catch (const std::exception& e) {
      log_message(SD_LOG_ERROR, "%s", e.what());
    }
  }
  log_message(SD_LOG_INFO, "%d/%d images saved", saved, count);
  return saved == count;
}

}  // namespace sd::cli
