// Layout ops and generators: concat, pad, get_rows, upscale, arange, timestep_embedding.
// Each shader computes one output element per thread, reading its sources in place (views
// and permutations included). get_rows also reads block-quantized tables; the others take
// scalar types only.
#include <cmath>
#include <cstring>

#include "backend/vulkan/vulkan_ops.h"

namespace sd::vulkan {

namespace {

bool is_float_type(DType t) {
  return t == DType::F32 || t == DType::F16 || t == DType::BF16;
}

// One thread per output element; `extra` is what the shader reads as node_extra().
Dispatch per_element(const Tensor& node, const char* shader, uint32_t extra = 0) {
  Dispatch d;
  d.shader = shader;
  d.groups[0] = groups_for(node.nelements(), kThreads);
  d.extra = extra;
  return d;
}

bool supports_concat(const Tensor& node) {
  const Tensor& a = *node.src[0];
  const Tensor& b = *node.src[1];
  const int dim = node.params[0];
  if (dim < 0 || dim >= kMaxDims) return false;
  // The shader copies bits, so all three tensors share one dtype: a scalar one, as it copies
  // elements, not blocks.
  if (!scalar_types_only(node) || a.type != node.type || b.type != node.type) return false;
  for (int d = 0; d < kMaxDims; ++d) {
    const int64_t want = d == dim ? a.ne[d] + b.ne[d] : a.ne[d];
    if (node.ne[d] != want || (d != dim && b.ne[d] != a.ne[d])) return false;
  }
  return true;
}

Dispatch plan_concat(const Tensor& node) {
  return per_element(node, "concat");
}

bool supports_pad(const Tensor& node) {
  const Tensor& a = *node.src[0];
  if (node.type != DType::F32 || !is_float_type(a.type)) return false;
  for (int d = 0; d < kMaxDims; ++d) {
    const int before = node.params[2 * d], after = node.params[2 * d + 1];
    if (before < 0 || after < 0 || node.ne[d] != a.ne[d] + before + after) return false;
  }
  return true;
}

Dispatch plan_pad(const Tensor& node) {
  return per_element(node, "pad");
}

bool supports_get_rows(const Tensor& node) {
  const Tensor& table = *node.src[0];
  const Tensor& ids = *node.src[1];
  // Block-quantized tables (embeddings in GGUF files) are decoded by shaders/dequant.glsl.
  const bool table_ok = is_float_type(table.type) || block_rows(table);
  return node.type == DType::F32 && table_ok && ids.type == DType::I32 && table.ne[2] == 1 &&
         table.ne[3] == 1 && ids.ne[2] == 1 && ids.ne[3] == 1 && node.ne[0] == table.ne[0] &&
         node.ne[1] == ids.ne[0] && node.ne[2] == ids.ne[1];
}

Dispatch plan_get_rows(const Tensor& node) {
  return per_element(node, "get_rows");
}

bool supports_upscale(const Tensor& node) {
  const Tensor& a = *node.src[0];
  const int mode = node.params[0];
  if (node.type != DType::F32 || !is_float_type(a.type)) return false;
  if (mode < static_cast<int>(UpscaleMode::Nearest) ||
      mode > static_cast<int>(UpscaleMode::BilinearAlignCorners))
    return false;
  if (a.ne[0] < 1 || a.ne[1] < 1 || node.ne[2] != a.ne[2] || node.ne[3] != a.ne[3]) return false;
  // The shader's source coordinates are ratios of 32-bit integers up to 2 * out * in.
  for (int d = 0; d < 2; ++d)
    if (2 * node.ne[d] * a.ne[d] > UINT32_MAX) return false;
  return true;
}

Dispatch plan_upscale(const Tensor& node) {
  return per_element(node, "upscale");
}

bool supports_arange(const Tensor& node) {
  // The shader's f32 element index is exact up to 2^24, and its exact product splits the
  // step with a factor 4097, which overflows for steps past 2^115.
  return node.type == DType::F32 && node.nelements() <= (int64_t{1} << 24) &&
         std::fabs(node.param_f32(2)) < 0x1p100f;
}

Dispatch plan_arange(const Tensor& node) {
  return per_element(node, "arange");
}

bool supports_timestep_embedding(const Tensor& node) {
  const Tensor& timesteps = *node.src[0];
  return node.type == DType::F32 && is_float_type(timesteps.type) && node.params[0] >= 1 &&
         node.params[1] >= 1 && node.ne[0] == node.params[0] && node.ne[1] == timesteps.ne[0] &&
         timesteps.ne[1] == 1 && timesteps.ne[2] == 1 && timesteps.ne[3] == 1;
}

Dispatch plan_timestep_embedding(const Tensor& node) {
  // ln(max_period) in f32 as the reference computes it, so every device starts from the
  // same frequencies' exponent.
  const float log_period = std::log(static_cast<float>(node.params[1]));
  uint32_t bits;
  std::memcpy(&bits, &log_period, sizeof bits);
  return per_element(node, "timestep_embedding", bits);
}

constexpr VulkanOp kConcat{supports_concat, plan_concat};
constexpr VulkanOp kPad{supports_pad, plan_pad};
constexpr VulkanOp kGetRows{supports_get_rows, plan_get_rows};
constexpr VulkanOp kUpscale{supports_upscale, plan_upscale};
constexpr VulkanOp kArange{supports_arange, plan_arange};
constexpr VulkanOp kTimestepEmbedding{supports_timestep_embedding, plan_timestep_embedding};

}  // namespace

const VulkanOp* layout_op(Op op) {
  switch (op) {
    case Op::Concat:
      return &kConcat;
    case Op::Pad:
      return &kPad;
    case Op::GetRows:
      return &kGetRows;
    case Op::Upscale:
      return &kUpscale;
    case Op::Arange:
      return &kArange;
    case Op::TimestepEmbedding:
      return &kTimestepEmbedding;
    default:
      return nullptr;
  }
}

}  // namespace sd::vulkan
