// Shared test helpers: random data, running a graph on a backend, comparing results.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/cpu/cpu_device.h"
#include "tensor/context.h"

// SD_TEST_ASAN is 1 in a build with AddressSanitizer (GCC says so with __SANITIZE_ADDRESS__,
// Clang with __has_feature), for the few tests that measure memory or take minutes there.
#if defined(__SANITIZE_ADDRESS__)
#define SD_TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SD_TEST_ASAN 1
#endif
#endif
#ifndef SD_TEST_ASAN
#define SD_TEST_ASAN 0
#endif

namespace sd::test {

// Path of ../shared beside the project, or "" when it is absent.
std::string shared_dir();

// One CPU backend with two threads (fast kernels) for the whole test process.
Backend& cpu_backend();
// One CPU backend per kernel set (two threads), for comparing fast kernels with the reference.
Backend& cpu_backend(CpuKernels kernels);

// Fills a float or quantizable tensor's host data with values uniform in [lo, hi).
std::vector<float> random_values(int64_t n, uint32_t seed, float lo = -1.0f, float hi = 1.0f);

// Builds a graph with `build` in a fresh context, gives every leaf random data (leaf i
// gets seed + i; `fill` may override a leaf's data), computes it with the given CPU kernel
// set and returns the outputs as f32.
struct GraphCase {
  std::function<std::vector<Tensor*>(Context&)> build;
  // Values for a leaf; default uniform [-1, 1). Called with the leaf and its index.
  std::function<std::vector<float>(const Tensor&, int)> fill;
  uint32_t seed = 1;
  bool reuse_memory = true;
};

std::vector<std::vector<float>> run_case(const GraphCase& c, CpuKernels kernels, int threads = 2);
// The same on any device: its buffers hold the graph, its backend computes it, and the
// outputs are copied back to the host.
std::vector<std::vector<float>> run_case_on(const GraphCase& c, Device& device);

// Values for leaves by name, for hand-computed op tests.
using NamedValues = std::map<std::string, std::vector<float>>;

// Runs `build` with reference kernels; leaves named in `values` get those values, the
// others random ones.
std::vector<std::vector<float>> run_reference(
    const std::function<std::vector<Tensor*>(Context&)>& build, const NamedValues& values = {});
// The same for a graph with one output.
std::vector<float> run_reference_single(const std::function<Tensor*(Context&)>& build,
                                        const NamedValues& values = {});

// Max |a - b| / (atol + rtol * |b|) over all elements; <= 1 passes.
double max_scaled_error(const std::vector<float>& a, const std::vector<float>& b, double atol,
                        double rtol);

// RMS of got - ref relative to the RMS of ref (the plain RMS when ref is all zero).
double relative_rmse(const std::vector<float>& ref, const std::vector<float>& got);

// Runs `c` with fast and reference kernels and expects every output to agree within
// atol + rtol * |reference|.
void expect_fast_matches_reference(const GraphCase& c, double atol, double rtol);

}  // namespace sd::test
