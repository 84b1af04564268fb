// A graph's inputs read where the caller holds them, on a device whose kernels read host
// memory (the CPU): bound to the caller's memory instead of being copied into the compute
// buffer, which then holds only what the graph computes. A Wan clip's full-resolution
// stage read a 153 MB frame and six 77 MB remembered frames: half of its 1.2 GB buffer was
// copies of memory the caller already held.
#pragma once

#include <memory>
#include <utility>
#include <vector>

#include "backend/backend.h"
#include "tensor/graph.h"

namespace sd {

class BorrowedInputs {
 public:
  // Binds each of `inputs` (tensor, host data) that `graph` reads, when `device` reads host
  // memory and the data is aligned as its buffers are; the others are left for upload.
  BorrowedInputs(Device& device, const Graph& graph,
                 const std::vector<std::pair<Tensor*, const void*>>& inputs);
  // Unbinds them: the memory was only lent for the call.
  ~BorrowedInputs();
  BorrowedInputs(const BorrowedInputs&) = delete;
  BorrowedInputs& operator=(const BorrowedInputs&) = delete;

  bool borrowed(const Tensor* t) const;

 private:
  std::vector<std::pair<Tensor*, std::unique_ptr<Buffer>>> bound_;
};

}  // namespace sd
