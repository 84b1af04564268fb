// oneDNN objects a CPU backend keeps across graphs: one engine and stream, and weights
// reordered once into oneDNN's preferred layout, keyed by their memory.
#pragma once

#include <cstdint>
#include <map>
#include <utility>

#include <oneapi/dnnl/dnnl.hpp>

#include "backend/cpu/cpu_context.h"

namespace sd {

struct DnnlState {
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream{engine};
};

}  // namespace sd
