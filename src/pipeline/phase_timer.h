// How long each phase of a generation took and what its weights cost, for the log.
#pragma once

#include <chrono>
#include <functional>
#include <string>

#include "nn/graph_runner.h"
#include "tensor/error.h"
#include "weights/model_manager.h"

namespace sd::pipeline {

// Tells `info` a module's report ("diffusion: ..."), when it has one: how its weights were
// streamed within a --max-vram budget, the arithmetic rate it ran at.
inline void report_module(const std::function<void(const std::string&)>& info, const char* module,
                          const std::string& report) {
  if (info && !report.empty()) info(std::string(module) + ": " + report);
}

// Tells `info` what a network's runner did in a phase that ends: its weights' streaming,
// if any, and the arithmetic rate it ran at.
inline void report_runner(const std::function<void(const std::string&)>& info, const char* module,
                          const nn::GraphRunner& runner) {
  report_module(info, module, runner.streaming_report());
  report_module(info, module, runner.work_report());
}

// Reports how long each phase took.
class PhaseTimer {
 public:
  PhaseTimer(const std::function<void(const std::string&)>& info,
             const weights::ModelManager& weights)
      : info_(info),
        weights_(weights),
        start_(std::chrono::steady_clock::now()),
        traffic_(weights.traffic()) {}
  // Logs the phase's time and what its weights cost: bytes read from the files (and
  // converted), mapped, and freed when it ended; what `disk` residency pays per phase.
  void done(const std::string& phase) {
    const auto now = std::chrono::steady_clock::now();
    const weights::WeightTraffic t = weights_.traffic();
    if (info_)
      info_(
          format("%s completed, taking %.2fs (weights: %.0f MB read, %.0f MB mapped, %.0f MB "
                 "freed)",
                 phase.c_str(), std::chrono::duration<double>(now - start_).count(),
                 mb(t.loaded - traffic_.loaded), mb(t.mapped - traffic_.mapped),
                 mb(t.freed - traffic_.freed)));
    start_ = now;
    traffic_ = t;
  }

 private:
  static double mb(size_t bytes) { return static_cast<double>(bytes) / 1e6; }

  const std::function<void(const std::string&)>& info_;
  const weights::ModelManager& weights_;
  std::chrono::steady_clock::time_point start_;
  weights::WeightTraffic traffic_;
};

}  // namespace sd::pipeline
