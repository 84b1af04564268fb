#include "backend/rpc/node_check.h"

#include <array>
#include <string>

#include "tensor/context.h"
#include "tensor/error.h"
#include "tensor/ops/attention.h"
#include "tensor/ops/cast.h"
#include "tensor/ops/concat.h"
#include "tensor/ops/conv2d.h"
#include "tensor/ops/elementwise.h"
#include "tensor/ops/generate.h"
#include "tensor/ops/get_rows.h"
#include "tensor/ops/matmul.h"
#include "tensor/ops/norm.h"
#include "tensor/ops/pad.h"
#include "tensor/ops/reduce.h"
#include "tensor/ops/softmax.h"
#include "tensor/ops/unary.h"
#include "tensor/ops/upscale.h"
#include "tensor/ops/view.h"

namespace sd::rpc {

namespace {

bool valid_dtype(DType t) {
  return static_cast<unsigned>(t) < static_cast<unsigned>(DType::Count);
}

std::string label(const Tensor& t) {
  return t.name.empty() ? std::string("(unnamed)") : "'" + t.name + "'";
}

std::string strides_string(const std::array<size_t, kMaxDims>& nb) {
  return format("[%zu, %zu, %zu, %zu]", nb[0], nb[1], nb[2], nb[3]);
}

// a * b when it stays within `limit`; false otherwise (never overflows).
bool multiply_within(uint64_t a, uint64_t b, uint64_t limit, uint64_t* out) {
  if (a != 0 && b > limit / a) return false;
  *out = a * b;
  return true;
}

// Why `t`'s dtype, dims or strides are unusable, or "" with its byte span in `span`.
// Everything here is plain arithmetic on untrusted values, so it runs before anything
// calls dtype_info(), nelements() or nbytes() on them.
std::string layout_problem(const Tensor& t, uint64_t* span) {
  if (!valid_dtype(t.type)) {
    return format("dtype %u is not one of the %d dtypes this build knows",
                  static_cast<unsigned>(t.type), static_cast<int>(DType::Count));
  }
  for (int i = 0; i < kMaxDims; ++i) {
    if (t.ne[i] < 1 || static_cast<uint64_t>(t.ne[i]) > kMaxTensorBytes) {
      return format("dim %d is %lld; dims must be 1 to 2^40", i, static_cast<long long>(t.ne[i]));
    }
    if (t.nb[i] > kMaxTensorBytes) {
      return format("stride %d is %zu bytes, above the 2^40 limit", i, t.nb[i]);
    }
  }
  const int64_t block = block_size(t.type);
  const uint64_t block_bytes = type_size(t.type);
  const std::string type_name(dtype_name(t.type));
  if (t.ne[0] % block != 0) {
    return format("%s rows hold blocks of %lld values, but ne[0] = %lld", type_name.c_str(),
                  static_cast<long long>(block), static_cast<long long>(t.ne[0]));
  }
  // Kernels copy block rows as whole bytes: strided blocks would read past the span.
  if (block > 1 && t.nb[0] != block_bytes) {
    return format("%s blocks must be contiguous: nb[0] = %zu, a block is %zu bytes",
                  type_name.c_str(), t.nb[0], static_cast<size_t>(block_bytes));
  }
  uint64_t elements = 1;
  for (int i = 0; i < kMaxDims; ++i) {
    if (!multiply_within(elements, static_cast<uint64_t>(t.ne[i]), kMaxTensorBytes, &elements)) {
      return format("shape %s holds more than 2^40 elements", t.shape_string().c_str());
    }
  }
  // The last element starts at sum((count_i - 1) * nb_i), counting blocks along dim 0.
  uint64_t total = block_bytes;
  for (int i = 0; i < kMaxDims; ++i) {
    const uint64_t count = static_cast<uint64_t>(i == 0 ? t.ne[0] / block : t.ne[i]);
    uint64_t reach = 0;
    if (!multiply_within(count - 1, t.nb[i], kMaxTensorBytes, &reach) ||
        reach > kMaxTensorBytes - total) {
      return format("shape %s with strides %s spans more than 2^40 bytes", t.shape_string().c_str(),
                    strides_string(t.nb).c_str());
    }
    total += reach;
  }
  *span = total;
  return {};
}

[[noreturn]] void reject(const Tensor& node, const std::string& why) {
  throw Error(
      format("[RPC] node %s (%s): %s", label(node).c_str(), op_name(node.op).data(), why.c_str()));
}

// Sources src[0..n) every node of the op has; later slots are optional or unused, and the
// comparison with the builder's node catches any that should not be there.
int required_sources(Op op) {
  switch (op) {
    case Op::Arange:
      return 0;
    case Op::Add:
    case Op::Sub:
    case Op::Mul:
    case Op::Div:
    case Op::Concat:
    case Op::GetRows:
    case Op::MatMul:
    case Op::Conv2d:
      return 2;
    case Op::Attention:
      return 3;
    default:
      return 1;
  }
}

void check_leaf(const Tensor& node) {
  for (int i = 0; i < kMaxSrc; ++i) {
    if (node.src[i]) reject(node, format("a leaf has no sources, but src[%d] is set", i));
  }
  if (node.view_src || node.view_offset != 0) {
    reject(node, "a leaf owns its memory, but it names a view_src or view_offset");
  }
  for (int i = 0; i < kMaxOpParams; ++i) {
    if (node.params[i] != 0) reject(node, format("a leaf has no params, but params[%d] is set", i));
  }
  const size_t element = type_size(node.type);
  if (node.nb[0] != element) {
    reject(node, format("a leaf's elements must be adjacent: nb[0] = %zu, the element is %zu bytes",
                        node.nb[0], element));
  }
  for (int i = 1; i < kMaxDims; ++i) {
    if (node.nb[i] < element) {
      reject(node, format("stride %d of %zu bytes is below the element size %zu", i, node.nb[i],
                          element));
    }
  }
}

// Enum params are range-checked before any cast to the enum type.
void check_enum_params(const Tensor& node) {
  const int32_t v = node.params[0];
  if (node.op == Op::Unary && (v < 0 || v >= static_cast<int32_t>(UnaryOp::Count))) {
    reject(node, format("unary function %d is not one of the %d this build knows", v,
                        static_cast<int>(UnaryOp::Count)));
  }
  if (node.op == Op::Upscale && v != static_cast<int32_t>(UpscaleMode::Nearest) &&
      v != static_cast<int32_t>(UpscaleMode::Bilinear) &&
      v != static_cast<int32_t>(UpscaleMode::BilinearAlignCorners)) {
    reject(node, format("upscale mode %d is unknown", v));
  }
}

// The conv2d builder computes dilation * (kernel - 1) in int64, which a kernel of up to
// 2^40 values and a dilation of up to 2^31 overflow; such nodes never fit, so refuse them
// first. (Its other products stay below 2^41: every dim was capped at 2^40 bytes.)
void guard_conv2d(const Tensor& node) {
  if (node.op != Op::Conv2d) return;
  const Tensor& x = *node.src[0];
  const Tensor& w = *node.src[1];
  for (int axis = 0; axis < 2; ++axis) {
    const int64_t dilation = node.params[4 + axis];
    const bool channels_last =
        node.params[7] == static_cast<int32_t>(ConvKernelLayout::ChannelsLast);
    const int64_t kernel = w.ne[channels_last ? axis + 1 : axis];
    // The output size is (in + 2 pad - dilation (kernel - 1) - 1) / stride + 1 with
    // in + 2 pad < 2^41 + 2^32, so a larger reach never fits.
    if (dilation >= 1 && kernel - 1 > (int64_t{1} << 50) / dilation) {
      reject(node, format("dilation %lld of kernel %s does not fit input %s",
                          static_cast<long long>(dilation), w.shape_string().c_str(),
                          x.shape_string().c_str()));
    }
  }
}

// What the op's builder makes from node's sources and params, or nullptr for an op without
// one. Required sources are set and enum params in range.
Tensor* build_expected(Context& ctx, const Tensor& node) {
  Tensor* const* s = node.src.data();
  const auto& p = node.params;
  auto f = [&](int i) { return node.param_f32(i); };
  switch (node.op) {
    case Op::View:
      return view(ctx, s[0], node.ne, node.nb, node.view_offset);
    case Op::Reshape:
      return reshape(ctx, s[0], node.ne);
    case Op::Permute:
      return permute(ctx, s[0], {p[0], p[1], p[2], p[3]});
    case Op::Add:
      return add(ctx, s[0], s[1]);
    case Op::Sub:
      return sub(ctx, s[0], s[1]);
    case Op::Mul:
      return mul(ctx, s[0], s[1]);
    case Op::Div:
      return div(ctx, s[0], s[1]);
    case Op::Scale:
      return scale(ctx, s[0], f(0), f(1));
    case Op::Clamp:
      return clamp(ctx, s[0], f(0), f(1));
    case Op::Unary:
      return unary(ctx, s[0], static_cast<UnaryOp>(p[0]), f(1));
    case Op::Cast:
      return cast(ctx, s[0], node.type);
    case Op::Cont:
      return cont(ctx, s[0]);
    case Op::Concat:
      return concat(ctx, s[0], s[1], p[0]);
    case Op::Pad:
      return pad(ctx, s[0], {p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7]}, f(8));
    case Op::GetRows:
      return get_rows(ctx, s[0], s[1]);
    case Op::Upscale:
      return upscale(ctx, s[0], node.ne[0], node.ne[1], static_cast<UpscaleMode>(p[0]));
    case Op::Sum:
      return sum(ctx, s[0], p[0]);
    case Op::Mean:
      return mean(ctx, s[0], p[0]);
    case Op::Softmax:
      return softmax(ctx, s[0], s[1], f(0));
    case Op::GroupNorm:
      return group_norm(ctx, s[0], p[0], f(1), s[1], s[2], static_cast<NormActivation>(p[2]));
    case Op::LayerNorm:
      return layer_norm(ctx, s[0], f(0), s[1], s[2]);
    case Op::RmsNorm:
      if (p[1] == 2)
        return rms_norm_channels(ctx, s[0], f(0), s[1], static_cast<NormActivation>(p[2]));
      return rms_norm(ctx, s[0], f(0), s[1], static_cast<NormActivation>(p[2]));
    case Op::MatMul:
      return matmul(ctx, s[0], s[1]);
    case Op::Conv2d:
      return conv2d(ctx, s[0], s[1], s[2], p[0], p[1], p[2], p[3], p[4], p[5], p[6],
                    static_cast<ConvKernelLayout>(p[7]));
    case Op::Attention:
      return attention(ctx, s[0], s[1], s[2], s[3], f(0), static_cast<AttentionPrecision>(p[1]));
    case Op::Arange:
      return arange(ctx, f(0), f(1), f(2));
    case Op::TimestepEmbedding:
      return timestep_embedding(ctx, s[0], p[0], p[1]);
    case Op::None:
    case Op::Count:
      break;
  }
  return nullptr;
}

// Field by field; the first difference is the error.
void compare_with_expected(const Tensor& node, const Tensor& expected) {
  if (node.op != expected.op) {
    reject(node, format("the builder makes a %s node", op_name(expected.op).data()));
  }
  if (node.type != expected.type) {
    reject(node, format("dtype is %s, but the builder makes %s", dtype_name(node.type).data(),
                        dtype_name(expected.type).data()));
  }
  if (node.ne != expected.ne) {
    reject(node, format("shape is %s, but the builder makes %s", node.shape_string().c_str(),
                        expected.shape_string().c_str()));
  }
  if (node.nb != expected.nb) {
    reject(node, format("strides are %s, but the builder makes %s", strides_string(node.nb).c_str(),
                        strides_string(expected.nb).c_str()));
  }
  for (int i = 0; i < kMaxOpParams; ++i) {
    if (node.params[i] != expected.params[i]) {
      reject(node, format("params[%d] is %d (%#x), but the builder stores %d (%#x)", i,
                          node.params[i], static_cast<unsigned>(node.params[i]), expected.params[i],
                          static_cast<unsigned>(expected.params[i])));
    }
  }
  for (int i = 0; i < kMaxSrc; ++i) {
    if (node.src[i] != expected.src[i]) {
      reject(node, format("src[%d] is %s, but the op %s", i, node.src[i] ? "set" : "missing",
                          expected.src[i] ? "needs it there" : "takes no source there"));
    }
  }
  if (node.view_src != expected.view_src || node.view_offset != expected.view_offset) {
    reject(node, expected.view_src
                     ? format("a view must alias its src[0] at offset %zu", expected.view_offset)
                     : std::string("the op computes into its own memory, so it must not name a "
                                   "view_src or view_offset"));
  }
}

}  // namespace

