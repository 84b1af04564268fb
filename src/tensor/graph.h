// A computation graph: the tensors reachable from some outputs, in an order where every
// source comes before its users. Plain data, so it can be hashed and sent elsewhere.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <vector>

#include "tensor/tensor.h"

namespace sd {

struct Graph {
  std::vector<Tensor*> leafs;  // Op::None: weights and inputs
  std::vector<Tensor*> nodes;  // everything computed (views included), in execution order

  // Collects the graph that computes `outputs`, marking them kFlagOutput.
  static Graph build(std::initializer_list<Tensor*> outputs);
  static Graph build(const std::vector<Tensor*>& outputs);

  // Hash of structure only (ops, params, shapes, dtypes, wiring, flags): two graphs with
  // the same hash compute the same function of their leaf data.
  uint64_t structural_hash() const;
};

}  // namespace sd
