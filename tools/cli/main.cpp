// sd-cli: the command-line front end. Until the generation pipeline lands it lists
// devices and reports its version; flags keep stable-diffusion.cpp's names.
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

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
      "  -v, --verbose         print extra information\n",
      argv0);
}

void list_devices() {
  std::printf("%-8s %-7s %-16s %s\n", "name", "kind", "free/total", "description");
  for (const auto& d : sd::DeviceRegistry::instance().devices()) {
    const sd::DeviceMemory mem = d->memory();
    const char* kind = d->kind() == sd::DeviceKind::Cpu   ? "cpu"
                       : d->kind() == sd::DeviceKind::Gpu ? "gpu"
                                                          : "remote";
    char memory[64];
    std::snprintf(memory, sizeof memory, "%.1f/%.1f GiB", static_cast<double>(mem.free) / (1u << 30),
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
};

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
    } else {
      sd::fail("unknown option '%s'; see %s --help", arg.c_str(), argv[0]);
    }
  }
  return o;
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
    print_usage(argv[0]);
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