size_t byte_span(const Tensor& t) {
  uint64_t span = 0;
  const std::string problem = layout_problem(t, &span);
  if (!problem.empty())
    throw Error(format("[RPC] tensor %s: %s", label(t).c_str(), problem.c_str()));
  return static_cast<size_t>(span);
}

void check_node(const Tensor& node) {
  if (static_cast<unsigned>(node.op) >= static_cast<unsigned>(Op::Count)) {
    reject(node, format("op %u is not one of the %d ops this build knows",
                        static_cast<unsigned>(node.op), kOpCount));
  }
  uint64_t span = 0;
  std::string problem = layout_problem(node, &span);
  if (!problem.empty()) reject(node, problem);
  if (node.op == Op::None) {
    check_leaf(node);
    return;
  }

  // Sources were checked on arrival; their layout is re-read here because the builders
  // below index dtype tables and multiply dims with it.
  const int required = required_sources(node.op);
  for (int i = 0; i < kMaxSrc; ++i) {
    if (!node.src[i]) {
      if (i < required) reject(node, format("src[%d] is missing; the op needs it", i));
      continue;
    }
    uint64_t unused = 0;
    problem = layout_problem(*node.src[i], &unused);
    if (!problem.empty())
      reject(node, format("src[%d] %s: %s", i, label(*node.src[i]).c_str(), problem.c_str()));
  }
  const bool is_view = is_view_op(node.op);
  if (is_view && !node.view_src) reject(node, "a view must name the tensor it aliases (view_src)");
  if (!is_view && node.view_src) {
    reject(node, "the op computes into its own memory, so it must not name a view_src");
  }
  uint64_t source_span = 0;
  if (is_view) {
    problem = layout_problem(*node.view_src, &source_span);
    if (!problem.empty()) reject(node, "view_src " + label(*node.view_src) + ": " + problem);
  }

  check_enum_params(node);
  guard_conv2d(node);
  Context scratch;
  const Tensor* expected = nullptr;
  try {
    expected = build_expected(scratch, node);
  } catch (const Error& e) {
    reject(node, std::string("its builder refuses it: ") + e.what());
  }
  if (!expected) reject(node, "no builder for this op");
  compare_with_expected(node, *expected);

  // The view builder bounds views with Tensor::nbytes(), which ignores nb[0]; the true span
  // of a strided view must lie inside its source's.
  if (is_view && (node.view_offset > source_span || span > source_span - node.view_offset)) {
    reject(node,
           format("a view of %llu bytes at offset %zu ends past its source %s of %llu bytes",
                  static_cast<unsigned long long>(span), node.view_offset,
                  label(*node.view_src).c_str(), static_cast<unsigned long long>(source_span)));
  }
}

}  // namespace sd::rpc
