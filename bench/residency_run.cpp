// Memory and time of one generation under one weight residency, phase by phase: the
// numbers docs/performance.md reports for --params-backend. One process per run, so each
// peak is its own.
//
//   sd-residency-run MODEL PARAMS_BACKEND [SIZE] [STEPS] [TYPE]
//   e.g. sd-residency-run sd15.safetensors disk 512 3
//        sd-residency-run sd15.safetensors "" 512 3 bf16   (as sd-cli --type bf16)
//
// Prints one Markdown table row: params backend | peak RSS while loading, text encoding,
// sampling, decoding (GB) | RSS at the end of each phase | first step s (weights fault
// in) | seconds per later step | total s.
// The peak of a phase is VmHWM after resetting it (/proc/self/clear_refs) at the phase
// start; needs SD_CLIP_VOCAB or a cached vocabulary.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "pipeline/stable_diffusion.h"
#include "tensor/dtype.h"
#include "tensor/error.h"

namespace {

// VmRSS or VmHWM of this process, in GB.
double status_gb(const char* field) {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind(field, 0) == 0) return std::atof(line.c_str() + std::string(field).size()) / 1e6;
  return 0;
}

void reset_peak() {
  std::ofstream("/proc/self/clear_refs") << "5";
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s MODEL PARAMS_BACKEND [SIZE] [STEPS] [TYPE]\n", argv[0]);
    return 2;
  }
  try {
    sd::pipeline::ModelOptions o;
    o.model = argv[1];
    o.params_backend = argv[2];
    if (argc > 5) {
      o.weight_type = sd::dtype_from_name(argv[5]);
      if (!o.weight_type) {
        std::fprintf(stderr, "error: unknown weight type '%s'\n", argv[5]);
        return 2;
      }
    }
    if (const char* v = std::getenv("SD_CLIP_VOCAB")) o.clip_vocab = v;
    struct Phase {
      double peak, end;
    };
    std::vector<Phase> phases;
    auto phase_end = [&] {
      phases.push_back({status_gb("VmHWM:"), status_gb("VmRSS:")});
      reset_peak();
    };
    const auto start = std::chrono::steady_clock::now();
    reset_peak();
    sd::pipeline::StableDiffusion sd(o);
    phase_end();  // loading
    sd::pipeline::ImageRequest r;
    r.prompt = "a photograph of an astronaut riding a horse";
    r.width = r.height = argc > 3 ? std::atoi(argv[3]) : 512;
    r.steps = argc > 4 ? std::atoi(argv[4]) : 3;
    r.seed = 42;
    double step_seconds = 0, first_step = 0;
    int timed_steps = 0;
    r.progress = [&](int step, int, double seconds) {
      if (step == 1) first_step = seconds;
      if (step > 1) {  // the first step also faults the weights in
        step_seconds += seconds;
        ++timed_steps;
      }
    };
    r.info = [&](const std::string&) { phase_end(); };
    sd.generate(r);
    const double total =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::printf("| %s |", o.params_backend.empty() ? "(default)" : o.params_backend.c_str());
    for (const Phase& p : phases) std::printf(" %.2f |", p.peak);
    for (const Phase& p : phases) std::printf(" %.2f |", p.end);
    std::printf(" %.2f | %.2f | %.1f |\n", first_step,
                timed_steps ? step_seconds / timed_steps : 0.0, total);
    return 0;
  } catch (const sd::Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
