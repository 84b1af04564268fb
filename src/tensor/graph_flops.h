// The arithmetic a graph asks for: 2 FLOPs per multiply-add of its matrix products,
// convolutions and attention, the work that sets a network's speed limit (the rest,
// elementwise ops and norms, is a few percent of a diffusion step). Dividing by a
// device's GEMM peak gives the time below which a call cannot run.
#pragma once

#include "tensor/graph.h"

namespace sd {

// Of one node: MatMul, Conv2d and Attention; 0 for every other op.
double node_flops(const Tensor* node);
// Of every node of `graph`.
double graph_flops(const Graph& graph);

}  // namespace sd
