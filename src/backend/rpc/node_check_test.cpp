#include "backend/rpc/node_check.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "tensor/context.h"
#include "tensor/error.h"
#include "tensor/graph.h"
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
#include "tensor/ops/reference.h"
#include "tensor/ops/softmax.h"
#include "tensor/ops/unary.h"
#include "tensor/ops/upscale.h"
#include "tensor/ops/view.h"

namespace sd::rpc {
namespace {

// A small graph as a server receives it: leafs first, then nodes in execution order.
struct SampleGraph {
  std::string name;
  std::unique_ptr<Context> ctx = std::make_unique<Context>();
  std::vector<Tensor*> tensors;

  Tensor* find(const std::string& tensor_name) const {
    for (Tensor* t : tensors) {
      if (t->name == tensor_name) return t;
    }
    ADD_FAILURE() << "no tensor " << tensor_name << " in " << name;
    return nullptr;
  }
};

SampleGraph make_graph(const std::string& name,
                       const std::function<std::vector<Tensor*>(Context&)>& build) {
  SampleGraph g;
  g.name = name;
  const Graph graph = Graph::build(build(*g.ctx));
  g.tensors = graph.leafs;
  g.tensors.insert(g.tensors.end(), graph.nodes.begin(), graph.nodes.end());
  return g;
}

SampleGraph linear_gelu() {
  return make_graph("linear_gelu", [](Context& ctx) -> std::vector<Tensor*> {
    Tensor* x = ctx.new_tensor(DType::F32, {8, 3}, "x");
    Tensor* w = ctx.new_tensor(DType::F16, {8, 6}, "w");
    Tensor* b = ctx.new_tensor(DType::F32, {6}, "b");
    Tensor* wq = ctx.new_tensor(DType::Q8_0, {32, 4}, "wq");
    Tensor* xq = ctx.new_tensor(DType::F32, {32, 3}, "xq");
    Tensor* y = set_name(matmul(ctx, w, x), "linear");
    Tensor* yb = set_name(add(ctx, y, b), "linear_bias");
    Tensor* g = set_name(gelu(ctx, yb), "gelu");
    Tensor* leaky = set_name(unary(ctx, g, UnaryOp::LeakyRelu, 0.1f), "leaky");
    Tensor* yq = set_name(matmul(ctx, wq, xq), "linear_q8");
    return {leaky, yq};
  });
}

SampleGraph conv_group_norm() {
  return make_graph("conv_group_norm", [](Context& ctx) -> std::vector<Tensor*> {
    Tensor* x = ctx.new_tensor(DType::F32, {6, 5, 4, 1}, "x");
    Tensor* w = ctx.new_tensor(DType::F16, {3, 3, 4, 8}, "w");
    Tensor* bias = ctx.new_tensor(DType::F32, {8}, "bias");
    Tensor* gw = ctx.new_tensor(DType::F32, {8}, "gn_weight");
    Tensor* gb = ctx.new_tensor(DType::F32, {8}, "gn_bias");
    Tensor* w2 = ctx.new_tensor(DType::F32, {3, 3, 2, 8}, "w2");
    Tensor* c = set_name(conv2d(ctx, x, w, bias, 1, 1, 1, 1, 1, 1), "conv");
    Tensor* n = set_name(group_norm(ctx, c, 2, 1e-5f, gw, gb), "group_norm");
    Tensor* s = set_name(silu(ctx, n), "silu");
    Tensor* c2 = set_name(conv2d(ctx, s, w2, nullptr, 2, 2, 1, 0, 1, 2, 4), "conv_grouped");
    return {c2};
  });
}

SampleGraph attention_block() {
  return make_graph("attention", [](Context& ctx) -> std::vector<Tensor*> {
    Tensor* x = ctx.new_tensor(DType::F32, {16, 5}, "x");
    Tensor* wq = ctx.new_tensor(DType::F32, {16, 16}, "wq");
    Tensor* wk = ctx.new_tensor(DType::F16, {16, 16}, "wk");
    Tensor* wv = ctx.new_tensor(DType::F32, {16, 16}, "wv");
    Tensor* mask = ctx.new_tensor(DType::F32, {5, 5}, "mask");
    // [D * H, L] -> [D, H, L] -> [D, L, H]
    auto heads = [&](Tensor* w, const char* name) {
      Tensor* p = set_name(matmul(ctx, w, x), name);
      return permute(ctx, reshape(ctx, p, {4, 4, 5}), {0, 2, 1, 3});
    };
    Tensor* q = heads(wq, "q");
    Tensor* k = heads(wk, "k");
    Tensor* v = heads(wv, "v");
    Tensor* o = set_name(attention(ctx, q, k, v, mask, 0.5f), "attention");
    Tensor* o_nomask = set_name(attention(ctx, q, k, v, nullptr, 0.25f), "attention_nomask");
    Tensor* merged = reshape(ctx, o, {16, 5});
    Tensor* scores = set_name(matmul(ctx, cont(ctx, k), cont(ctx, q)), "scores");
    Tensor* probs = set_name(softmax(ctx, scores, mask, 0.5f), "softmax");
    Tensor* probs_nomask = set_name(softmax(ctx, scores), "softmax_nomask");
    return {merged, o_nomask, probs, probs_nomask};
  });
}

SampleGraph concat_pad_upscale() {
  return make_graph("concat_pad_upscale", [](Context& ctx) -> std::vector<Tensor*> {
    Tensor* a = ctx.new_tensor(DType::F32, {4, 3, 2, 1}, "a");
    Tensor* b = ctx.new_tensor(DType::F32, {4, 3, 3, 1}, "b");
    Tensor* ids = ctx.new_tensor(DType::I32, {3}, "ids");
    Tensor* ids2 = ctx.new_tensor(DType::I32, {2}, "ids2");
    Tensor* c = set_name(concat(ctx, a, b, 2), "concat");
    Tensor* p = set_name(pad(ctx, c, {1, 0, 0, 2, 0, 0, 0, 1}, -1.0f), "pad");
    Tensor* u = set_name(upscale_nearest(ctx, p, 2), "upscale_nearest");
    Tensor* u2 = set_name(upscale(ctx, p, 7, 9, UpscaleMode::Bilinear), "upscale_bilinear");
    Tensor* u3 = set_name(upscale(ctx, p, 3, 3, UpscaleMode::BilinearAlignCorners), "upscale_ac");
    Tensor* s = set_name(sum(ctx, u2, 2), "sum");
    Tensor* m = set_name(mean(ctx, u, 0), "mean");
    Tensor* ci = set_name(concat(ctx, ids, ids2, 0), "concat_ids");
    return {u3, s, m, ci};
  });
}

SampleGraph views_and_casts() {
  return make_graph("views_and_casts", [](Context& ctx) -> std::vector<Tensor*> {
    Tensor* t = ctx.new_tensor(DType::F32, {6, 4, 3, 1}, "t");
    Tensor* q = ctx.new_tensor(DType::Q8_0, {32, 2}, "q");
    Tensor* f = ctx.new_tensor(DType::F32, {32, 2}, "f");
    Tensor* row = ctx.new_tensor(DType::F32, {12}, "row");
    Tensor* sl = set_name(slice(ctx, t, 1, 1, 3), "slice");
    Tensor* tr = set_name(transpose(ctx, t), "transpose");
    Tensor* pm = set_name(permute(ctx, t, {2, 0, 1, 3}), "permute");
    Tensor* c = set_name(cont(ctx, pm), "cont");
    Tensor* r = set_name(reshape(ctx, c, {12, 6}), "reshape");
    Tensor* v = set_name(view(ctx, t, make_shape({3, 2}), {8, 24, 96, 288}, 4), "strided_view");
    Tensor* half = set_name(cast(ctx, c, DType::F16), "cast_f16");
    Tensor* deq = set_name(cast(ctx, q, DType::F32), "dequantize");
    Tensor* quant = set_name(cast(ctx, f, DType::Q8_0), "quantize");
    Tensor* qrow = set_name(slice(ctx, q, 1, 1, 2), "q_row");
    Tensor* sc = set_name(scale(ctx, r, 2.0f, 1.0f), "scale");
    Tensor* cl = set_name(clamp(ctx, sc, -1.0f, 1.0f), "clamp");
    Tensor* d = set_name(sub(ctx, cl, row), "sub");
    Tensor* m = set_name(mul(ctx, d, row), "mul");
    Tensor* dv = set_name(div(ctx, m, row), "div");
    Tensor* ln = set_name(layer_norm(ctx, dv, 1e-5f, row, row), "layer_norm");
    Tensor* rn = set_name(rms_norm(ctx, ln, 1e-6f, row, NormActivation::Silu), "rms_norm");
    Tensor* rc = set_name(rms_norm_channels(ctx, t, 1e-6f, nullptr, NormActivation::Silu),
                          "rms_norm_channels");
    Tensor* sl_c = set_name(cont(ctx, sl), "slice_cont");
    Tensor* tr_c = set_name(cont(ctx, tr), "transpose_cont");
    Tensor* v_c = set_name(cont(ctx, v), "view_cont");
    Tensor* qrow_c = set_name(cont(ctx, qrow), "q_row_cont");
    return {half, deq, quant, rn, rc, sl_c, tr_c, v_c, qrow_c};
  });
}

SampleGraph embeddings() {
  return make_graph("embeddings", [](Context& ctx) -> std::vector<Tensor*> {
    Tensor* table = ctx.new_tensor(DType::Q8_0, {32, 10}, "table_q8");
    Tensor* ids = ctx.new_tensor(DType::I32, {4, 2}, "ids");
    Tensor* table16 = ctx.new_tensor(DType::F16, {8, 10}, "table_f16");
    Tensor* ids1 = ctx.new_tensor(DType::I32, {3}, "ids1");
    Tensor* ts = ctx.new_tensor(DType::F32, {2}, "timesteps");
    Tensor* rows = set_name(get_rows(ctx, table, ids), "get_rows_q8");
    Tensor* rows16 = set_name(get_rows(ctx, table16, ids1), "get_rows_f16");
    Tensor* emb = set_name(timestep_embedding(ctx, ts, 8), "timestep_embedding");
    Tensor* emb_odd = set_name(timestep_embedding(ctx, ts, 7, 1000), "timestep_embedding_odd");
    Tensor* up = set_name(arange(ctx, 0.0f, 5.0f, 1.0f), "arange");
    Tensor* down = set_name(arange(ctx, 3.0f, 0.0f, -0.5f), "arange_down");
    return {rows, rows16, emb, emb_odd, up, down};
  });
}

std::vector<SampleGraph> sample_graphs() {
  std::vector<SampleGraph> graphs;
  graphs.push_back(linear_gelu());
  graphs.push_back(conv_group_norm());
  graphs.push_back(attention_block());
  graphs.push_back(concat_pad_upscale());
  graphs.push_back(views_and_casts());
  graphs.push_back(embeddings());
  return graphs;
}

// Runs check_node and returns its error message ("" when accepted).
std::string rejection(const Tensor& t) {
  try {
    check_node(t);
  } catch (const Error& e) {
    return e.what();
  }
  return {};
}

// Rejected with a message that contains `needle`.
void expect_rejected(const Tensor& t, const std::string& needle) {
  const std::string why = rejection(t);
  EXPECT_NE(why, "") << "accepted " << t.name;
  EXPECT_NE(why.find(needle), std::string::npos) << why;
}

TEST(NodeCheck, EveryOpBuiltByItsBuilderPasses) {
  std::set<Op> seen;
  for (const SampleGraph& g : sample_graphs()) {
    for (const Tensor* t : g.tensors) {
      EXPECT_EQ(rejection(*t), "") << g.name << ": " << t->name;
      seen.insert(t->op);
    }
  }
  for (int i = 0; i < kOpCount; ++i) {
    EXPECT_TRUE(seen.count(static_cast<Op>(i))) << "no sample node for " << op_name(Op(i));
  }
}

TEST(NodeCheck, MessageNamesNodeAndOp) {
  SampleGraph g = linear_gelu();
  Tensor* y = g.find("linear");
  y->ne[1] += 1;
  const std::string why = rejection(*y);
  EXPECT_NE(why.find("'linear'"), std::string::npos) << why;
  EXPECT_NE(why.find("(matmul)"), std::string::npos) << why;
  EXPECT_NE(why.find("shape"), std::string::npos) << why;
}

TEST(NodeCheck, RejectsWrongShapeDtypeAndStride) {
  SampleGraph g = linear_gelu();
  Tensor* gel = g.find("gelu");
  Tensor saved = *gel;
  gel->type = DType::F16;
  gel->nb = contiguous_strides(DType::F16, gel->ne);
  expect_rejected(*gel, "dtype");
  *gel = saved;
  gel->ne = {6, 3, 1, 2};
  gel->nb = contiguous_strides(DType::F32, gel->ne);
  expect_rejected(*gel, "shape");
  *gel = saved;
  gel->nb[1] += 4;
  expect_rejected(*gel, "strides");
  *gel = saved;
  EXPECT_EQ(rejection(*gel), "");
}

TEST(NodeCheck, RejectsOutOfRangeOpAndDtype) {
  SampleGraph g = linear_gelu();
  Tensor* y = g.find("linear");
  Tensor* x = g.find("x");
  for (uint8_t op : {static_cast<uint8_t>(Op::Count), uint8_t{200}, uint8_t{255}}) {
    Tensor t = *y;
    t.op = static_cast<Op>(op);
    expect_rejected(t, "op " + std::to_string(op));
  }
  for (uint8_t type : {static_cast<uint8_t>(DType::Count), uint8_t{255}}) {
    Tensor node = *y;
    node.type = static_cast<DType>(type);
    expect_rejected(node, "dtype " + std::to_string(type));
    Tensor leaf = *x;
    leaf.type = static_cast<DType>(type);
    expect_rejected(leaf, "dtype " + std::to_string(type));
  }
}

TEST(NodeCheck, RejectsWrongParams) {
  SampleGraph g = conv_group_norm();
  Tensor* c = g.find("conv");
  Tensor* n = g.find("group_norm");
  Tensor* s = g.find("silu");
  Tensor t = *c;
  t.params[0] = 2;  // stride 2 makes a smaller output than the node claims
  expect_rejected(t, "shape");
  t = *c;
  t.params[6] = 3;  // groups that do not divide the channels
  expect_rejected(t, "builder refuses");
  t = *c;
  t.params[9] = 1;  // a slot the builder leaves zero
  expect_rejected(t, "params[9]");
  t = *c;
  t.params[4] = std::numeric_limits<int32_t>::max();
  expect_rejected(t, "dilation");
  // A kernel 2^33 wide with dilation 2^31 - 1: dilation * (kernel - 1) overflows int64.
  Tensor wide_kernel = *c->src[1];
  wide_kernel.ne = {int64_t{1} << 33, 1, 4, 8};
  wide_kernel.nb = contiguous_strides(wide_kernel.type, wide_kernel.ne);
  ASSERT_EQ(rejection(wide_kernel), "");
  t.src[1] = &wide_kernel;
  expect_rejected(t, "dilation");
  t = *n;
  t.set_param_f32(1, -1.0f);  // negative eps
  expect_rejected(t, "eps");
  t = *n;
  t.set_param_f32(1, 2e-5f);  // another eps makes another valid node
  EXPECT_EQ(rejection(t), "");
  t = *s;
  t.params[0] = static_cast<int32_t>(UnaryOp::Count);
  expect_rejected(t, "unary function");
  t.params[0] = -1;
  expect_rejected(t, "unary function");

  SampleGraph u = concat_pad_upscale();
  Tensor up = *u.find("upscale_bilinear");
  up.params[0] = 7;
  expect_rejected(up, "upscale mode 7");
  Tensor p = *u.find("pad");
  p.params[3] = -2;
  expect_rejected(p, "negative padding");
}

TEST(NodeCheck, RejectsMissingAndExtraSources) {
  SampleGraph g = linear_gelu();
  Tensor t = *g.find("linear_bias");
  t.src[1] = nullptr;
  expect_rejected(t, "src[1] is missing");
  t = *g.find("gelu");
  t.src[1] = g.find("b");
  expect_rejected(t, "src[1]");
  t = *g.find("linear");
  t.src[0] = nullptr;
  expect_rejected(t, "src[0] is missing");

  SampleGraph a = attention_block();
  t = *a.find("attention");
  t.src[2] = nullptr;
  expect_rejected(t, "src[2] is missing");
  t = *a.find("attention_nomask");
  t.src[3] = a.find("x");  // [16, 5] is no [Lk, Lq] mask
  expect_rejected(t, "mask");
}

TEST(NodeCheck, RejectsViewsOutsideTheirSource) {
  SampleGraph g = views_and_casts();
  Tensor* sl = g.find("slice");
  Tensor t = *sl;
  t.view_offset = sl->view_src->nbytes();
  expect_rejected(t, "view");
  t.view_offset = std::numeric_limits<size_t>::max();
  expect_rejected(t, "view");
  t = *sl;
  t.view_offset += 4;  // still inside: one element further along the row
  EXPECT_EQ(rejection(t), "");
  t.view_offset = sl->view_src->nbytes() - sl->nbytes() + 4;
  expect_rejected(t, "ends past");
  t = *sl;
  t.view_src = nullptr;
  expect_rejected(t, "view_src");
  t = *sl;
  t.view_src = g.find("row");  // aliases a tensor other than its source
  expect_rejected(t, "alias");
  Tensor* cont_node = g.find("cont");
  t = *cont_node;
  t.view_src = g.find("t");
  expect_rejected(t, "own memory");

  // Tensor::nbytes() ignores nb[0], so the view builder accepts this one; its true span
  // (3 * 8 + 4 = 28 bytes) is past the 16-byte source.
  Context ctx;
  Tensor* four = ctx.new_tensor(DType::F32, {4}, "four");
  Tensor* strided = view(ctx, four, make_shape({4}), {8, 32, 32, 32}, 0);
  expect_rejected(*strided, "ends past");
}

TEST(NodeCheck, RejectsBadDims) {
  SampleGraph g = linear_gelu();
  Tensor* x = g.find("x");
  Tensor* y = g.find("linear");
  for (int64_t bad : {int64_t{0}, int64_t{-3}, std::numeric_limits<int64_t>::min(),
                      std::numeric_limits<int64_t>::max(), (int64_t{1} << 40) + 1}) {
    Tensor t = *x;
    t.ne[1] = bad;
    expect_rejected(t, "dim 1");
    t = *y;
    t.ne[1] = bad;
    expect_rejected(t, "dim 1");
  }
  Tensor big = *x;  // each dim allowed, the product is not
  big.ne = {int64_t{1} << 30, int64_t{1} << 30, 1, 1};
  big.nb = {4, 4, 4, 4};
  expect_rejected(big, "elements");
  Tensor wide = *x;  // a stride that reaches past 2^40 bytes
  wide.nb[1] = size_t{1} << 39;
  wide.ne[1] = 4;
  expect_rejected(wide, "spans");
  Tensor partial = *g.find("wq");  // q8_0 rows are whole blocks of 32 values
  partial.ne[0] = 16;
  expect_rejected(partial, "blocks");
}

TEST(NodeCheck, RejectsUnusualLeafs) {
  SampleGraph g = linear_gelu();
  Tensor* x = g.find("x");
  EXPECT_EQ(rejection(*x), "");
  Tensor t = *x;
  t.nb[0] = 8;
  expect_rejected(t, "nb[0]");
  t = *x;
  t.nb[2] = 2;
  expect_rejected(t, "stride 2");
  t = *x;
  t.src[0] = g.find("b");
  expect_rejected(t, "no sources");
  t = *x;
  t.view_src = g.find("b");
  expect_rejected(t, "view_src");
  t = *x;
  t.params[3] = 1;
  expect_rejected(t, "params[3]");
  t = *x;  // padded rows are fine for a leaf: every byte stays inside nbytes()
  t.ne = {8, 3, 1, 1};
  t.nb = {4, 32, 96, 96};
  EXPECT_EQ(rejection(t), "");
}

TEST(NodeCheck, ByteSpanCountsEveryStride) {
  Context ctx;
  Tensor* t = ctx.new_tensor(DType::F32, {3, 2}, "t");
  EXPECT_EQ(byte_span(*t), t->nbytes());
  Tensor* tr = transpose(ctx, t);
  EXPECT_EQ(byte_span(*tr), 24u);
  EXPECT_LT(tr->nbytes(), 24u);  // why byte_span exists
  Tensor* q = ctx.new_tensor(DType::Q4_K, {512, 3}, "q");
  EXPECT_EQ(byte_span(*q), 6 * type_size(DType::Q4_K));
  Tensor bad = *t;
  bad.ne[0] = 0;
  EXPECT_THROW(byte_span(bad), Error);
}

// ---- property test: random single-field mutations never get a bad node past the check ----

// Exact-size host memory for a graph's tensors, so a sanitizer build flags any kernel
// access outside what the check allowed. Zero bytes are valid data for every dtype, and
// zero ids are in range for every table.
class HostMemory {
 public:
  void place(Tensor* t) {
    if (t->view_src) {
      t->data = static_cast<uint8_t*>(t->view_src->data) + t->view_offset;
      return;
    }
    blocks_.emplace_back(new uint8_t[t->nbytes()]());
    t->data = blocks_.back().get();
  }

