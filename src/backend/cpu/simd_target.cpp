#include "backend/cpu/simd_target.h"

#include <hwy/highway.h>
#include <hwy/targets.h>

namespace sd {

std::string simd_target_name() {
  // The best target this CPU supports among those compiled in.
  const int64_t targets = hwy::SupportedTargets() & HWY_TARGETS;
  for (int64_t bit = 1; bit != 0 && bit <= targets; bit <<= 1) {
    if (targets & bit) return hwy::TargetName(bit);
  }
  return "scalar";
}

}  // namespace sd
