#include "test_support.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <random>

#include "backend/compute_buffer.h"
#include "backend/registry.h"
#include "tensor/error.h"
#include "tensor/graph.h"
#include "tensor/ops/access.h"
#include "tensor/quant/quant.h"
#include "tensor/uniform_float.h"

namespace sd::test {

std::string shared_dir() {
  std::error_code ec;
  return std::filesystem::is_directory(SD_SHARED_DIR, ec) ? std::string(SD_SHARED_DIR) : "";
}

Backend& cpu_backend() {
  return cpu_backend(CpuKernels::Fast);
}

Backend& cpu_backend(CpuKernels kernels) {
  auto make = [kernels] {
    auto& cpu = static_cast<CpuDevice&>(DeviceRegistry::instance().get("CPU"));
    return cpu.create_backend(BackendOptions{2}, kernels);
  };
  if (kernels == CpuKernels::Fast) {
    static std::unique_ptr<Backend> fast = make();
    return *fast;
  }
  static std::unique_ptr<Backend> reference = make();
  return *reference;
}

std::vector<float> random_values(int64_t n, uint32_t seed, float lo, float hi) {
  std::mt19937 rng(seed);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = uniform_float(rng, lo, hi);
  return v;
}

namespace {

// Writes f32 values into a contiguous leaf of any dtype (quantizing block types).
void set_leaf(Tensor& t, const std::vector<float>& values) {
  std::vector<uint8_t> bytes(t.nbytes());
  if (t.type == DType::I32) {
    for (size_t i = 0; i < values.size(); ++i) {
      int32_t v = static_cast<int32_t>(values[i]);
      std::memcpy(bytes.data() + 4 * i, &v, 4);
    }
  } else {
    quantize_rows(t.type, values.data(), bytes.data(), t.nrows(), t.ne[0]);
  }
  tensor_set(t, bytes.data());
}

std::vector<float> get_f32(const Tensor& t) {
  std::vector<float> out(static_cast<size_t>(t.nelements()));
  size_t k = 0;
  std::vector<float> row(static_cast<size_t>(t.ne[0]));
  for (int64_t i3 = 0; i3 < t.ne[3]; ++i3)
    for (int64_t i2 = 0; i2 < t.ne[2]; ++i2)
      for (int64_t i1 = 0; i1 < t.ne[1]; ++i1) {
        load_row_f32(&t, i1, i2, i3, row.data());
        for (float v : row) out[k++] = v;
      }
  return out;
}

}  // namespace

namespace {

// Builds the case's graph in `device`'s memory, gives the leaves their values, computes it
// with `make_backend()` and returns the outputs as f32.
std::vector<std::vector<float>> run_case_with(
    const GraphCase& c, Device& device,
    const std::function<std::unique_ptr<Backend>()>& make_backend) {
  Context ctx;
  std::vector<Tensor*> outputs = c.build(ctx);
  Graph graph = Graph::build(outputs);
  ComputeBuffer memory(device.buffer_type(), c.reuse_memory);
  memory.allocate(graph);
  for (size_t i = 0; i < graph.leafs.size(); ++i) {
    Tensor& leaf = *graph.leafs[i];
    std::vector<float> values = c.fill ? c.fill(leaf, static_cast<int>(i)) : std::vector<float>{};
    if (values.empty()) values = random_values(leaf.nelements(), c.seed + static_cast<uint32_t>(i));
    if (values.size() != static_cast<size_t>(leaf.nelements())) {
      throw Error(format("[test] fill gave %zu values for leaf '%s' of %lld elements",
                         values.size(), leaf.name.c_str(),
                         static_cast<long long>(leaf.nelements())));
    }
    set_leaf(leaf, values);
  }
  auto backend = make_backend();
  backend->compute(graph);
  backend->synchronize();
  std::vector<std::vector<float>> results;
  for (Tensor* t : outputs) {
    if (t->buffer && t->buffer->is_host()) {
      results.push_back(get_f32(*t));
      continue;
    }
    // A device's output: copied into host memory of the same layout, then read.
    SD_CHECK(t->is_contiguous(), "[test] output '%s' is not contiguous", t->name.c_str());
    std::vector<uint8_t> bytes(t->nbytes());
    tensor_get(*t, bytes.data());
    Tensor host = *t;
    host.data = bytes.data();
    host.buffer = nullptr;
    results.push_back(get_f32(host));
  }
  return results;
}

}  // namespace

std::vector<std::vector<float>> run_case(const GraphCase& c, CpuKernels kernels, int threads) {
  auto& cpu = static_cast<CpuDevice&>(DeviceRegistry::instance().get("CPU"));
  return run_case_with(c, cpu,
                       [&] { return cpu.create_backend(BackendOptions{threads}, kernels); });
}

std::vector<std::vector<float>> run_case_on(const GraphCase& c, Device& device) {
  return run_case_with(c, device, [&] { return device.create_backend(BackendOptions{}); });
}

std::vector<std::vector<float>> run_reference(
    const std::function<std::vector<Tensor*>(Context&)>& build, const NamedValues& values) {
  GraphCase c;
  c.build = build;
  c.fill = [&values](const Tensor& t, int) {
    auto it = values.find(t.name);
    return it == values.end() ? std::vector<float>{} : it->second;
  };
  return run_case(c, CpuKernels::Reference);
}

std::vector<float> run_reference_single(const std::function<Tensor*(Context&)>& build,
                                        const NamedValues& values) {
  return run_reference([&build](Context& ctx) { return std::vector<Tensor*>{build(ctx)}; },
                       values)[0];
}

double relative_rmse(const std::vector<float>& ref, const std::vector<float>& got) {
  double err = 0, sig = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    const double d = static_cast<double>(got[i]) - ref[i];
    err += d * d;
    sig += static_cast<double>(ref[i]) * ref[i];
  }
  return sig > 0 ? std::sqrt(err / sig) : std::sqrt(err / static_cast<double>(ref.size()));
}

double max_scaled_error(const std::vector<float>& a, const std::vector<float>& b, double atol,
                        double rtol) {
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double diff = std::fabs(static_cast<double>(a[i]) - b[i]);
    const double scaled = diff / (atol + rtol * std::fabs(static_cast<double>(b[i])));
    if (std::isnan(a[i]) != std::isnan(b[i])) return INFINITY;
    if (!std::isnan(scaled)) worst = std::max(worst, scaled);
  }
  return worst;
}

void expect_fast_matches_reference(const GraphCase& c, double atol, double rtol) {
  auto fast = run_case(c, CpuKernels::Fast);
  auto ref = run_case(c, CpuKernels::Reference);
  ASSERT_EQ(fast.size(), ref.size());
  for (size_t i = 0; i < fast.size(); ++i) {
    ASSERT_EQ(fast[i].size(), ref[i].size());
    EXPECT_LE(max_scaled_error(fast[i], ref[i], atol, rtol), 1.0)
        << "output " << i << " differs beyond atol " << atol << " + rtol " << rtol;
  }
}

}  // namespace sd::test
