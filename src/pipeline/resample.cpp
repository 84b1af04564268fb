#include "pipeline/resample.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "tensor/error.h"

namespace sd::pipeline {

namespace {

constexpr double kPi = 3.14159265358979323846;

double triangle(double x) {
  x = std::abs(x);
  return x < 1.0 ? 1.0 - x : 0.0;
}

// Keys' cubic convolution with a = -0.75, PyTorch's bicubic.
double cubic(double x) {
  constexpr double a = -0.75;
  x = std::abs(x);
  if (x <= 1.0) return ((a + 2.0) * x - (a + 3.0)) * x * x + 1.0;
  if (x < 2.0) return ((a * x - 5.0 * a) * x + 8.0 * a) * x - 4.0 * a;
  return 0.0;
}

double sinc(double x) {
  if (std::abs(x) < 1e-12) return 1.0;
  return std::sin(kPi * x) / (kPi * x);
}

double lanczos3(double x) {
  x = std::abs(x);
  return x < 3.0 ? sinc(x) * sinc(x / 3.0) : 0.0;
}

struct Tap {
  int64_t index;
  double weight;
};

// For each output position along one axis, the input positions it reads and their weights.
std::vector<std::vector<Tap>> filter_taps(int64_t in, int64_t out, ResampleFilter filter,
                                          bool antialias) {
  const double scale = static_cast<double>(in) / static_cast<double>(out);
  const double stretch = antialias ? std::max(1.0, scale) : 1.0;
  const double radius = filter == ResampleFilter::Bilinear  ? 1.0
                        : filter == ResampleFilter::Bicubic ? 2.0
                                                            : 3.0;
  std::vector<std::vector<Tap>> taps(static_cast<size_t>(out));
  for (int64_t o = 0; o < out; ++o) {
    const double center = (static_cast<double>(o) + 0.5) * scale - 0.5;
    const double support = radius * stretch;
    const auto first = static_cast<int64_t>(std::ceil(center - support));
    const auto last = static_cast<int64_t>(std::floor(center + support));
    std::vector<Tap>& axis = taps[static_cast<size_t>(o)];
    double sum = 0.0;
    for (int64_t i = first; i <= last; ++i) {
      const double d = (center - static_cast<double>(i)) / stretch;
      const double w = filter == ResampleFilter::Bilinear  ? triangle(d)
                       : filter == ResampleFilter::Bicubic ? cubic(d)
                                                           : lanczos3(d);
      if (w == 0.0) continue;
      axis.push_back({std::clamp<int64_t>(i, 0, in - 1), w});  // edges repeat
      sum += w;
    }
    // Lanczos always, the others only antialiased, are normalised: sd.cpp compatibility.
    if ((antialias || filter == ResampleFilter::Lanczos) && std::abs(sum) > 1e-12)
      for (Tap& t : axis) t.weight /= sum;
    if (axis.empty())
      axis.push_back(
          {std::clamp<int64_t>(static_cast<int64_t>(std::floor(center + 0.5)), 0, in - 1), 1.0});
  }
  return taps;
}

int64_t nearest_index(int64_t o, int64_t in, int64_t out, bool exact) {
  if (!exact) return o * in / out;
  const double center =
      (static_cast<double>(o) + 0.5) * static_cast<double>(in) / static_cast<double>(out) - 0.5;
  return std::clamp<int64_t>(static_cast<int64_t>(std::floor(center + 0.5)), 0, in - 1);
}

void check_sizes(size_t size, int64_t in_w, int64_t in_h, int64_t channels, int64_t out_w,
                 int64_t out_h) {
  SD_CHECK(in_w > 0 && in_h > 0 && channels > 0 && out_w > 0 && out_h > 0 &&
               size == static_cast<size_t>(in_w * in_h * channels),
           "[resample] %zu values do not make a [%lld, %lld, %lld] image to resize to %lldx%lld",
           size, static_cast<long long>(in_w), static_cast<long long>(in_h),
           static_cast<long long>(channels), static_cast<long long>(out_w),
           static_cast<long long>(out_h));
}

}  // namespace

std::vector<float> resample(const std::vector<float>& planes, int64_t in_w, int64_t in_h,
                            int64_t channels, int64_t out_w, int64_t out_h, ResampleFilter filter,
                            bool antialias) {
  check_sizes(planes.size(), in_w, in_h, channels, out_w, out_h);
  if (in_w == out_w && in_h == out_h) return planes;
  std::vector<float> out(static_cast<size_t>(out_w * out_h * channels));
  const size_t in_plane = static_cast<size_t>(in_w * in_h);
  const size_t out_plane = static_cast<size_t>(out_w * out_h);

  if (filter == ResampleFilter::Nearest || filter == ResampleFilter::NearestExact) {
    const bool exact = filter == ResampleFilter::NearestExact;
    for (int64_t c = 0; c < channels; ++c)
      for (int64_t y = 0; y < out_h; ++y) {
        const int64_t sy = nearest_index(y, in_h, out_h, exact);
        for (int64_t x = 0; x < out_w; ++x)
          out[c * out_plane + y * out_w + x] =
              planes[c * in_plane + sy * in_w + nearest_index(x, in_w, out_w, exact)];
      }
    return out;
  }

  const auto xs = filter_taps(in_w, out_w, filter, antialias);
  const auto ys = filter_taps(in_h, out_h, filter, antialias);
  // Both axes at once, summed in double: sd.cpp's order, so results agree to the last bit
  // more often than a separable pass would.
  for (int64_t c = 0; c < channels; ++c) {
    const float* src = planes.data() + c * in_plane;
    float* dst = out.data() + c * out_plane;
    for (int64_t y = 0; y < out_h; ++y) {
      const std::vector<Tap>& ty = ys[static_cast<size_t>(y)];
      for (int64_t x = 0; x < out_w; ++x) {
        const std::vector<Tap>& tx = xs[static_cast<size_t>(x)];
        double v = 0.0;
        for (const Tap& a : ty) {
          const float* row = src + a.index * in_w;
          for (const Tap& b : tx) v += static_cast<double>(row[b.index]) * b.weight * a.weight;
        }
        dst[y * out_w + x] = static_cast<float>(v);
      }
    }
  }
  return out;
}

std::vector<float> resample_nearest_max(const std::vector<float>& planes, int64_t in_w,
                                        int64_t in_h, int64_t channels, int64_t out_w,
                                        int64_t out_h) {
  check_sizes(planes.size(), in_w, in_h, channels, out_w, out_h);
  if (out_w >= in_w && out_h >= in_h)
    return resample(planes, in_w, in_h, channels, out_w, out_h, ResampleFilter::Nearest);
  std::vector<float> out(static_cast<size_t>(out_w * out_h * channels));
  const size_t in_plane = static_cast<size_t>(in_w * in_h);
  const size_t out_plane = static_cast<size_t>(out_w * out_h);
  // The window [floor(o * in / out), ceil((o + 1) * in / out)) along each axis.
  auto first = [](int64_t o, int64_t in, int64_t out) { return o * in / out; };
  auto end = [](int64_t o, int64_t in, int64_t out) {
    return std::min(in, ((o + 1) * in + out - 1) / out);
  };
  for (int64_t c = 0; c < channels; ++c)
    for (int64_t y = 0; y < out_h; ++y)
      for (int64_t x = 0; x < out_w; ++x) {
        float m = std::numeric_limits<float>::lowest();
        for (int64_t sy = first(y, in_h, out_h); sy < end(y, in_h, out_h); ++sy)
          for (int64_t sx = first(x, in_w, out_w); sx < end(x, in_w, out_w); ++sx)
            m = std::max(m, planes[c * in_plane + sy * in_w + sx]);
        out[c * out_plane + y * out_w + x] = m;
      }
  return out;
}

}  // namespace sd::pipeline
