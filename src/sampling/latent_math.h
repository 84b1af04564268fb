// Element-wise arithmetic on host latents for the samplers. Every operator is one pass
// that rounds each element to float, and scalars are rounded to float first, so a sampler
// formula written in the usual order rounds exactly like the reference implementation's
// tensor expressions.
#pragma once

#include <type_traits>
#include <vector>

#include "tensor/error.h"

namespace sd::sampling {

class Latent {
 public:
  Latent() = default;
  explicit Latent(std::vector<float> values) : values_(std::move(values)) {}

  size_t size() const { return values_.size(); }
  bool empty() const { return values_.empty(); }
  float& operator[](size_t i) { return values_[i]; }
  float operator[](size_t i) const { return values_[i]; }
  const std::vector<float>& values() const { return values_; }
  std::vector<float> release() { return std::move(values_); }

 private:
  std::vector<float> values_;
};

template <typename S>
concept Scalar = std::is_arithmetic_v<S>;

namespace detail {
template <typename Op>
Latent zip(const Latent& a, const Latent& b, Op op) {
  SD_CHECK(a.size() == b.size(), "[sampler] latents of %zu and %zu values do not combine", a.size(),
           b.size());
  std::vector<float> out(a.size());
  for (size_t i = 0; i < out.size(); ++i) out[i] = op(a[i], b[i]);
  return Latent(std::move(out));
}
template <typename Op>
Latent map(const Latent& a, Op op) {
  std::vector<float> out(a.size());
  for (size_t i = 0; i < out.size(); ++i) out[i] = op(a[i]);
  return Latent(std::move(out));
}
}  // namespace detail

inline Latent operator+(const Latent& a, const Latent& b) {
  return detail::zip(a, b, [](float x, float y) { return x + y; });
}
inline Latent operator-(const Latent& a, const Latent& b) {
  return detail::zip(a, b, [](float x, float y) { return x - y; });
}
inline Latent operator*(const Latent& a, const Latent& b) {
  return detail::zip(a, b, [](float x, float y) { return x * y; });
}
inline Latent operator/(const Latent& a, const Latent& b) {
  return detail::zip(a, b, [](float x, float y) { return x / y; });
}
inline Latent operator-(const Latent& a) {
  return detail::map(a, [](float x) { return -x; });
}

template <Scalar S>
Latent operator*(const Latent& a, S s) {
  const auto f = static_cast<float>(s);
  return detail::map(a, [f](float x) { return x * f; });
}
template <Scalar S>
Latent operator*(S s, const Latent& a) {
  return a * s;
}
template <Scalar S>
Latent operator/(const Latent& a, S s) {
  const auto f = static_cast<float>(s);
  return detail::map(a, [f](float x) { return x / f; });
}
template <Scalar S>
Latent operator+(const Latent& a, S s) {
  const auto f = static_cast<float>(s);
  return detail::map(a, [f](float x) { return x + f; });
}
template <Scalar S>
Latent operator-(const Latent& a, S s) {
  const auto f = static_cast<float>(s);
  return detail::map(a, [f](float x) { return x - f; });
}

inline Latent& operator+=(Latent& a, const Latent& b) {
  return a = a + b;
}
inline Latent& operator-=(Latent& a, const Latent& b) {
  return a = a - b;
}
template <Scalar S>
Latent& operator*=(Latent& a, S s) {
  return a = a * s;
}

}  // namespace sd::sampling
