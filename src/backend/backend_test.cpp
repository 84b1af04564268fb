#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include "backend/compute_buffer.h"
#include "backend/registry.h"
#include "tensor/error.h"
#include "tensor/ops/elementwise.h"
#include "tensor/ops/softmax.h"
#include "test_support.h"

namespace sd {
namespace {

TEST(DeviceRegistry, FindsCpuCaseInsensitively) {
  auto& reg = DeviceRegistry::instance();
  ASSERT_NE(reg.find("CPU"), nullptr);
  EXPECT_EQ(reg.find("cpu"), reg.find("CPU"));
  EXPECT_EQ(reg.find("CUDA7"), nullptr);
  EXPECT_EQ(reg.devices().front()->name(), "CPU");
}

TEST(DeviceRegistry, UnknownNameListsTheValidOnes) {
  try {
    DeviceRegistry::instance().get("tpu0");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("tpu0"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("CPU"), std::string::npos);
  }
}

TEST(CpuDevice, ReportsMemoryAndDescription) {
  Device& cpu = DeviceRegistry::instance().get("CPU");
  DeviceMemory mem = cpu.memory();
  EXPECT_GT(mem.total, 0u);
  EXPECT_LE(mem.free, mem.total);
  EXPECT_FALSE(cpu.description().empty());
  EXPECT_TRUE(cpu.caps().host_addressable);
}

TEST(CpuBuffer, ImpossibleAllocationIsAnErrorNotACrash) {
  Device& cpu = DeviceRegistry::instance().get("CPU");
  try {
    cpu.buffer_type().allocate(std::numeric_limits<size_t>::max() / 2);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cannot allocate"), std::string::npos) << e.what();
  }
}

TEST(CpuBuffer, SetGetRoundTripAndBoundsChecks) {
  Device& cpu = DeviceRegistry::instance().get("CPU");
  Context ctx;
  Tensor* t = ctx.new_tensor(DType::F32, {4}, "t");
  auto buf = cpu.buffer_type().allocate(t->nbytes());
  bind_tensor(*t, *buf, 0);
  const float in[4] = {1, 2, 3, 4};
  float out[4] = {};
  tensor_set(*t, in);
  tensor_get(*t, out);
  EXPECT_EQ(out[3], 4.0f);
  EXPECT_THROW(tensor_set(*t, in, 8, 16), Error);
  Tensor* big = ctx.new_tensor(DType::F32, {8}, "big");
  EXPECT_THROW(bind_tensor(*big, *buf, 0), Error);
}

TEST(ComputeBuffer, KeepsItsBufferForGraphsOfTheSameShape) {
  Device& cpu = DeviceRegistry::instance().get("CPU");
  ComputeBuffer memory(cpu.buffer_type());
  size_t first = 0;
  for (int call = 0; call < 3; ++call) {
    Context ctx;
    Tensor* x = ctx.new_tensor(DType::F32, {1024}, "x");
    Graph g = Graph::build({scale(ctx, add(ctx, x, x), 0.5f)});
    memory.allocate(g);
    if (call == 0) first = memory.capacity();
    EXPECT_EQ(memory.capacity(), first);
  }
}

#if defined(__GLIBC__) && !SD_TEST_ASAN
// RssAnon of this process in KiB.
size_t anonymous_kib() {
  std::ifstream in("/proc/self/status");
  std::string key;
  size_t kib = 0;
  while (in >> key) {
    if (key == "RssAnon:") {
      in >> kib;
      return kib;
    }
    in.ignore(std::numeric_limits<std::streamsize>::max(), '\n');
  }
  return 0;
}

TEST(CpuBackend, ReleasingCachesReturnsFreedHeapMemory) {
  // 200 MiB in blocks below glibc's mmap threshold, each pinned in place by a small block
  // after it, so freeing them leaves holes inside the heap, not at its top.
  constexpr size_t kBlock = 100 << 10, kBlocks = 2048;
  std::vector<void*> big, pins;
  for (size_t i = 0; i < kBlocks; ++i) {
    big.push_back(std::malloc(kBlock));
    std::memset(big.back(), 1, kBlock);
    pins.push_back(std::malloc(64));
  }
  for (void* p : big) std::free(p);
  const size_t before = anonymous_kib();
  Device& cpu = DeviceRegistry::instance().get("CPU");
  cpu.create_backend({})->release_caches();
  const size_t after = anonymous_kib();
  for (void* p : pins) std::free(p);
  EXPECT_GT(before, after + (100 << 10)) << "RssAnon " << before << " KiB -> " << after << " KiB";
}
#endif

TEST(CpuBackend, RefusesAGraphWithoutMemory) {
  Device& cpu = DeviceRegistry::instance().get("CPU");
  Context ctx;
  Tensor* x = ctx.new_tensor(DType::F32, {4}, "x");
  Graph g = Graph::build({add(ctx, x, x)});
  auto backend = cpu.create_backend({});
  EXPECT_THROW(backend->compute(g), Error);
}

// A device that computes everything the CPU does except softmax, as a GPU backend
// without that kernel would: planning must name the op and the device.
class NoSoftmaxDevice final : public Device {
 public:
  std::string name() const override { return "TEST0"; }
  std::string description() const override { return "test device"; }
  DeviceKind kind() const override { return DeviceKind::Gpu; }
  DeviceMemory memory() const override { return {}; }
  DeviceCaps caps() const override { return {}; }
  BufferType& buffer_type() override { return cpu().buffer_type(); }
  std::unique_ptr<Backend> create_backend(const BackendOptions& o) override {
    return cpu().create_backend(o);
  }
  bool supports_op(const Tensor& node) const override { return node.op != Op::Softmax; }

 private:
  static Device& cpu() { return DeviceRegistry::instance().get("CPU"); }
};

TEST(CheckSupported, NamesTheOpAndTheDevice) {
  Context ctx;
  Tensor* x = ctx.new_tensor(DType::F32, {4}, "x");
  Graph ok = Graph::build({add(ctx, x, x)});
  Graph bad = Graph::build({softmax(ctx, add(ctx, x, x))});
  NoSoftmaxDevice device;
  EXPECT_NO_THROW(check_supported(device, ok));
  try {
    check_supported(device, bad);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("softmax"), std::string::npos) << msg;
    EXPECT_NE(msg.find("TEST0"), std::string::npos) << msg;
  }
}

}  // namespace
}  // namespace sd
