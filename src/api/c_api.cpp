// The C API's small services: machine and build facts, the device list, freeing what the
// library returned, and model conversion on top of api/convert.h.
#include <omp.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <optional>
#include <set>
#include <string>
#include <thread>

#include "api/callbacks.h"
#include "api/convert.h"
#include "backend/cpu/simd_target.h"
#include "backend/registry.h"
#if __has_include("sd_build_commit.h")
#include "sd_build_commit.h"  // SD_BUILD_COMMIT, generated at build time
#endif
#include "stable-diffusion.h"
#include "tensor/error.h"

#ifndef SD_BUILD_VERSION
#define SD_BUILD_VERSION "unknown"
#endif
#ifndef SD_BUILD_COMMIT
#define SD_BUILD_COMMIT "unknown"
#endif

namespace {

bool given(const char* s) {
  return s && *s;
}

// SD_TYPE_COUNT: keep each tensor's type; anything else must be a type convert writes.
std::optional<sd::DType> convert_output_type(sd_type_t type) {
  if (type == SD_TYPE_COUNT) return std::nullopt;
  const std::optional<sd::DType> dtype = sd::dtype_from_gguf_id(static_cast<uint32_t>(type));
  const auto& writable = sd::api::convert_types();
  SD_CHECK(dtype && std::find(writable.begin(), writable.end(), *dtype) != writable.end(),
           "cannot write type %s; valid types: %s", sd_type_name(type),
           sd::api::convert_type_list().c_str());
  return dtype;
}

bool run_convert(const char* input, const char* vae, const char* output, sd_type_t type,
                 const char* rules) {
  return sd::api::c_boundary("convert", false, [&] {
    SD_CHECK(given(input), "no input model given");
    SD_CHECK(given(output), "no output file given");
    sd::api::ConvertOptions options;
    options.input = input;
    options.output = output;
    options.vae = given(vae) ? vae : "";
    options.type = convert_output_type(type);
    options.tensor_type_rules = given(rules) ? rules : "";
    const sd::api::ConvertResult result = sd::api::convert_model(options);
    sd::api::log(SD_LOG_INFO, "convert: wrote %zu tensors to '%s'", result.tensors, output);
    return true;
  });
}

}  // namespace

extern "C" {

int32_t sd_get_num_physical_cores(void) {
#ifdef __linux__
  // Hyper-threads of one core share a thread_siblings mask: count distinct masks.
  std::set<std::string> cores;
  for (unsigned cpu = 0;; ++cpu) {
    std::ifstream siblings("/sys/devices/system/cpu/cpu" + std::to_string(cpu) +
                           "/topology/thread_siblings");
    if (!siblings) break;
    std::string mask;
    if (std::getline(siblings, mask)) cores.insert(mask);
  }
  if (!cores.empty()) return static_cast<int32_t>(cores.size());
#endif
  // sd.cpp's fallback: assume two hardware threads per core above four.
  const unsigned n = std::thread::hardware_concurrency();
  if (n == 0) return 4;
  return static_cast<int32_t>(n <= 4 ? n : n / 2);
}

const char* sd_get_system_info(void) {
  static const std::string info = [] {
    std::string s = "System Info: \n";
    s += "   SIMD = " + sd::simd_target_name() + " | ";
    s += "   OPENMP_THREADS = " + std::to_string(omp_get_max_threads()) + " | ";
    for (const auto& device : sd::DeviceRegistry::instance().devices()) {
      s += "   " + device->name() + " = " + device->description() + " | ";
    }
    return s;
  }();
  return info.c_str();
}

const char* sd_version(void) {
  return SD_BUILD_VERSION;
}
const char* sd_commit(void) {
  return SD_BUILD_COMMIT;
}

size_t sd_list_devices(char* buffer, size_t buffer_size) {
  std::string list;
  for (const auto& device : sd::DeviceRegistry::instance().devices()) {
    list += device->name() + "\t" + device->description();
    // A remote device's memory is the first thing to know about it.
    if (device->kind() == sd::DeviceKind::Remote) {
      const sd::DeviceMemory m = device->memory();
      list += sd::format(", %.1f of %.1f GiB free", static_cast<double>(m.free) / (1u << 30),
                         static_cast<double>(m.total) / (1u << 30));
    }
    list += "\n";
  }
  if (buffer && buffer_size > 0) {
    const size_t n = std::min(list.size(), buffer_size - 1);
    std::memcpy(buffer, list.data(), n);
    buffer[n] = '\0';
  }
  return list.size();
}

void free_sd_images(sd_image_t* images, int num_images) {
  if (!images) return;
  for (int i = 0; i < num_images; ++i) std::free(images[i].data);
  std::free(images);
}

void free_sd_audio(sd_audio_t* audio) {
  if (!audio) return;
  std::free(audio->data);
  std::free(audio);
}

bool convert(const char* input_path, const char* vae_path, const char* output_path,
             enum sd_type_t output_type, const char* tensor_type_rules, bool convert_name) {
  // Names are always converted to the canonical scheme; convert_name changes nothing.
  (void)convert_name;
  return run_convert(input_path, vae_path, output_path, output_type, tensor_type_rules);
}

bool convert_with_components(const char* model_path, const char* clip_l_path,
                             const char* clip_g_path, const char* t5xxl_path,
                             const char* diffusion_model_path, const char* vae_path,
                             const char* output_path, enum sd_type_t output_type,
                             const char* tensor_type_rules, bool convert_name, int n_threads) {
  (void)convert_name;
  (void)n_threads;
  for (const auto& [path, flag] :
       {std::pair{clip_l_path, "--clip_l"}, std::pair{clip_g_path, "--clip_g"},
        std::pair{t5xxl_path, "--t5xxl"}, std::pair{diffusion_model_path, "--diffusion-model"}}) {
    if (given(path)) {
      sd::api::log(SD_LOG_ERROR,
                   "convert: separate component files (%s) are not supported yet; convert a "
                   "full checkpoint with -m, optionally with --vae",
                   flag);
      return false;
    }
  }
  return run_convert(model_path, vae_path, output_path, output_type, tensor_type_rules);
}

}  // extern "C"
