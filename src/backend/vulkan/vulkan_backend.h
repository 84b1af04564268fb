// Computes graphs on a Vulkan device: each node is one dispatch of its op's shader, recorded
// into a command buffer in batches, with a barrier between nodes (a node may read what any
// earlier one wrote). Two batches are in flight: the next is recorded while the device runs
// the last. Cancellation and deadlines are checked between batches.
#pragma once

#include <vulkan/vulkan.h>

#include <chrono>
#include <functional>
#include <vector>

#include "backend/backend.h"
#include "backend/vulkan/vulkan_node_params.h"

namespace sd::vulkan {

class VulkanContext;
class VulkanDevice;

class VulkanBackend final : public Backend {
 public:
  explicit VulkanBackend(VulkanDevice& device);
  ~VulkanBackend() override;

  Device& device() override;
  void compute_nodes(const Graph& graph, size_t first, size_t end) override;
  void set_deadline(std::chrono::steady_clock::time_point deadline) override {
    deadline_ = deadline;
  }
  void set_stop(std::function<bool()> stop) override { stop_ = std::move(stop); }

 private:
  struct Binding {
    VkBuffer buffer = VK_NULL_HANDLE;
    VkDeviceSize offset = 0;
    VkDeviceSize range = 0;
    uint32_t residual = 0;  // bytes from the binding's start to the tensor's first element
  };
  // What one batch in flight holds until the device has run it.
  struct Frame {
    VkCommandBuffer cmd = VK_NULL_HANDLE;
    VkDescriptorPool descriptors = VK_NULL_HANDLE;
    // The batch's node records, in host-visible memory the shaders read.
    VkBuffer params = VK_NULL_HANDLE;
    VkDeviceMemory params_memory = VK_NULL_HANDLE;
    NodeWords* params_mapped = nullptr;
    VkFence fence = VK_NULL_HANDLE;
    bool in_flight = false;
  };
  Binding bind(const Tensor& t) const;
  // Records `nodes` into the next free frame and submits it without waiting.
  void run_batch(const std::vector<const Tensor*>& nodes);
  void wait(Frame& frame);
  void wait_all();

  VulkanDevice& device_;
  VulkanContext& ctx_;
  VkCommandPool pool_ = VK_NULL_HANDLE;
  Frame frames_[2];
  int next_frame_ = 0;
  // Bound where a node has fewer than four sources.
  VkBuffer unused_ = VK_NULL_HANDLE;
  VkDeviceMemory unused_memory_ = VK_NULL_HANDLE;
  std::chrono::steady_clock::time_point deadline_ = std::chrono::steady_clock::time_point::max();
  std::function<bool()> stop_;
};

}  // namespace sd::vulkan