 private:
  std::vector<std::unique_ptr<uint8_t[]>> blocks_;
};

// Runs what a server would run on an accepted node: its kernel, or for leafs and views a
// copy that reads every element through their strides.
void exercise(Tensor* t, int* compute_errors) {
  constexpr int64_t kMaxElements = 1 << 16;  // accepted mutants may be valid but large
  if (t->nelements() > kMaxElements || byte_span(*t) > (size_t{1} << 24)) return;
  HostMemory memory;
  Context scratch;
  Tensor* dst = t;
  if (t->op == Op::None || is_view_op(t->op)) {
    if (t->op == Op::None) memory.place(t);
    if (t->view_src) memory.place(t);
    dst = scratch.new_op(Op::Cont, t->type, t->ne, {t});
  }
  memory.place(dst);
  try {
    reference_kernel(dst->op)(dst);
  } catch (const Error&) {
    ++*compute_errors;  // refused at compute time: a clean error, not a crash
  }
}

int64_t mutate_int64(std::mt19937_64& rng, int64_t v) {
  const int64_t choices[] = {0,
                             -1,
                             1,
                             2,
                             3,
                             v - 1,
                             v + 1,
                             v * 2,
                             v / 2,
                             32,
                             256,
                             int64_t{1} << 31,
                             int64_t{1} << 40,
                             (int64_t{1} << 40) + 1,
                             int64_t{1} << 62,
                             std::numeric_limits<int64_t>::max(),
                             std::numeric_limits<int64_t>::min(),
                             static_cast<int64_t>(rng() % 16)};
  return choices[rng() % std::size(choices)];
}

size_t mutate_size(std::mt19937_64& rng, size_t v) {
  const size_t choices[] = {0,
                            1,
                            2,
                            4,
                            v - 1,
                            v + 1,
                            v + 2,
                            v + 4,
                            v * 2,
                            v / 2,
                            18,
                            34,
                            size_t{1} << 40,
                            std::numeric_limits<size_t>::max(),
                            std::numeric_limits<size_t>::max() / 2,
                            static_cast<size_t>(rng() % 1024)};
  return choices[rng() % std::size(choices)];
}

int32_t float_bits(float f) {
  int32_t i;
  std::memcpy(&i, &f, 4);
  return i;
}

int32_t mutate_param(std::mt19937_64& rng, int32_t v) {
  const int32_t choices[] = {0,
                             1,
                             -1,
                             2,
                             3,
                             4,
                             7,
                             8,
                             v + 1,
                             v - 1,
                             std::numeric_limits<int32_t>::max(),
                             std::numeric_limits<int32_t>::min(),
                             float_bits(0.5f),
                             float_bits(-1.0f),
                             float_bits(std::numeric_limits<float>::quiet_NaN()),
                             float_bits(std::numeric_limits<float>::infinity()),
                             float_bits(1e-5f),
                             float_bits(1e30f),
                             static_cast<int32_t>(rng())};
  return choices[rng() % std::size(choices)];
}

// One random change to one field of tensors[index]; sources stay earlier tensors (or none),
// as the wire format enforces.
void mutate(std::mt19937_64& rng, const std::vector<Tensor*>& tensors, size_t index) {
  Tensor* t = tensors[index];
  auto earlier = [&]() -> Tensor* {
    const size_t pick = rng() % (index + 1);
    return pick == index ? nullptr : tensors[pick];
  };
  const int dim = static_cast<int>(rng() % kMaxDims);
  switch (rng() % 8) {
    case 0:
      t->op = static_cast<Op>(rng() % 2 ? rng() % kOpCount : rng() % 256);
      break;
    case 1:
      t->type =
          static_cast<DType>(rng() % 2 ? rng() % static_cast<int>(DType::Count) : rng() % 256);
      break;
    case 2:
      t->ne[dim] = mutate_int64(rng, t->ne[dim]);
      break;
    case 3:
      t->nb[dim] = mutate_size(rng, t->nb[dim]);
      break;
    case 4:
    case 5: {
      // Mostly the slots ops use.
      const int slots = rng() % 4 ? 9 : kMaxOpParams;
      const int i = static_cast<int>(rng() % slots);
      t->params[i] = mutate_param(rng, t->params[i]);
      break;
    }
    case 6:
      if (rng() % 2) {
        const int slot = static_cast<int>(rng() % kMaxSrc);
        t->src[slot] = earlier();
      } else {
        t->view_src = earlier();
      }
      break;
    case 7:
      t->view_offset = mutate_size(rng, t->view_offset);
      break;
  }
}

TEST(NodeCheck, RandomMutationsAreRejectedOrSafe) {
  std::mt19937_64 rng(20240611);
  int accepted = 0, rejected = 0, compute_errors = 0;
  for (SampleGraph& g : sample_graphs()) {
    HostMemory memory;
    for (Tensor* t : g.tensors) memory.place(t);
    for (int iteration = 0; iteration < 10000; ++iteration) {
      const size_t index = rng() % g.tensors.size();
      Tensor* t = g.tensors[index];
      const Tensor saved = *t;
      mutate(rng, g.tensors, index);
      const bool unknown_enum =
          static_cast<int>(t->op) >= kOpCount ||
          static_cast<unsigned>(t->type) >= static_cast<unsigned>(DType::Count);
      const std::string why = rejection(*t);
      if (!why.empty()) {
        ++rejected;
      } else {
        ++accepted;
        EXPECT_FALSE(unknown_enum) << g.name << ": " << saved.name;
        // What the allocator and kernels rely on.
        if (t->op != Op::None && !is_view_op(t->op)) {
          EXPECT_EQ(t->nb, contiguous_strides(t->type, t->ne)) << g.name << ": " << saved.name;
          EXPECT_EQ(t->view_src, nullptr);
        }
        if (is_view_op(t->op)) {
          ASSERT_NE(t->view_src, nullptr);
          EXPECT_EQ(t->view_src, t->src[0]);
          EXPECT_LE(t->view_offset + byte_span(*t), byte_span(*t->view_src));
        }
        exercise(t, &compute_errors);
      }
      *t = saved;
    }
    for (const Tensor* t : g.tensors) ASSERT_EQ(rejection(*t), "") << "restore " << t->name;
  }
  // Most random changes break a node. The accepted ones are no-ops (a stride of a size-1
  // dim, an unused source slot set to null), leaf layouts, or another valid node (a view's
  // offset, a unary's function, an upscale's mode, a clamp's bounds).
  EXPECT_GT(rejected, 3 * accepted);
  EXPECT_GT(accepted, 100);
  RecordProperty("accepted", accepted);
  RecordProperty("compute_errors", compute_errors);
  std::printf("mutations: %d rejected, %d accepted (%d refused at compute time)\n", rejected,
              accepted, compute_errors);
}

}  // namespace
}  // namespace sd::rpc
