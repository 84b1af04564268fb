#include "sampling/rng_philox.h"

#include <cmath>

namespace sd::sampling {

namespace {

constexpr uint32_t kMultiplier0 = 0xD2511F53;
constexpr uint32_t kMultiplier1 = 0xCD9E8D57;
constexpr uint32_t kKeyBump0 = 0x9E3779B9;  // golden ratio
constexpr uint32_t kKeyBump1 = 0xBB67AE85;  // sqrt(3) - 1

void philox_round(std::array<uint32_t, 4>& c, const std::array<uint32_t, 2>& key) {
  const uint64_t product0 = uint64_t{kMultiplier0} * c[0];
  const uint64_t product1 = uint64_t{kMultiplier1} * c[2];
  const auto hi = [](uint64_t p) { return static_cast<uint32_t>(p >> 32); };
  const auto lo = [](uint64_t p) { return static_cast<uint32_t>(p); };
  c = {hi(product1) ^ c[1] ^ key[0], lo(product1), hi(product0) ^ c[3] ^ key[1], lo(product0)};
}

// torch's constants as single-precision literals: 2^-32 rounded from its 8-digit decimal
// form (not exactly 2^-32), and that times 2*pi, both in float.
const float kTwoPow32Inv = 2.3283064e-10f;
const float kTwoPow32Inv2Pi = 2.3283064e-10f * 6.2831855f;

// Box-Muller on two uniform words, keeping only the sine branch. The logarithm, square
// root and sine run in double and round to float where the reference does.
float box_muller_sin(uint32_t word0, uint32_t word1) {
  const float u = static_cast<float>(word0) * kTwoPow32Inv + kTwoPow32Inv / 2;
  const float v = static_cast<float>(word1) * kTwoPow32Inv2Pi + kTwoPow32Inv2Pi / 2;
  const float radius = static_cast<float>(std::sqrt(-2.0 * std::log(static_cast<double>(u))));
  return static_cast<float>(static_cast<double>(radius) * std::sin(static_cast<double>(v)));
}

}  // namespace

std::array<uint32_t, 4> philox4x32_10(std::array<uint32_t, 4> counter,
                                      std::array<uint32_t, 2> key) {
  for (int round = 0; round < 9; ++round) {
    philox_round(counter, key);
    key[0] += kKeyBump0;
    key[1] += kKeyBump1;
  }
  philox_round(counter, key);
  return counter;
}

std::vector<float> PhiloxRng::randn(size_t n) {
  const std::array<uint32_t, 2> key = {static_cast<uint32_t>(seed_),
                                       static_cast<uint32_t>(seed_ >> 32)};
  std::vector<float> out(n);
  for (size_t i = 0; i < n; ++i) {
    const auto words = philox4x32_10({offset_, 0, static_cast<uint32_t>(i), 0}, key);
    out[i] = box_muller_sin(words[0], words[1]);
  }
  ++offset_;
  return out;
}

}  // namespace sd::sampling
