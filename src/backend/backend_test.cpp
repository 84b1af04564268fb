#include <gtest/gtest.h>

#include <limits>

#include "backend/compute_buffer.h"
#include "backend/registry.h"
#include "tensor/error.h"
#include "tensor/ops/elementwise.h"

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

TEST(CpuBackend, RefusesAGraphWithoutMemory) {
  Device& cpu = DeviceRegistry::instance().get("CPU");
  Context ctx;
  Tensor* x = ctx.new_tensor(DType::F32, {4}, "x");
  Graph g = Graph::build({add(ctx, x, x)});
  auto backend = cpu.create_backend({});
  EXPECT_THROW(backend->compute(g), Error);
}

}  // namespace
}  // namespace sd
