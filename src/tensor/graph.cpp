#include "tensor/graph.h"

#include <unordered_map>
#include <unordered_set>

namespace sd {

namespace {

void visit(Tensor* t, std::unordered_set<Tensor*>& seen, Graph& g) {
  // Iterative post-order: model graphs are thousands of ops deep and would overflow the stack.
  std::vector<std::pair<Tensor*, int>> stack{{t, 0}};
  while (!stack.empty()) {
    auto& [node, next] = stack.back();
    if (next == 0 && seen.count(node)) {
      stack.pop_back();
      continue;
    }
    if (next < kMaxSrc) {
      Tensor* s = node->src[next++];
      if (s && !seen.count(s)) stack.push_back({s, 0});
      continue;
    }
    seen.insert(node);
    (node->op == Op::None ? g.leafs : g.nodes).push_back(node);
    stack.pop_back();
  }
}

uint64_t mix(uint64_t h, uint64_t v) {
  // FNV-1a over 64-bit words: enough to key a cache of graph structures.
  h ^= v;
  return h * 0x100000001b3ull;
}

}  // namespace

Graph Graph::build(std::initializer_list<Tensor*> outputs) {
  return build(std::vector<Tensor*>(outputs));
}

Graph Graph::build(const std::vector<Tensor*>& outputs) {
  Graph g;
  std::unordered_set<Tensor*> seen;
  for (Tensor* t : outputs) {
    t->flags |= kFlagOutput;
    visit(t, seen, g);
  }
  return g;
}

uint64_t Graph::structural_hash() const {
  std::unordered_map<const Tensor*, uint64_t> index;
  uint64_t h = 0xcbf29ce484222325ull;
  auto add_tensor = [&](const Tensor* t) {
    index[t] = index.size();
    h = mix(h, static_cast<uint64_t>(t->op));
    h = mix(h, static_cast<uint64_t>(t->type));
    h = mix(h, t->flags);
    for (int i = 0; i < kMaxDims; ++i) h = mix(mix(h, static_cast<uint64_t>(t->ne[i])), t->nb[i]);
    for (int32_t p : t->params) h = mix(h, static_cast<uint32_t>(p));
    h = mix(h, t->view_offset);
    for (const Tensor* s : t->src) h = mix(h, s ? index.at(s) + 1 : 0);
  };
  for (const Tensor* t : leafs) add_tensor(t);
  for (const Tensor* t : nodes) add_tensor(t);
  return h;
}

}  // namespace sd
