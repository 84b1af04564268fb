// sd-cli: the command-line front end. Until the generation pipeline lands it lists
// devices, reports its version and converts models; flags keep stable-diffusion.cpp's names.
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "api/convert.h"
#include "backend/registry.h"
#include "tensor/error.h"

namespace {

void print_usage(const char* argv0) {
  std::printf(
      "usage: %s [options]\n"
      "\n"
      "Options:\n"
      "  -h, --help            show this help and exit\n"
      "  --version             print the version and exit\n"
      "  --list-devices        list the devices modules can run on, and exit\n"
      "  -t, --threads N       CPU threads (default: all cores)\n"
      "  -v, --verbose         print extra information\n"
      "  -M, --mode MODE       img_gen (default) or convert\n"
      "  -m, --model PATH      model file or diffusers folder\n"
      "  -o, --output PATH     output file (convert: a .gguf file)\n"
      "  --type TYPE           convert: weight type, one of %s\n"
      "                        (default: keep each tensor's type)\n"
      "  --tensor-type-rules R convert: per-tensor types, \"regex=type,...\";\n"
      "                        the first matching rule wins\n"
      "  --vae PATH            VAE file replacing the model's VAE\n",
      argv0, sd::api::convert_type_list().c_str());
}

void list_devices() {
  std::printf("%-8s %-7s %-16s %s\n", "name", "kind", "free/total", "description");
  for (const auto& d : sd::DeviceRegistry::instance().devices()) {
    const sd::DeviceMemory mem = d->memory();
    const char* kind = d->kind() == sd::DeviceKind::Cpu   ? "cpu"
                       : d->kind() == sd::DeviceKind::Gpu ? "gpu"
                                                          : "remote";
    char memory[64];
    std::snprintf(memory, sizeof memory, "%.1f/%.1f GiB",
                  static_cast<double>(mem.free) / (1u << 30),
                  static_cast<double>(mem.total) / (1u << 30));
    std::printf("%-8s %-7s %-16s %s\n", d->name().c_str(), kind, memory, d->description().c_str());
  }
}

struct Options {
  bool help = false;
  bool version = false;
  bool list_devices = false;
  int threads = 0;
  bool verbose = false;
  std::string mode = "img_gen";
  bool mode_given = false;
  std::string model, output, vae, tensor_type_rules;
  std::optional<sd::DType> type;
};

constexpr const char* kModes[] = {"img_gen", "convert"};

std::string lowercase(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&]() -> std::string {
      SD_CHECK(i + 1 < argc, "option %s needs a value", arg.c_str());
      return argv[++i];
    };
    if (arg == "-h" || arg == "--help") {
      o.help = true;
    } else if (arg == "--version") {
      o.version = true;
    } else if (arg == "--list-devices") {
      o.list_devices = true;
    } else if (arg == "-v" || arg == "--verbose") {
      o.verbose = true;
    } else if (arg == "-t" || arg == "--threads") {
      const std::string v = value();
      char* end = nullptr;
      long n = std::strtol(v.c_str(), &end, 10);
      SD_CHECK(end && *end == '\0' && n >= -1 && n <= 4096,
               "--threads takes a whole number (0 or -1: all cores), got '%s'", v.c_str());
      o.threads = static_cast<int>(n);
    } else if (arg == "-M" || arg == "--mode") {
      o.mode = lowercase(value());
      o.mode_given = true;
      bool known = false;
      for (const char* m : kModes) known = known || o.mode == m;
      SD_CHECK(known, "unknown mode '%s'; valid modes: img_gen, convert", o.mode.c_str());
    } else if (arg == "-m" || arg == "--model") {
      o.model = value();
    } else if (arg == "-o" || arg == "--output") {
      o.output = value();
    } else if (arg == "--type") {
      o.type = sd::api::parse_convert_type(value());
    } else if (arg == "--tensor-type-rules") {
      o.tensor_type_rules = value();
    } else if (arg == "--vae") {
      o.vae = value();
    } else {
      sd::fail("unknown option '%s'; see %s --help", arg.c_str(), argv[0]);
    }
  }
  return o;
}

int run_convert(const Options& o) {
  SD_CHECK(!o.model.empty(), "convert needs an input model: -m FILE");
  SD_CHECK(!o.output.empty(), "convert needs an output file: -o OUT.gguf");
  sd::api::ConvertOptions c;
  c.input = o.model;
  c.output = o.output;
  c.vae = o.vae;
  c.type = o.type;
  c.tensor_type_rules = o.tensor_type_rules;
  c.progress = [](const sd::api::ConvertProgress& p) {
    std::fprintf(stderr, "\r[%zu/%zu] %.1f/%.1f MiB  %-60.*s", p.index, p.count,
                 static_cast<double>(p.bytes_written) / (1 << 20),
                 static_cast<double>(p.bytes_total) / (1 << 20), static_cast<int>(p.name.size()),
                 p.name.data());
    if (p.index == p.count) std::fputc('\n', stderr);
  };
  const sd::api::ConvertResult r = sd::api::convert_model(c);
  std::string counts;
  for (const auto& [type, n] : r.type_counts) {
    if (!counts.empty()) counts += ", ";
    counts += std::to_string(n) + " " + std::string(sd::dtype_name(type));
  }
  std::fprintf(stderr, "wrote %s: %zu tensors (%s), %.1f MiB\n", o.output.c_str(), r.tensors,
               counts.c_str(), static_cast<double>(r.bytes) / (1 << 20));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const Options o = parse(argc, argv);
    if (o.help) {
      print_usage(argv[0]);
      return 0;
    }
    if (o.version) {
      std::printf("sd-cli %s\n", SD_VERSION);
      return 0;
    }
    if (o.list_devices) {
      list_devices();
      return 0;
    }
    if (o.mode == "convert") return run_convert(o);
    if (o.mode_given || !o.model.empty()) {
      sd::fail("generation is not built yet; use -M convert, --list-devices or --version");
    }
    print_usage(argv[0]);
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
