// Graphs on the wire. The client describes a graph as a list of tensors that name their
// sources by index and their memory as (remote buffer, offset); the server rebuilds it in
// a Context of its own, checking every field a hostile client could get wrong before any
// kernel sees it.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <set>
#include <utility>

#include "backend/backend.h"
#include "backend/rpc/remote.pb.h"
#include "tensor/context.h"
#include "tensor/graph.h"

namespace sd::rpc {

// Client side. `locate` gives the remote buffer id and the offset in it of a tensor that
// owns memory (not a view); it throws when the tensor lives elsewhere.
using LocateTensor = std::function<std::pair<uint64_t, uint64_t>(const Tensor&)>;
wire::GraphDesc describe_graph(const Graph& graph, const LocateTensor& locate);

// Server side: a graph rebuilt from its description, ready to compute.
struct ReceivedGraph {
  Context ctx;
  Graph graph;
  std::set<uint64_t> buffers;  // every buffer it reads or writes
  std::set<uint64_t> written;  // the buffers its computed nodes write into
};

// Returns nullptr for an unknown buffer id.
using FindBuffer = std::function<Buffer*(uint64_t)>;
// Throws sd::Error naming the tensor and the problem when the description is malformed.
std::unique_ptr<ReceivedGraph> receive_graph(const wire::GraphDesc& desc,
                                             const FindBuffer& find_buffer);

}  // namespace sd::rpc
