// The SIMD instruction set Highway's runtime dispatch picked on this machine.
#pragma once

#include <string>

namespace sd {

std::string simd_target_name();

}  // namespace sd
