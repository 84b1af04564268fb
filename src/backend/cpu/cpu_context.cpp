#include "backend/cpu/cpu_context.h"

#include "backend/cpu/dnnl_state.h"

namespace sd {

CpuContext::CpuContext() : dnnl(std::make_unique<DnnlState>()) {}
CpuContext::~CpuContext() = default;

}  // namespace sd
