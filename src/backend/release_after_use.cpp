#include "backend/release_after_use.h"

#include <unordered_map>
#include <vector>

#include "tensor/graph.h"

namespace sd {

void compute_releasing_weights(Backend& backend, const Graph& graph, size_t batch_bytes) {
  const size_t n = graph.nodes.size();
  // The last node reading each releasable weight (through views too).
  std::unordered_map<Tensor*, size_t> last_reader;
  for (size_t i = 0; i < n; ++i) {
    for (Tensor* s : graph.nodes[i]->src) {
      if (!s) continue;
      Tensor* root = s->storage_root();
      if (root->buffer && root->buffer->evict_after_use()) last_reader[root] = i;
    }
  }
  if (last_reader.empty()) return backend.compute(graph);

  std::vector<std::vector<Tensor*>> done_after(n);
  for (const auto& [weight, node] : last_reader) done_after[node].push_back(weight);
  size_t first = 0, pending_bytes = 0;
  std::vector<Tensor*> pending;
  for (size_t i = 0; i < n; ++i) {
    for (Tensor* w : done_after[i]) {
      pending.push_back(w);
      pending_bytes += w->nbytes();
    }
    if (pending_bytes < batch_bytes && i + 1 < n) continue;
    backend.compute_nodes(graph, first, i + 1);
    backend.synchronize();  // nothing may still read them
    for (Tensor* w : pending) w->buffer->evict(w->data, w->nbytes());
    pending.clear();
    pending_bytes = 0;
    first = i + 1;
  }
}

}  // namespace sd
