// Computes a graph whose weights may leave RAM once read: weights mapped from a file and
// kept on disk (--params-backend disk) ask for it (Buffer::evict_after_use). Each such
// weight's pages are dropped once the last node that reads it has run, so a phase holds
// the weights of the nodes in flight instead of the whole model; the next call faults them
// back from the page cache, or from the file when memory was short.
#pragma once

#include <cstddef>

#include "backend/backend.h"

namespace sd {

// Weights are dropped in batches of at least this many bytes: a few calls per step.
constexpr size_t kReleaseBatchBytes = size_t{64} << 20;

// Runs every node of `graph` on `backend` (which reads the weights where they are) in
// order, releasing weights as above; a graph without such weights runs in one call.
void compute_releasing_weights(Backend& backend, const Graph& graph,
                               size_t batch_bytes = kReleaseBatchBytes);

}  // namespace sd
