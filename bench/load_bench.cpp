// Loading a whole model's weights: ModelLoader::add (parse the file, map names) and then
// ModelManager::get for every tensor, as a generation's first steps do.
//   BM_LoadWeights/<file>/mmap        weights alias the mapped file (no copy); the time is
//                                     parsing and binding only, pages are not touched
//   BM_LoadWeights/<file>/mmap_touch  the same, then one byte of every 4 KiB page read,
//                                     so every page is faulted in, as a first UNet call does
//   BM_LoadWeights/<file>/copy        use_mmap = false: every tensor read into its own
//                                     buffer (what a loader without mmap does)
// Counters: bytes_per_second over the tensors' bytes, cpu_s (process CPU seconds, all
// threads), tensors. Files come from SD_LOAD_BENCH_FILES (comma-separated paths); without
// it nothing is registered. Times depend on the page cache: run each file once before
// (e.g. `cat file > /dev/null`) to measure a warm cache, or drop caches for a cold one.
// Run: SD_LOAD_BENCH_FILES=model.safetensors,model_q8_0.gguf sd-bench
//        --benchmark_filter=LoadWeights --benchmark_repetitions=3
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <ctime>
#include <string>
#include <vector>

#include "backend/registry.h"
#include "process_time.h"
#include "weights/model_loader.h"
#include "weights/model_manager.h"

namespace sd {
namespace {

enum class LoadMode { Mmap, MmapTouch, Copy };

void BM_LoadWeights(benchmark::State& state, const std::string& path, LoadMode mode) {
  Device& cpu = DeviceRegistry::instance().get("CPU");
  uint64_t bytes = 0;
  size_t tensors = 0;
  double cpu_s = 0;
  for (auto _ : state) {
    const double cpu0 = process_cpu_seconds();
    weights::ModelLoader loader;
    loader.add(path);
    weights::ModelManagerOptions options;
    options.use_mmap = mode != LoadMode::Copy;
    weights::ModelManager manager(loader, cpu, options);
    Context ctx;
    bytes = 0;
    unsigned sum = 0;
    for (const auto& [name, source] : loader.tensors()) {
      const Tensor* t = manager.get(ctx, name, source.ne);
      bytes += t->nbytes();
      if (mode == LoadMode::MmapTouch) {
        const auto* p = static_cast<const volatile uint8_t*>(t->data);
        for (size_t i = 0; i < t->nbytes(); i += 4096) sum += p[i];
      }
    }
    benchmark::DoNotOptimize(sum);
    tensors = loader.tensors().size();
    cpu_s = process_cpu_seconds() - cpu0;
  }
  state.SetBytesProcessed(static_cast<int64_t>(bytes) * state.iterations());
  state.counters["cpu_s"] = cpu_s;
  state.counters["tensors"] = static_cast<double>(tensors);
}

std::string base_name(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// Registered from the environment at start-up, one set per file.
const bool kRegistered = [] {
  const char* env = std::getenv("SD_LOAD_BENCH_FILES");
  if (!env) return false;
  const std::string list = env;
  for (size_t begin = 0; begin <= list.size();) {
    size_t end = list.find(',', begin);
    if (end == std::string::npos) end = list.size();
    const std::string path = list.substr(begin, end - begin);
    begin = end + 1;
    if (path.empty()) continue;
    for (auto [mode, label] :
         {std::pair{LoadMode::Mmap, "mmap"}, std::pair{LoadMode::MmapTouch, "mmap_touch"},
          std::pair{LoadMode::Copy, "copy"}}) {
      benchmark::RegisterBenchmark(("BM_LoadWeights/" + base_name(path) + "/" + label).c_str(),
                                   BM_LoadWeights, path, mode)
          ->Iterations(1)
          ->UseRealTime()
          ->MeasureProcessCPUTime()
          ->Unit(benchmark::kMillisecond);
    }
  }
  return true;
}();

}  // namespace
}  // namespace sd
