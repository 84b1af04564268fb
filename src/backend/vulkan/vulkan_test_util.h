// Shared by the Vulkan tests: the device under test (the first Vulkan device; tests skip
// where there is none) and the comparison of a graph computed there with the reference
// kernels, with the validation layers' error count checked around it.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>

#include "backend/registry.h"
#include "backend/vulkan/vulkan_device.h"
#include "backend/vulkan/vulkan_instance.h"
#include "test_support.h"

namespace sd::vulkan::test {

// The validation layers check every call of these tests, unless SD_VULKAN_VALIDATION is set
// otherwise (set before the instance is made, on first use of a device).
inline const bool kValidationLayersOn = [] {
  setenv("SD_VULKAN_VALIDATION", "1", /*overwrite=*/0);
  return true;
}();

inline Device* first_vulkan_device() {
  for (const auto& d : DeviceRegistry::instance().devices())
    if (d->name().rfind("Vulkan", 0) == 0) return d.get();
  return nullptr;
}

#define SD_REQUIRE_VULKAN(device)                                             \
  Device* device = ::sd::vulkan::test::first_vulkan_device();                 \
  if (!device)                                                                \
  GTEST_SKIP() << "no Vulkan device here (Debian: mesa-vulkan-drivers gives " \
                  "lavapipe, a software one)"

// Runs `c` on `device` and with the reference kernels; every output must agree within
// atol + rtol * |reference|, and the validation layers must report no error.
inline void expect_matches_reference(Device& device, const sd::test::GraphCase& c, double atol,
                                     double rtol) {
  const int errors_before = validation_errors();
  auto got = sd::test::run_case_on(c, device);
  auto want = sd::test::run_case(c, CpuKernels::Reference);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_EQ(got[i].size(), want[i].size());
    EXPECT_LE(sd::test::max_scaled_error(got[i], want[i], atol, rtol), 1.0)
        << "output " << i << " differs beyond atol " << atol << " + rtol " << rtol;
  }
  EXPECT_EQ(validation_errors(), errors_before) << "the validation layers reported errors";
}

// Error bound for sums of `reduction` products of values in [-1, 1]: the shaders sum in f32
// in tile order, the reference in double; 3e-7 per term (as the CPU kernels' tests allow)
// is far below the O(1) error of an indexing bug. 16-bit and block-quantized weights widen
// to f32 exactly, so the same bound holds for them.
inline double atol_for(int64_t reduction) {
  return 1e-6 + 3e-7 * static_cast<double>(reduction);
}

}  // namespace sd::vulkan::test
