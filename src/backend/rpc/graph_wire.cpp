#include "backend/rpc/graph_wire.h"

#include <algorithm>
#include <cstdint>
#include <unordered_map>

#include "backend/rpc/node_check.h"
#include "backend/rpc/protocol.h"
#include "tensor/error.h"

namespace sd::rpc {

wire::GraphDesc describe_graph(const Graph& graph, const LocateTensor& locate) {
  wire::GraphDesc desc;
  std::unordered_map<const Tensor*, int32_t> index;
  auto add = [&](const Tensor* t) {
    wire::TensorDesc* d = desc.add_tensors();
    d->set_type(static_cast<uint32_t>(t->type));
    for (int i = 0; i < kMaxDims; ++i) {
      d->add_ne(t->ne[i]);
      d->add_nb(t->nb[i]);
    }
    d->set_op(static_cast<uint32_t>(t->op));
    for (int32_t p : t->params) d->add_params(p);
    for (const Tensor* s : t->src) d->add_src(s ? index.at(s) : -1);
    const bool is_view = t->view_src != nullptr;
    d->set_view_src(is_view ? index.at(t->view_src) : -1);
    d->set_view_offset(t->view_offset);
    if (!is_view) {
      SD_CHECK(t->data, "[RPC] tensor '%s' (%s) has no memory; allocate the graph first",
               t->name.c_str(), op_name(t->op).data());
      auto [buffer, offset] = locate(*t);
      d->set_buffer(buffer);
      d->set_offset(offset);
    }
    d->set_flags(t->flags);
    d->set_name(t->name);
    index.emplace(t, static_cast<int32_t>(index.size()));
  };
  for (const Tensor* t : graph.leafs) add(t);
  desc.set_leaf_count(static_cast<uint32_t>(graph.leafs.size()));
  for (const Tensor* t : graph.nodes) add(t);
  return desc;
}

namespace {

constexpr uint32_t kKnownFlags = kFlagInput | kFlagOutput | kFlagParam;

// Names only appear in messages: a longer one is cut so error replies stay small.
constexpr size_t kMaxNameChars = 256;

std::string short_name(const wire::TensorDesc& d) {
  return d.name().size() <= kMaxNameChars ? d.name() : d.name().substr(0, kMaxNameChars) + "...";
}

// Kernels reach elements through typed pointers (float, a block struct), so addresses and
// strides must be multiples of this: the largest power of two dividing the element or block
// size, at most 4. Whole elements and blocks keep it, so layouts the engine makes always do.
uint64_t element_alignment(DType type) {
  const uint64_t size = type_size(type);
  return std::min<uint64_t>(4, size & (~size + 1));
}

// The tensor's name for messages: its own, or its index.
std::string label(const wire::TensorDesc& d, int i) {
  return d.name().empty() ? format("#%d", i) : format("'%s' (#%d)", short_name(d).c_str(), i);
}

}  // namespace

std::unique_ptr<ReceivedGraph> receive_graph(const wire::GraphDesc& desc,
                                             const FindBuffer& find_buffer) {
  const int count = desc.tensors_size();
  SD_CHECK(count > 0 && count <= kMaxGraphTensors,
           "[RPC] a graph must have 1 to %d tensors, this one has %d", kMaxGraphTensors, count);
  SD_CHECK(desc.leaf_count() <= static_cast<uint32_t>(count),
           "[RPC] the graph says it has %u leafs but only %d tensors", desc.leaf_count(), count);
  auto out = std::make_unique<ReceivedGraph>();
  std::vector<Tensor*> tensors;
  tensors.reserve(count);
  for (int i = 0; i < count; ++i) {
    const wire::TensorDesc& d = desc.tensors(i);
    const std::string what = label(d, i);
    SD_CHECK(d.ne_size() == kMaxDims && d.nb_size() == kMaxDims,
             "[RPC] tensor %s must have %d sizes and %d strides", what.c_str(), kMaxDims, kMaxDims);
    SD_CHECK(d.params_size() <= kMaxOpParams && d.src_size() <= kMaxSrc,
             "[RPC] tensor %s has too many parameters or sources", what.c_str());
    SD_CHECK(d.type() < static_cast<uint32_t>(DType::Count), "[RPC] tensor %s has dtype %u",
             what.c_str(), d.type());
    SD_CHECK(d.op() < static_cast<uint32_t>(Op::Count), "[RPC] tensor %s has op %u", what.c_str(),
             d.op());
    SD_CHECK((d.flags() & ~kKnownFlags) == 0, "[RPC] tensor %s has unknown flags %#x", what.c_str(),
             d.flags());
    const bool leaf = i < static_cast<int>(desc.leaf_count());
    const Op op = static_cast<Op>(d.op());
    SD_CHECK(leaf == (op == Op::None), "[RPC] tensor %s: leafs come first and have no op",
             what.c_str());

    // Made as f32 since a 1-element placeholder is no whole block of a block type; the
    // real dtype, shape and strides are checked below.
    Tensor* t = out->ctx.new_tensor(DType::F32, Shape{1, 1, 1, 1}, short_name(d));
    t->type = static_cast<DType>(d.type());
    t->op = op;
    for (int k = 0; k < kMaxDims; ++k) {
      t->ne[k] = d.ne(k);
      t->nb[k] = d.nb(k);
    }
    for (int k = 0; k < d.params_size(); ++k) t->params[k] = d.params(k);
    for (int k = 0; k < d.src_size(); ++k) {
      const int32_t s = d.src(k);
      SD_CHECK(s >= -1 && s < i, "[RPC] tensor %s names source %d, not an earlier tensor",
               what.c_str(), s);
      t->src[k] = s >= 0 ? tensors[s] : nullptr;
    }
    SD_CHECK(d.view_src() >= -1 && d.view_src() < i,
             "[RPC] tensor %s is a view of %d, not an earlier tensor", what.c_str(), d.view_src());
    t->view_src = d.view_src() >= 0 ? tensors[d.view_src()] : nullptr;
    t->view_offset = d.view_offset();
    t->flags = d.flags();
    // Shapes, strides, parameters and view ranges against the op's own builder.
    check_node(*t);
    const uint64_t align = element_alignment(t->type);
    for (int k = 0; k < kMaxDims; ++k) {
      SD_CHECK(t->ne[k] == 1 || t->nb[k] % align == 0,
               "[RPC] tensor %s: stride %d of %zu bytes misaligns its %s elements (%llu-byte "
               "alignment)",
               what.c_str(), k, t->nb[k], dtype_name(t->type).data(),
               static_cast<unsigned long long>(align));
    }

    if (t->view_src) {
      t->buffer = t->view_src->buffer;
      t->data = static_cast<uint8_t*>(t->view_src->data) + t->view_offset;
    } else {
      Buffer* b = find_buffer(d.buffer());
      SD_CHECK(b,
               "[RPC] tensor %s names buffer %llu, which this session does not have (freed "
               "or never allocated)",
               what.c_str(), static_cast<unsigned long long>(d.buffer()));
      const size_t size = t->nbytes();
      SD_CHECK(d.offset() <= b->size() && size <= b->size() - d.offset(),
               "[RPC] tensor %s (%zu bytes at offset %llu) does not fit its buffer of %zu bytes",
               what.c_str(), size, static_cast<unsigned long long>(d.offset()), b->size());
      t->buffer = b;
      t->data = static_cast<uint8_t*>(b->base()) + d.offset();
      out->buffers.insert(d.buffer());
      if (!leaf) out->written.insert(d.buffer());
    }
    SD_CHECK(reinterpret_cast<uintptr_t>(t->data) % align == 0,
             "[RPC] tensor %s: its offset misaligns its %s elements (%llu-byte alignment)",
             what.c_str(), dtype_name(t->type).data(), static_cast<unsigned long long>(align));
    tensors.push_back(t);
    (leaf ? out->graph.leafs : out->graph.nodes).push_back(t);
  }
  return out;
}

}  // namespace sd::rpc
