// The plain reference kernel of every op: the test oracle, and the CPU backend's
// fallback where it has no fast kernel. Kernels read and write host memory.
#pragma once

#include "tensor/tensor.h"

namespace sd {

using Kernel = void (*)(Tensor* dst);

// nullptr for view ops and leaves, which compute nothing.
Kernel reference_kernel(Op op);

}  // namespace sd
