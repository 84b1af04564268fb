// Vulkan device discovery: names, kinds, memory, and that a run that does not name a Vulkan
// device never loads a driver.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "backend/backend_manager.h"
#include "backend/compute_buffer.h"
#include "backend/cpu/cpu_device.h"
#include "backend/registry.h"
#include "backend/vulkan/vulkan_context.h"
#include "backend/vulkan/vulkan_device.h"
#include "backend/vulkan/vulkan_test_util.h"
#include "tensor/error.h"
#include "tensor/graph.h"
#include "tensor/ops/cast.h"
#include "tensor/ops/elementwise.h"

namespace sd::vulkan {
namespace {

TEST(VulkanDevice, DevicesAreNamedInOrderWithTheirMemory) {
  DeviceRegistry registry;
  register_vulkan_devices(registry);
  if (registry.devices().empty()) GTEST_SKIP() << "no Vulkan device here";
  for (size_t i = 0; i < registry.devices().size(); ++i) {
    const Device& d = *registry.devices()[i];
    EXPECT_EQ(d.name(), "Vulkan" + std::to_string(i));
    EXPECT_FALSE(d.description().empty());
    EXPECT_GT(d.memory().total, 0u);
    EXPECT_LE(d.memory().free, d.memory().total);
    EXPECT_FALSE(d.caps().host_addressable);
  }
}

TEST(VulkanDevice, NoneTurnsDiscoveryOff) {
  setenv("SD_VULKAN_DEVICES", "none", 1);
  DeviceRegistry registry;
  register_vulkan_devices(registry);
  unsetenv("SD_VULKAN_DEVICES");
  EXPECT_TRUE(registry.devices().empty());
}

TEST(VulkanDevice, AutoPicksNoVulkanDeviceAndLoadsNoDriver) {
  DeviceRegistry registry;
  registry.add(std::make_unique<CpuDevice>());
  bool discovered = false;
  registry.add_source([&](DeviceRegistry& r) {
    discovered = true;
    register_vulkan_devices(r);
  });
  BackendManager automatic("auto", "", {}, registry);
  EXPECT_EQ(automatic.compute_device(Module::Diffusion).name(), "CPU");
  EXPECT_FALSE(discovered) << "resolving auto ran the Vulkan discovery";
  EXPECT_EQ(peak_memory_report(registry), "");
  EXPECT_FALSE(discovered) << "the report after a run ran the Vulkan discovery";
  if (!registry.find("vulkan0")) GTEST_SKIP() << "no Vulkan device here";
  EXPECT_TRUE(discovered);
  // Still the CPU once the devices are known: Vulkan devices are picked by name.
  BackendManager again("auto", "", {}, registry);
  EXPECT_EQ(again.compute_device(Module::Diffusion).name(), "CPU");
  BackendManager named("vulkan0", "", {}, registry);
  EXPECT_EQ(named.compute_device(Module::Diffusion).name(), "Vulkan0");
}

TEST(VulkanDevice, SoftwareDevicesAreNotPickedByGpu) {
  DeviceRegistry registry;
  registry.add(std::make_unique<CpuDevice>());
  register_vulkan_devices(registry);
  bool software = false;
  for (const auto& d : registry.devices()) software |= d->kind() == DeviceKind::Software;
  bool gpu = false;
  for (const auto& d : registry.devices()) gpu |= d->kind() == DeviceKind::Gpu;
  if (!software || gpu) GTEST_SKIP() << "needs a software Vulkan device and no GPU";
  EXPECT_THROW(BackendManager("gpu", "", {}, registry), Error);
}

// Memory the host cannot map (a discrete GPU without resizable BAR) is reached through a
// staging buffer: partial copies at any byte offset keep the bytes around them.
TEST(VulkanDevice, StagedCopiesReachEveryByte) {
  SD_REQUIRE_VULKAN(device);
  setenv("SD_VULKAN_STAGING", "1", 1);
  std::unique_ptr<Buffer> buffer = device->buffer_type().allocate(1001);
  unsetenv("SD_VULKAN_STAGING");
  ASSERT_FALSE(static_cast<VulkanBuffer&>(*buffer).mapped());
  Context ctx;
  Tensor* t = ctx.new_tensor(DType::F16, make_shape({500}), "bytes");
  bind_tensor(*t, *buffer, 0);
  std::vector<uint8_t> whole(1000), part{1, 2, 3, 4, 5};
  for (size_t i = 0; i < whole.size(); ++i) whole[i] = static_cast<uint8_t>(i * 7 + 1);
  tensor_set(*t, whole.data());
  tensor_set(*t, part.data(), 3, part.size());  // starts and ends inside a word
  std::copy(part.begin(), part.end(), whole.begin() + 3);
  std::vector<uint8_t> back(1000);
  tensor_get(*t, back.data());
  EXPECT_EQ(back, whole);
  std::vector<uint8_t> middle(9);
  tensor_get(*t, middle.data(), 501, middle.size());
  EXPECT_TRUE(std::equal(middle.begin(), middle.end(), whole.begin() + 501));
}

// A model's thousands of small weights share a few device allocations; a large one gets its
// own; freed ranges are reused.
TEST(VulkanDevice, SmallBuffersShareBlocks) {
  SD_REQUIRE_VULKAN(device);
  BufferType& type = device->buffer_type();
  std::vector<std::unique_ptr<Buffer>> small;
  for (int i = 0; i < 500; ++i) small.push_back(type.allocate(1000 + 13 * i));
  std::vector<std::pair<size_t, size_t>> ranges;  // (start, end) within the shared VkBuffer
  VkBuffer shared = static_cast<VulkanBuffer&>(*small[0]).handle();
  for (auto& b : small) {
    auto& vb = static_cast<VulkanBuffer&>(*b);
    EXPECT_EQ(vb.handle(), shared) << "500 buffers of about 4 KiB fit one block";
    Tensor t;
    t.data = b->base();
    const size_t start = vb.offset_of(t);
    EXPECT_EQ(start % type.alignment(), 0u);
    ranges.push_back({start, start + b->size()});
  }
  std::sort(ranges.begin(), ranges.end());
  for (size_t i = 1; i < ranges.size(); ++i) EXPECT_LE(ranges[i - 1].second, ranges[i].first);

  std::unique_ptr<Buffer> large = type.allocate(VulkanMemoryPool::kBlockBytes / 2);
  EXPECT_NE(static_cast<VulkanBuffer&>(*large).handle(), shared);

  // A freed range is found again by the next request of its size.
  Tensor t;
  t.data = small[10]->base();
  const size_t freed_at = static_cast<VulkanBuffer&>(*small[10]).offset_of(t);
  small[10].reset();
  std::unique_ptr<Buffer> again = type.allocate(1000);
  t.data = again->base();
  EXPECT_EQ(static_cast<VulkanBuffer&>(*again).offset_of(t), freed_at);
}

// The peak counts memory held at once: a freed block lowers what is held, not the peak,
// and the report names the device with its peak.
TEST(VulkanDevice, PeakMemoryCountsWhatWasHeldAtOnce) {
  SD_REQUIRE_VULKAN(device);
  VulkanContext& ctx = static_cast<VulkanDevice&>(*device).context();
  const size_t bytes = VulkanMemoryPool::kBlockBytes;  // a block of its own
  const size_t held = ctx.device_bytes();
  {
    std::unique_ptr<Buffer> one = device->buffer_type().allocate(bytes);
    EXPECT_GE(ctx.device_bytes(), held + bytes);
    EXPECT_GE(device->peak_memory_used(), ctx.device_bytes());
  }
  EXPECT_EQ(ctx.device_bytes(), held) << "a freed block is no longer held";
  {
    std::unique_ptr<Buffer> a = device->buffer_type().allocate(bytes);
    std::unique_ptr<Buffer> b = device->buffer_type().allocate(bytes);
    EXPECT_GE(device->peak_memory_used(), held + 2 * bytes);
  }
  EXPECT_GE(device->peak_memory_used(), held + 2 * bytes) << "the peak stays";
  const std::string report = peak_memory_report(DeviceRegistry::instance());
  EXPECT_NE(report.find(device->name() + " "), std::string::npos) << report;
  EXPECT_NE(report.find(" MiB"), std::string::npos) << report;
}

// A graph longer than one batch of dispatches, stopped between batches while the first is
// in flight: the error comes out, and the same backend then computes the graph whole.
TEST(VulkanDevice, StoppingBetweenBatchesLeavesTheBackendUsable) {
  SD_REQUIRE_VULKAN(device);
  Context ctx;
  Tensor* x = ctx.new_tensor(DType::F32, make_shape({1000}), "x");
  Tensor* y = x;
  for (int i = 0; i < 600; ++i) y = add(ctx, y, x);  // 601 x, past two batches of 256
  Graph graph = Graph::build({y});
  ComputeBuffer memory(device->buffer_type());
  memory.allocate(graph);
  std::vector<float> ones(1000, 1.0f);
  tensor_set(*x, ones.data());
  auto backend = device->create_backend(BackendOptions{});
  int checks = 0;
  backend->set_stop([&] { return ++checks > 1; });
  EXPECT_THROW(backend->compute(graph), Error);
  backend->set_stop(nullptr);
  backend->compute(graph);
  std::vector<float> out(1000);
  tensor_get(*y, out.data());
  EXPECT_EQ(out.front(), 601.0f);
  EXPECT_EQ(out.back(), 601.0f);
}

// A whole graph with its inputs, outputs and intermediates in staged memory.
TEST(VulkanDevice, GraphsComputeInStagedMemory) {
  SD_REQUIRE_VULKAN(device);
  setenv("SD_VULKAN_STAGING", "1", 1);
  sd::test::GraphCase c;
  c.build = [](Context& ctx) {
    Tensor* a = ctx.new_tensor(DType::F16, make_shape({33, 7}), "a");
    Tensor* b = ctx.new_tensor(DType::F32, make_shape({33, 1}), "b");
    return std::vector<Tensor*>{add(ctx, a, b), cast(ctx, a, DType::BF16)};
  };
  test::expect_matches_reference(*device, c, 0, 0);
  unsetenv("SD_VULKAN_STAGING");
}

}  // namespace
}  // namespace sd::vulkan
