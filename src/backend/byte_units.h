#pragma once
// Byte counts in the units that messages print them in.

#include <cstddef>

namespace sd {

inline double mib(size_t bytes) {
  return static_cast<double>(bytes) / (1 << 20);
}

inline double gib(size_t bytes) {
  return static_cast<double>(bytes) / (1 << 30);
}

}  // namespace sd
