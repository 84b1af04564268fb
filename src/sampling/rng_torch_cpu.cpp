#include "sampling/rng_torch_cpu.h"

#include <cmath>

namespace sd::sampling {

namespace {
constexpr uint32_t kMatrixA = 0x9908b0dfU;
constexpr uint32_t kUpperMask = 0x80000000U;
constexpr uint32_t kLowerMask = 0x7fffffffU;

uint32_t twist(uint32_t u, uint32_t v) {
  const uint32_t mixed = (u & kUpperMask) | (v & kLowerMask);
  return (mixed >> 1) ^ ((v & 1) ? kMatrixA : 0);
}
}  // namespace

TorchCpuRng::TorchCpuRng(uint64_t seed) {
  state_[0] = static_cast<uint32_t>(seed);
  for (int j = 1; j < kStateSize; ++j) {
    const uint32_t prev = state_[j - 1];
    state_[j] = 1812433253U * (prev ^ (prev >> 30)) + static_cast<uint32_t>(j);
  }
}

void TorchCpuRng::regenerate() {
  for (int j = 0; j < kStateSize; ++j) {
    const uint32_t next = state_[(j + 1) % kStateSize];
    state_[j] = state_[(j + kShift) % kStateSize] ^ twist(state_[j], next);
  }
  left_ = kStateSize;
  next_ = 0;
}

uint32_t TorchCpuRng::next_uint32() {
  if (--left_ == 0) regenerate();
  uint32_t y = state_[next_++];
  y ^= y >> 11;
  y ^= (y << 7) & 0x9d2c5680U;
  y ^= (y << 15) & 0xefc60000U;
  y ^= y >> 18;
  return y;
}

uint64_t TorchCpuRng::next_uint64() {
  const uint64_t high = next_uint32();
  const uint64_t low = next_uint32();
  return (high << 32) | low;
}

// Uniform [0, 1) from the low mantissa-width bits, as torch does.
float TorchCpuRng::next_uniform_float() {
  constexpr uint32_t kMask = (1u << 24) - 1;
  return static_cast<float>(next_uint32() & kMask) * (1.0f / (1u << 24));
}

double TorchCpuRng::next_uniform_double() {
  constexpr uint64_t kMask = (uint64_t{1} << 53) - 1;
  return static_cast<double>(next_uint64() & kMask) * (1.0 / (uint64_t{1} << 53));
}

double TorchCpuRng::next_normal_double() {
  if (has_spare_normal_) {
    has_spare_normal_ = false;
    return spare_normal_;
  }
  const double u1 = next_uniform_double();
  const double u2 = next_uniform_double();
  const double radius = std::sqrt(-2.0 * std::log1p(-u2));
  const double theta = 2.0 * 3.14159265358979323846 * u1;
  spare_normal_ = radius * std::sin(theta);
  has_spare_normal_ = true;
  return radius * std::cos(theta);
}

// Box-Muller in float on a block of 16 uniforms: the first 8 give radii, the last 8
// angles, and each pair writes a cosine into the first half and a sine into the second.
static void normal_block16(float* data) {
  for (int j = 0; j < 8; ++j) {
    const float radius = std::sqrt(-2.0f * std::log(1.0f - data[j]));
    const float theta = 2.0f * 3.14159265358979323846f * data[j + 8];
    data[j] = radius * std::cos(theta);
    data[j + 8] = radius * std::sin(theta);
  }
}

void TorchCpuRng::fill_normal_blocks(float* data, size_t n) {
  for (size_t i = 0; i < n; ++i) data[i] = next_uniform_float();
  for (size_t i = 0; i + 16 <= n; i += 16) normal_block16(data + i);
  if (n % 16 != 0) {
    // The tail is covered by one more block over the last 16 slots, from fresh uniforms.
    float* tail = data + n - 16;
    for (int i = 0; i < 16; ++i) tail[i] = next_uniform_float();
    normal_block16(tail);
  }
}

std::vector<float> TorchCpuRng::randn(size_t n) {
  std::vector<float> out(n);
  if (n >= 16) {
    fill_normal_blocks(out.data(), n);
  } else {
    for (float& v : out) v = static_cast<float>(next_normal_double());
  }
  return out;
}

}  // namespace sd::sampling
