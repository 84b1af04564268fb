#include "tensor/graph_flops.h"

namespace sd {

double node_flops(const Tensor* n) {
  switch (n->op) {
    case Op::MatMul:  // K multiply-adds per output value
      return 2.0 * static_cast<double>(n->src[0]->ne[0]) * static_cast<double>(n->nelements());
    case Op::Conv2d: {  // kw x kh x input channels (per group) per output value
      const Tensor* w = n->src[1];
      return 2.0 * static_cast<double>(w->ne[0] * w->ne[1] * w->ne[2]) *
             static_cast<double>(n->nelements());
    }
    case Op::Attention: {  // q [D, Lq, H, N], k [D, Lk, H, N], v [Dv, Lk, H, N]: q k^T, then
                           // the softmax weights times v
      const Tensor* q = n->src[0];
      const double scores = static_cast<double>(q->ne[1] * q->ne[2] * q->ne[3]) *
                            static_cast<double>(n->src[1]->ne[1]);
      return 2.0 * scores * static_cast<double>(q->ne[0] + n->src[2]->ne[0]);
    }
    default:
      return 0.0;
  }
}

double graph_flops(const Graph& graph) {
  double flops = 0;
  for (const Tensor* n : graph.nodes) flops += node_flops(n);
  return flops;
}

}  // namespace sd
