#include "backend/cpu/cpu_backend.h"

#include <malloc.h>

#include <omp.h>
#include <algorithm>

#include "backend/cpu/dnnl_state.h"
#include "backend/cpu/kernels.h"
#include "tensor/error.h"
#include "tensor/ops/reference.h"

namespace sd {

CpuBackend::CpuBackend(CpuDevice& device, const BackendOptions& options, CpuKernels kernels)
    : device_(device), kernels_(kernels) {
  set_threads(options.threads);
}

void CpuBackend::set_threads(int threads) {
  ctx_.threads = threads > 0 ? std::min(threads, omp_get_num_procs()) : omp_get_num_procs();
}

void CpuBackend::compute_nodes(const Graph& graph, size_t first, size_t end) {
  SD_CHECK(first <= end && end <= graph.nodes.size(),
           "[CPU] nodes %zu..%zu are outside a graph of %zu nodes", first, end, graph.nodes.size());
  check_supported(device_, graph);
  // oneDNN's OpenMP runtime and our kernels both take the thread count from here.
  omp_set_num_threads(ctx_.threads);
  const bool timed = deadline_ != std::chrono::steady_clock::time_point::max();
  size_t done = first;
  for (size_t i = first; i < end; ++i) {
    Tensor* node = graph.nodes[i];
    ++done;
    if (is_view_op(node->op)) continue;
    SD_CHECK(!stop_ || !stop_(), "generation cancelled");
    SD_CHECK(!timed || std::chrono::steady_clock::now() < deadline_,
             "[CPU] compute stopped past its deadline, at node %zu of %zu (%s)", done,
             graph.nodes.size(), op_name(node->op).data());
    SD_CHECK(node->data, "[CPU] tensor '%s' (%s) has no memory; allocate the graph first",
             node->name.c_str(), op_name(node->op).data());
    for (const Tensor* s : node->src) {
      SD_CHECK(!s || (s->data && s->buffer && s->buffer->is_host()),
               "[CPU] input '%s' of %s is not in host memory", s ? s->name.c_str() : "",
               op_name(node->op).data());
    }
    if (kernels_ == CpuKernels::Fast) {
      CpuKernel fast = cpu_fast_kernel(node->op);
      if (fast && fast(ctx_, node)) continue;
    }
    reference_kernel(node->op)(node);
  }
}

void CpuBackend::release_caches() {
  ctx_.dnnl->forget_weights();
  ctx_.dnnl->release_scratch();
  // glibc keeps freed blocks below its heaps' tops for reuse: a phase's weights and scratch,
  // freed in blocks of a few MiB (SDXL's split text-encoder weights: 315 MB), would stay in
  // this process beside the next phase's. Hand those pages back to the system.
#ifdef __GLIBC__
  malloc_trim(0);
#endif
}

}  // namespace sd
