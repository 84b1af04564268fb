#include "backend/cpu/cpu_backend.h"

#include <omp.h>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include "tensor/ops/conv2d.h"

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
  ctx_.threads = threads > 0 ? threads : omp_get_num_procs();
}

void CpuBackend::compute(const Graph& graph) {
  check_supported(device_, graph);
  // oneDNN's OpenMP runtime and our kernels both take the thread count from here.
  omp_set_num_threads(ctx_.threads);
  static const bool kProf = std::getenv("SD_TMP_PROF") != nullptr;
  std::map<std::string, std::pair<double,int>> prof;
  double total = 0;
  for (Tensor* node : graph.nodes) {
    const auto t0 = std::chrono::steady_clock::now();
    struct Rec { std::map<std::string, std::pair<double,int>>* m; Tensor* n; std::chrono::steady_clock::time_point t0; double* total;
      ~Rec() { if (!m) return; double dt = std::chrono::duration<double>(std::chrono::steady_clock::now()-t0).count();
        std::string k(op_name(n->op));
        if (n->op == Op::Conv2d) { k += n->src[1]->ne[0]==1 ? "_1x1" : "_3x3"; k += "_"; k += dtype_name(n->src[1]->type); k += "@" + std::to_string(n->ne[0]) + "x" + std::to_string(n->src[0]->ne[2]) + "->" + std::to_string(n->ne[2]); }
        if (n->op == Op::Unary) { k += "_"; k += unary_name(static_cast<UnaryOp>(n->params[0])); }
        if (n->op != Op::Conv2d) k += "@" + std::to_string(n->ne[0]);
        auto& e = (*m)[k]; e.first += dt; e.second++; *total += dt; } } rec{kProf && !is_view_op(node->op) ? &prof : nullptr, node, t0, &total};
    if (is_view_op(node->op)) continue;
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
  if (kProf && total > 0.5) {
    std::fprintf(stderr, "PROF total %.3f s\n", total);
    for (auto& [k, v] : prof) if (v.first > 0.005) std::fprintf(stderr, "PROF %-40s %8.3f s  n=%d\n", k.c_str(), v.first, v.second);
  }
}

void CpuBackend::release_caches() {
  ctx_.dnnl->forget_weights();
}

}  // namespace sd
