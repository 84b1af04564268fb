#include "backend/vulkan/vulkan_backend.h"

#include <algorithm>
#include <cstring>

#include "backend/vulkan/vulkan_context.h"
#include "backend/vulkan/vulkan_device.h"
#include "backend/vulkan/vulkan_ops.h"
#include "tensor/error.h"

namespace sd::vulkan {

namespace {

// Nodes recorded per submission: cancellation is checked between submissions.
constexpr uint32_t kBatch = 256;

ShaderType shader_type(DType t) {
  switch (t) {
    case DType::F16:
      return ShaderType::F16;
    case DType::BF16:
      return ShaderType::BF16;
    case DType::I32:
      return ShaderType::I32;
    case DType::Q4_0:
      return ShaderType::Q4_0;
    case DType::Q4_1:
      return ShaderType::Q4_1;
    case DType::Q5_0:
      return ShaderType::Q5_0;
    case DType::Q5_1:
      return ShaderType::Q5_1;
    case DType::Q8_0:
      return ShaderType::Q8_0;
    case DType::Q2_K:
      return ShaderType::Q2_K;
    case DType::Q3_K:
      return ShaderType::Q3_K;
    case DType::Q4_K:
      return ShaderType::Q4_K;
    case DType::Q5_K:
      return ShaderType::Q5_K;
    case DType::Q6_K:
      return ShaderType::Q6_K;
    default:  // f32; q8_K never reaches a shader (op_supported turns it away)
      return ShaderType::F32;
  }
}

void make_host_buffer(VulkanContext& ctx, size_t size, VkBuffer& buffer, VkDeviceMemory& memory) {
  VkBufferCreateInfo info{VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
  info.size = size;
  info.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT;
  check_vk(vkCreateBuffer(ctx.device(), &info, nullptr, &buffer), "vkCreateBuffer", ctx.name());
  VkMemoryRequirements req;
  vkGetBufferMemoryRequirements(ctx.device(), buffer, &req);
  memory = ctx.allocate_host(req);
  vkBindBufferMemory(ctx.device(), buffer, memory, 0);
}

}  // namespace

VulkanBackend::VulkanBackend(VulkanDevice& device) : device_(device), ctx_(device.context()) {
  VkDevice dev = ctx_.device();
  VkCommandPoolCreateInfo pool_info{VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO};
  pool_info.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
  pool_info.queueFamilyIndex = ctx_.queue_family();
  check_vk(vkCreateCommandPool(dev, &pool_info, nullptr, &pool_), "vkCreateCommandPool",
           ctx_.name());
  for (Frame& f : frames_) {
    VkCommandBufferAllocateInfo cmd_info{VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
    cmd_info.commandPool = pool_;
    cmd_info.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
    cmd_info.commandBufferCount = 1;
    check_vk(vkAllocateCommandBuffers(dev, &cmd_info, &f.cmd), "vkAllocateCommandBuffers",
             ctx_.name());

    VkDescriptorPoolSize sizes{VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, kBatch * kBindings};
    VkDescriptorPoolCreateInfo desc_info{VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO};
    desc_info.maxSets = kBatch;
    desc_info.poolSizeCount = 1;
    desc_info.pPoolSizes = &sizes;
    check_vk(vkCreateDescriptorPool(dev, &desc_info, nullptr, &f.descriptors),
             "vkCreateDescriptorPool", ctx_.name());

    make_host_buffer(ctx_, kBatch * sizeof(NodeWords), f.params, f.params_memory);
    void* p = nullptr;
    check_vk(vkMapMemory(dev, f.params_memory, 0, VK_WHOLE_SIZE, 0, &p), "vkMapMemory",
             ctx_.name());
    f.params_mapped = static_cast<NodeWords*>(p);
    VkFenceCreateInfo fence_info{VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
    check_vk(vkCreateFence(dev, &fence_info, nullptr, &f.fence), "vkCreateFence", ctx_.name());
  }
  make_host_buffer(ctx_, 16, unused_, unused_memory_);
}

VulkanBackend::~VulkanBackend() {
  VkDevice dev = ctx_.device();
  vkDeviceWaitIdle(dev);
  for (Frame& f : frames_) {
    if (f.params_mapped) vkUnmapMemory(dev, f.params_memory);
    vkDestroyBuffer(dev, f.params, nullptr);
    vkFreeMemory(dev, f.params_memory, nullptr);
    vkDestroyDescriptorPool(dev, f.descriptors, nullptr);
    vkDestroyFence(dev, f.fence, nullptr);
  }
  vkDestroyBuffer(dev, unused_, nullptr);
  vkFreeMemory(dev, unused_memory_, nullptr);
  vkDestroyCommandPool(dev, pool_, nullptr);
}

void VulkanBackend::wait(Frame& frame) {
  if (!frame.in_flight) return;
  frame.in_flight = false;
  check_vk(vkWaitForFences(ctx_.device(), 1, &frame.fence, VK_TRUE, UINT64_MAX), "vkWaitForFences",
           ctx_.name());
}

void VulkanBackend::wait_all() {
  for (Frame& f : frames_) wait(f);
}

Device& VulkanBackend::device() {
  return device_;
}

VulkanBackend::Binding VulkanBackend::bind(const Tensor& t) const {
  auto* b = dynamic_cast<VulkanBuffer*>(t.buffer);
  SD_CHECK(b && &b->type().device() == &device_,
           "[%s] tensor '%s' is in %s, not on this device; stage it first", device_.name().c_str(),
           t.name.c_str(), t.buffer ? t.buffer->type().name().c_str() : "no buffer");
  const VkPhysicalDeviceLimits& limits = ctx_.limits();
  const size_t offset = b->offset_of(t);
  const size_t align = std::max<size_t>(4, limits.minStorageBufferOffsetAlignment);
  const size_t start = offset / align * align;
  // A binding may reach past the buffer into the rest of its block: nothing reads there.
  const size_t block_bytes = b->handle_size();
  SD_CHECK(offset <= block_bytes, "[%s] tensor '%s' lies outside its buffer",
           device_.name().c_str(), t.name.c_str());
  const size_t range = std::min<size_t>(block_bytes - start, limits.maxStorageBufferRange) / 4 * 4;
  SD_CHECK(offset - start + tensor_extent(t) <= range,
           "[%s] tensor '%s' (%zu bytes) is larger than one storage binding of this device "
           "(%u bytes); compute this module on another device with --backend",
           device_.name().c_str(), t.name.c_str(), tensor_extent(t), limits.maxStorageBufferRange);
  return {b->handle(), start, range, static_cast<uint32_t>(offset - start)};
}

void VulkanBackend::compute_nodes(const Graph& graph, size_t first, size_t end) {
  SD_CHECK(first <= end && end <= graph.nodes.size(),
           "[%s] nodes %zu..%zu are outside a graph of %zu nodes", device_.name().c_str(), first,
           end, graph.nodes.size());
  check_supported(device_, graph);
  std::vector<const Tensor*> batch;
  const bool timed = deadline_ != std::chrono::steady_clock::time_point::max();
  // Cancellation and the deadline are checked before each submission.
  auto submit = [&](size_t node_index) {
    SD_CHECK(!stop_ || !stop_(), "generation cancelled");
    SD_CHECK(!timed || std::chrono::steady_clock::now() < deadline_,
             "[%s] compute stopped past its deadline, at node %zu of %zu", device_.name().c_str(),
             node_index, graph.nodes.size());
    run_batch(batch);
    batch.clear();
  };
  try {
    for (size_t i = first; i < end; ++i) {
      const Tensor* node = graph.nodes[i];
      if (is_view_op(node->op)) continue;
      SD_CHECK(node->data, "[%s] tensor '%s' (%s) has no memory; allocate the graph first",
               device_.name().c_str(), node->name.c_str(), op_name(node->op).data());
      if (node->nelements() == 0) continue;
      batch.push_back(node);
      if (batch.size() == kBatch) submit(i + 1);
    }
    if (!batch.empty()) submit(end);
  } catch (...) {
    // The caller frees what the batches in flight read and write: let them finish first.
    for (Frame& f : frames_) {
      if (f.in_flight) vkWaitForFences(ctx_.device(), 1, &f.fence, VK_TRUE, UINT64_MAX);
      f.in_flight = false;
    }
    throw;
  }
  wait_all();  // the results are read once this returns
}

void VulkanBackend::run_batch(const std::vector<const Tensor*>& nodes) {
  VkDevice dev = ctx_.device();
  Frame& frame = frames_[next_frame_];
  next_frame_ = 1 - next_frame_;
  wait(frame);  // the batch before last is done with this frame's records and descriptors
  VkCommandBuffer cmd = frame.cmd;
  check_vk(vkResetDescriptorPool(dev, frame.descriptors, 0), "vkResetDescriptorPool", ctx_.name());
  check_vk(vkResetCommandBuffer(cmd, 0), "vkResetCommandBuffer", ctx_.name());
  VkCommandBufferBeginInfo begin{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
  begin.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
  check_vk(vkBeginCommandBuffer(cmd, &begin), "vkBeginCommandBuffer", ctx_.name());

  VkMemoryBarrier between{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
  between.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
  between.dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT;
  vkCmdPipelineBarrier(cmd, VK_PIPELINE_STAGE_TRANSFER_BIT | VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                       VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, 0, 1, &between, 0, nullptr, 0,
                       nullptr);
  between.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT;
  for (uint32_t n = 0; n < nodes.size(); ++n) {
    const Tensor& node = *nodes[n];
    const VulkanOp* op = find_op(node.op);
    SD_CHECK(op, "[%s] has no shader for %s", device_.name().c_str(), op_name(node.op).data());
    const Dispatch d = op->plan(node);

    NodeWords& words = frame.params_mapped[n];
    std::memset(&words, 0, sizeof words);
    VkDescriptorBufferInfo infos[kBindings];
    infos[0] = {frame.params, 0, VK_WHOLE_SIZE};
    const Tensor* slots[kTensorSlots] = {&node, node.src[0], node.src[1], node.src[2], node.src[3]};
    for (int k = 0; k < kTensorSlots; ++k) {
      if (!slots[k]) {
        infos[1 + k] = {unused_, 0, VK_WHOLE_SIZE};
        continue;
      }
      const Tensor& t = *slots[k];
      const Binding b = bind(t);
      infos[1 + k] = {b.buffer, b.offset, b.range};
      TensorWords& tw = words.tensors[k];
      tw.offset = b.residual;
      tw.type = static_cast<uint32_t>(shader_type(t.type));
      for (int dim = 0; dim < 4; ++dim) {
        tw.ne[dim] = static_cast<uint32_t>(t.ne[dim]);
        tw.nb[dim] = static_cast<uint32_t>(t.nb[dim]);
      }
    }
    std::memcpy(words.params, node.params.data(), sizeof words.params);
    words.op = static_cast<uint32_t>(node.op);
    words.extra = d.extra;

    VkDescriptorSetLayout layout = ctx_.set_layout();
    VkDescriptorSetAllocateInfo alloc{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO};
    alloc.descriptorPool = frame.descriptors;
    alloc.descriptorSetCount = 1;
    alloc.pSetLayouts = &layout;
    VkDescriptorSet set = VK_NULL_HANDLE;
    check_vk(vkAllocateDescriptorSets(dev, &alloc, &set), "vkAllocateDescriptorSets", ctx_.name());
    VkWriteDescriptorSet writes[kBindings];
    for (uint32_t i = 0; i < kBindings; ++i) {
      writes[i] = {VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET};
      writes[i].dstSet = set;
      writes[i].dstBinding = i;
      writes[i].descriptorCount = 1;
      writes[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
      writes[i].pBufferInfo = &infos[i];
    }
    vkUpdateDescriptorSets(dev, kBindings, writes, 0, nullptr);

    vkCmdBindPipeline(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, ctx_.pipeline(d.shader));
    vkCmdBindDescriptorSets(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, ctx_.pipeline_layout(), 0, 1, &set,
                            0, nullptr);
    vkCmdPushConstants(cmd, ctx_.pipeline_layout(), VK_SHADER_STAGE_COMPUTE_BIT, 0,
                       sizeof(uint32_t), &n);
    vkCmdDispatch(cmd, d.groups[0], d.groups[1], d.groups[2]);
    vkCmdPipelineBarrier(cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                         VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, 0, 1, &between, 0, nullptr, 0,
                         nullptr);
  }
  // What the shaders wrote becomes visible to host reads of mapped memory and to copies.
  VkMemoryBarrier to_host{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
  to_host.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT;
  to_host.dstAccessMask = VK_ACCESS_HOST_READ_BIT | VK_ACCESS_TRANSFER_READ_BIT;
  vkCmdPipelineBarrier(cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                       VK_PIPELINE_STAGE_HOST_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT, 0, 1, &to_host,
                       0, nullptr, 0, nullptr);
  check_vk(vkEndCommandBuffer(cmd), "vkEndCommandBuffer", ctx_.name());
  check_vk(vkResetFences(dev, 1, &frame.fence), "vkResetFences", ctx_.name());
  ctx_.submit(cmd, frame.fence);
  frame.in_flight = true;
}

}  // namespace sd::vulkan
