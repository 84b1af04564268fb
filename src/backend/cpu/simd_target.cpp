#include "backend/cpu/simd_target.h"

#include <hwy/highway.h>
#include <hwy/targets.h>

namespace sd {

std::string simd_target_name() {
  // The best target this CPU supports among those compiled in.
  const int64_t targets = hwy::SupportedTargets() & HWY_TARGETS;
  for (int64_t bit = 1; bit != 0 && bit <= targets; bit <<= 1) {
    if (!(targets & bit)) continue;
    // Highway's names for AVX-512 levels ("AVX3", "AVX3_DL") are not what users know.
    const std::string name = hwy::TargetName(bit);
    if (name == "AVX3") return "AVX-512";
    if (name == "AVX3_DL") return "AVX-512 VNNI/VBMI2";
    return name;
  }
  return "scalar";
}

}  // namespace sd
