// sd-cli: the command-line front end over the C API (include/stable-diffusion.h), with
// stable-diffusion.cpp's flags. Modes: img_gen (txt2img, img2img, inpaint), convert,
// upscale, metadata. A run either writes all its images or reports why not; each image
// file is written whole or not at all.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "api/callbacks.h"
#include "api/convert.h"
#include "api/image_info.h"
#include "api/tokenize.h"
#include "backend/registry.h"
#include "backend/rpc/client/rpc_device.h"
#include "cli/args.h"
#include "cli/cli_log.h"
#include "cli/input_images.h"
#include "cli/save_images.h"
#include "cli/save_video.h"
#include "io/image.h"
#include "io/video.h"
#include "stable-diffusion.h"
#include "tensor/error.h"

#ifndef SD_VERSION
#define SD_VERSION "unknown"
#endif

namespace {

using namespace sd::cli;

std::string version_line() {
  return std::string("sd-cli version ") + SD_VERSION + ", commit " + sd_commit();
}

void list_devices(bool verbose) {
  if (!verbose) {
    // sd.cpp's format: "name<TAB>description" per line, for scripts.
    std::vector<char> text(sd_list_devices(nullptr, 0) + 1);
    sd_list_devices(text.data(), text.size());
    std::fputs(text.data(), stdout);
    return;
  }
  std::printf("%-8s %-8s %-16s %s\n", "name", "kind", "free/total", "description");
  for (const auto& d : sd::DeviceRegistry::instance().devices()) {
    const sd::DeviceMemory mem = d->memory();
    const char* kind = d->kind() == sd::DeviceKind::Cpu        ? "cpu"
                       : d->kind() == sd::DeviceKind::Gpu      ? "gpu"
                       : d->kind() == sd::DeviceKind::Software ? "software"
                                                               : "remote";
    char memory[64];
    std::snprintf(memory, sizeof memory, "%.1f/%.1f GiB",
                  static_cast<double>(mem.free) / (1u << 30),
                  static_cast<double>(mem.total) / (1u << 30));
    std::printf("%-8s %-8s %-16s %s\n", d->name().c_str(), kind, memory, d->description().c_str());
  }
}

void on_log(sd_log_level_t level, const char* text, void*) {
  print_log(level, text);
}

void on_progress(int step, int steps, float seconds, void*) {
  const std::string line = sd::api::progress_line(step, steps, seconds);
  if (line.empty()) return;
  std::printf("\r%s\033[K%s", line.c_str(), step >= steps ? "\n" : "");
  std::fflush(stdout);
}

// An image's preview is written as --preview-path; a clip's (every frame) as a video there.
void on_preview(int step, int frame_count, sd_image_t* frames, bool is_noisy, void* data) {
  (void)step;
  (void)is_noisy;
  const auto* cli = static_cast<const CliOptions*>(data);
  if (frame_count < 1 || !frames) return;
  try {
    if (frame_count == 1) {
      sd::io::write_image(cli->preview_path, to_image(frames[0]), "");
      return;
    }
    std::vector<sd::io::Image> clip;
    for (int i = 0; i < frame_count; ++i) clip.push_back(to_image(frames[i]));
    sd::io::VideoOptions options;
    options.fps = cli->preview_fps;
    sd::io::write_video(cli->preview_path, clip, options);
  } catch (const std::exception& e) {
    log_message(SD_LOG_ERROR, "preview: %s", e.what());
  }
}

// A clip's previews are clips: a --preview-path that names no video format becomes .avi (as
// the reference's .png does), played at --fps (proj's frames are latent frames: a quarter).
void set_video_preview(CliOptions& cli, const GenerationOptions& g) {
  if (g.video_frames <= 4) return;  // one latent frame: an image
  try {
    sd::io::video_format_for(cli.preview_path);
  } catch (const std::exception&) {
    const std::filesystem::path path(cli.preview_path);
    cli.preview_path = path.parent_path().empty()
                           ? path.stem().string() + ".avi"
                           : (path.parent_path() / (path.stem().string() + ".avi")).string();
  }
  cli.preview_fps = std::max(1, cli.preview_method == PREVIEW_PROJ ? g.fps / 4 : g.fps);
}

// Owns what generate_image / upscale return.
struct ImagesDeleter {
  int count;
  void operator()(sd_image_t* images) const { free_sd_images(images, count); }
};
using OwnedImages = std::unique_ptr<sd_image_t, ImagesDeleter>;

int run_convert(const Arguments& a) {
  const ContextOptions& c = a.context;
  sd::api::ConvertOptions options;
  options.input = c.model_path;
  options.output = a.cli.output_path;
  options.vae = c.vae_path;
  if (c.wtype != SD_TYPE_COUNT) {
    options.type = sd::api::parse_convert_type(sd_type_name(c.wtype));
  }
  options.tensor_type_rules = c.tensor_type_rules;
  options.progress = [](const sd::api::ConvertProgress& p) {
    const std::string name = sd::escape_control_chars(p.name);  // names come from the file
    std::fprintf(stderr, "\r[%zu/%zu] %.1f/%.1f MiB  %-60s", p.index, p.count,
                 static_cast<double>(p.bytes_written) / (1 << 20),
                 static_cast<double>(p.bytes_total) / (1 << 20), name.c_str());
    if (p.index == p.count) std::fputc('\n', stderr);
  };
  const sd::api::ConvertResult r = sd::api::convert_model(
      options, {c.diffusion_model_path, c.clip_l_path, c.clip_g_path, c.t5xxl_path, c.llm_path});
  std::string counts;
  for (const auto& [type, n] : r.type_counts) {
    if (!counts.empty()) counts += ", ";
    counts += std::to_string(n) + " " + std::string(sd::dtype_name(type));
  }
  log_message(SD_LOG_INFO, "wrote %s: %zu tensors (%s), %.1f MiB", options.output.c_str(),
              r.tensors, counts.c_str(), static_cast<double>(r.bytes) / (1 << 20));
  return 0;
}

int run_metadata(const CliOptions& cli) {
  sd::api::ImageInfoOptions options;
  options.image = cli.image_path;
  options.format = sd::api::parse_metadata_format(cli.metadata_format);
  options.raw = cli.metadata_raw;
  options.brief = cli.metadata_brief;
  options.all = cli.metadata_all;
  std::fputs(sd::api::describe_image_metadata(options).c_str(), stdout);
  return 0;
}

// The size `repeats` runs of an upscaler by `factor` make of a width x height image; an
// sd::Error naming --upscale-repeats when it could not be written (io::kMaxImageSide,
// io::kMaxImagePixels), before any of the work.
void check_upscaled_size(int64_t width, int64_t height, int64_t factor, int repeats) {
  int64_t w = width, h = height;
  for (int r = 1; r <= repeats; ++r) {
    w *= factor;
    h *= factor;
    SD_CHECK(w <= sd::io::kMaxImageSide && h <= sd::io::kMaxImageSide &&
                 w * h <= sd::io::kMaxImagePixels,
             "upscaling the %lldx%lld image x%lld %d time%s would make it %lldx%lld, larger "
             "than an image can be (%d pixels a side, %lld in all); use fewer "
             "--upscale-repeats or a smaller image",
             static_cast<long long>(width), static_cast<long long>(height),
             static_cast<long long>(factor), r, r == 1 ? "" : "s", static_cast<long long>(w),
             static_cast<long long>(h), sd::io::kMaxImageSide,
             static_cast<long long>(sd::io::kMaxImagePixels));
  }
}

// Runs the ESRGAN upscaler `repeats` times over each image, in place; false when the
// upscaler could not be loaded or an image could not be upscaled (that image is then kept
// at the size it had). The final sizes are checked before any image is upscaled.
bool upscale_images(const Arguments& a, const sd_ctx_params_t& ctx_params, sd_image_t* images,
                    int count) {
  const ContextOptions& c = a.context;
  // The upscaler is not cut into segments: its memory is one tile's, which
  // --upscale-tile-size bounds.
  if (!c.max_vram.empty() && c.max_vram != "0")
    log_message(SD_LOG_WARN,
                "--max-vram does not apply to the upscaler; bound its memory with "
                "--upscale-tile-size");
  upscaler_ctx_t* upscaler = new_upscaler_ctx_with_type(
      c.esrgan_path.c_str(), c.diffusion_conv_direct, c.n_threads, a.generation.upscale_tile_size,
      ctx_params.backend, ctx_params.params_backend, c.wtype);
  if (!upscaler) return false;  // the library said why
  const uint32_t factor = static_cast<uint32_t>(get_upscale_factor(upscaler));
  try {
    for (int i = 0; i < count; ++i)
      if (images[i].data)
        check_upscaled_size(images[i].width, images[i].height, factor,
                            a.generation.upscale_repeats);
  } catch (const sd::Error& e) {
    log_message(SD_LOG_ERROR, "%s", e.what());
    free_upscaler_ctx(upscaler);
    return false;
  }
  bool ok = true;
  for (int i = 0; i < count; ++i) {
    for (int r = 0; r < a.generation.upscale_repeats && images[i].data; ++r) {
      sd_image_t* out = nullptr;
      int n = 0;
      if (!upscale(upscaler, images[i], factor, &out, &n) || n <= 0 || !out[0].data) {
        free_sd_images(out, n);
        if (count > 1) log_message(SD_LOG_ERROR, "upscaling image %d failed", i);
        ok = false;
        break;
      }
      std::free(images[i].data);
      images[i] = out[0];
      out[0].data = nullptr;
      free_sd_images(out, n);
    }
  }
  free_upscaler_ctx(upscaler);
  return ok;
}

int run_generation(Arguments& a) {
  CliOptions& cli = a.cli;
  GenerationOptions& g = a.generation;
  SD_CHECK(cli.mode == Mode::ImgGen || cli.mode == Mode::Upscale || cli.mode == Mode::VidGen,
           "-M %s is not supported yet; supported modes: img_gen, vid_gen, upscale, convert, "
           "metadata, tokenize",
           mode_name(cli.mode));
  SD_CHECK(g.ad_model_path.empty(), "--ad-model: ADetailer is not supported yet");
  SD_CHECK(cli.imatrix_in.empty() && cli.imatrix_out.empty(),
           "--imat-in/--imat-out: importance matrices are not supported yet");

  const bool video = cli.mode == Mode::VidGen;
  if (video)
    check_video_writable(a);
  else
    check_outputs_writable(a, cli.mode == Mode::Upscale ? 1 : std::max(1, g.batch_count));
  InputImages inputs = load_input_images(cli, g);
  sd_ctx_params_t ctx_params = a.context.to_c_params(cli.taesd_preview_only);

  if (cli.mode == Mode::Upscale) {
    // The init image is the result; the upscaler does the work.
    const int n = 1;
    auto* images = static_cast<sd_image_t*>(std::malloc(sizeof(sd_image_t)));
    SD_CHECK(images, "out of memory");
    images[0] = copy_to_sd_image(inputs.init);
    OwnedImages owned(images, ImagesDeleter{n});
    // A failure was reported where it happened; nothing is written.
    if (!upscale_images(a, ctx_params, images, n)) return 1;
    return save_images(a, images, n) ? 0 : 1;
  }

  if (cli.preview_method != PREVIEW_NONE) {
    if (video) set_video_preview(cli, g);
    sd_set_preview_callback(on_preview, cli.preview_method, cli.preview_interval,
                            !cli.preview_noisy, cli.preview_noisy, &cli);
  }
  char* ctx_text = sd_ctx_params_to_str(&ctx_params);
  log_message(SD_LOG_DEBUG, "%s", ctx_text ? ctx_text : "");
  std::free(ctx_text);

  std::unique_ptr<sd_ctx_t, void (*)(sd_ctx_t*)> ctx(new_sd_ctx(&ctx_params), free_sd_ctx);
  SD_CHECK(ctx, "could not create the generation context (see the messages above)");

  // Resolve "the model's default" now, so the image metadata names what was used.
  if (g.sample_params.sample_method == SAMPLE_METHOD_COUNT) {
    g.sample_params.sample_method = sd_get_default_sample_method(ctx.get());
  }
  if (g.sample_params.scheduler == SCHEDULER_COUNT) {
    g.sample_params.scheduler = sd_get_default_scheduler(ctx.get(), g.sample_params.sample_method);
  }

  if (video) {
    SD_CHECK(sd_ctx_supports_video_generation(ctx.get()),
             "-M vid_gen needs a video model (Wan); this model makes images: use -M img_gen");
    SD_CHECK(inputs.refs.empty() && inputs.control.pixels.empty(),
             "-M vid_gen: -r and --control-image are not used for video; image to video takes "
             "-i (first frame) and --end-img (last), Wan VACE --control-video DIR and -i (a "
             "reference image)");
    if (g.batch_count > 1)
      log_message(SD_LOG_WARN, "-b %d: -M vid_gen makes one clip; the batch count is ignored",
                  g.batch_count);
    sd_vid_gen_params_t params = g.to_vid_c_params();
    attach_video_images(inputs, params);
    sd_image_t* frames = nullptr;
    int count = 0;
    const bool ok = generate_video(ctx.get(), &params, &frames, &count, nullptr);
    OwnedImages owned(frames, ImagesDeleter{count});
    SD_CHECK(ok && frames && count > 0, "generation failed (see the messages above)");
    return save_video(a, frames, count) ? 0 : 1;
  }

  sd_img_gen_params_t params = g.to_c_params();
  attach_input_images(inputs, params);
  // An upscale the images could not take is refused before they are generated.
  if (!a.context.esrgan_path.empty() && g.upscale_repeats > 0 && params.width > 0 &&
      params.height > 0) {
    std::unique_ptr<upscaler_ctx_t, void (*)(upscaler_ctx_t*)> upscaler(
        new_upscaler_ctx_with_type(a.context.esrgan_path.c_str(), a.context.diffusion_conv_direct,
                                   a.context.n_threads, g.upscale_tile_size, ctx_params.backend,
                                   ctx_params.params_backend, a.context.wtype),
        free_upscaler_ctx);
    SD_CHECK(upscaler, "could not open the upscaler (see the messages above)");
    check_upscaled_size(params.width, params.height, get_upscale_factor(upscaler.get()),
                        g.upscale_repeats);
  }
  char* params_text = sd_img_gen_params_to_str(&params);
  log_message(SD_LOG_DEBUG, "%s", params_text ? params_text : "");
  std::free(params_text);

  sd_image_t* images = nullptr;
  int count = 0;
  const bool ok = generate_image(ctx.get(), &params, &images, &count);
  OwnedImages owned(images, ImagesDeleter{count});
  SD_CHECK(ok && images && count > 0, "generation failed (see the messages above)");

  // sd.cpp compatibility: a failed upscale keeps the images as generated. The generation's
  // models are freed first, so the upscaler's memory does not add to theirs.
  if (!a.context.esrgan_path.empty() && g.upscale_repeats > 0) {
    ctx.reset();
    upscale_images(a, ctx_params, images, count);
  }
  return save_images(a, images, count) ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    Arguments a = parse_arguments(argc, argv);
    if (a.cli.help) {
      std::printf("%s\n%s", version_line().c_str(), usage(argv[0]).c_str());
      return 0;
    }
    if (a.cli.version) {
      std::printf("%s\n", version_line().c_str());
      return 0;
    }
    if (a.cli.list_devices) {
      // Remote devices are listed too when --rpc-servers names their servers.
      if (!a.context.rpc_servers.empty())
        sd::rpc::add_rpc_servers(sd::DeviceRegistry::instance(), a.context.rpc_servers,
                                 sd::rpc::client_options_from_environment());
      list_devices(a.cli.verbose);
      return 0;
    }
    set_log_style(a.cli.verbose, a.cli.color);
    resolve_and_validate(a);
    // The system info lists every device, which loads the GPU drivers: only when asked.
    if (a.cli.verbose)
      log_message(SD_LOG_DEBUG, "%s, %s", version_line().c_str(), sd_get_system_info());
    sd_set_log_callback(on_log, nullptr);
    sd_set_progress_callback(on_progress, nullptr);
    switch (a.cli.mode) {
      case Mode::Metadata:
        return run_metadata(a.cli);
      case Mode::Convert:
        return run_convert(a);
      case Mode::Tokenize:
        std::fputs(
            sd::api::token_line(sd::api::tokenize_text({a.cli.tokenizer_path, a.context.llm_path,
                                                        a.generation.prompt}))
                .c_str(),
            stdout);
        return 0;
      default:
        return run_generation(a);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", sd::escape_control_chars(e.what()).c_str());
    return 1;
  }
}
