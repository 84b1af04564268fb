// State shared by the CPU backend's fast kernels for one backend instance.
#pragma once

#include <memory>

namespace sd {

struct DnnlState;  // oneDNN engine, stream and primitive/weight caches (dnnl_state.h)

struct CpuContext {
  CpuContext();
  ~CpuContext();
  CpuContext(const CpuContext&) = delete;
  CpuContext& operator=(const CpuContext&) = delete;

  int threads = 1;
  std::unique_ptr<DnnlState> dnnl;
};

}  // namespace sd
