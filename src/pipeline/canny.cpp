#include "pipeline/canny.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "tensor/error.h"

namespace sd::pipeline {

namespace {

constexpr float kPi = 3.14159265358979323846f;

// One float plane, x fastest.
struct Plane {
  int w = 0, h = 0;
  std::vector<float> v;
  Plane(int width, int height) : w(width), h(height), v(static_cast<size_t>(width) * height) {}
  float& at(int x, int y) { return v[static_cast<size_t>(y) * w + x]; }
  float at(int x, int y) const { return v[static_cast<size_t>(y) * w + x]; }
};

// Cross-correlation with a k x k kernel (k odd), zero padding.
Plane correlate(const Plane& in, const float* kernel, int k) {
  Plane out(in.w, in.h);
  const int pad = k / 2;
  for (int y = 0; y < in.h; ++y)
    for (int x = 0; x < in.w; ++x) {
      float sum = 0.0f;
      for (int ky = 0; ky < k; ++ky) {
        const int iy = y + ky - pad;
        if (iy < 0 || iy >= in.h) continue;
        for (int kx = 0; kx < k; ++kx) {
          const int ix = x + kx - pad;
          if (ix < 0 || ix >= in.w) continue;
          sum += in.at(ix, iy) * kernel[ky * k + kx];
        }
      }
      out.at(x, y) = sum;
    }
  return out;
}

// sd.cpp compatibility: a Gaussian of sigma 1.4 scaled by 1 / (2 pi sigma^2) but not
// normalized to sum 1.
std::vector<float> gaussian_5x5() {
  const float sigma = 1.4f;
  const float normal = 1.f / (2.0f * kPi * std::pow(sigma, 2.0f));
  std::vector<float> k(25);
  for (int y = 0; y < 5; ++y)
    for (int x = 0; x < 5; ++x) {
      const float gx = static_cast<float>(y - 2), gy = static_cast<float>(x - 2);
      k[y * 5 + x] = std::exp(-((gx * gx + gy * gy) / (2.0f * std::pow(sigma, 2.0f)))) * normal;
    }
  return k;
}

float max_of(const Plane& p) {
  float m = -std::numeric_limits<float>::infinity();
  for (float v : p.v) m = std::max(m, v);
  return m;
}

// Keeps a pixel where its gradient is not below its neighbours' across the edge.
// sd.cpp compatibility: its direction tests compare the wrong way round, so every angle up
// to 157.5 degrees compares the pixels above and below, and a larger angle keeps a pixel
// only where the (normalized) gradient is 1.
Plane non_max_suppression(const Plane& g, const Plane& theta) {
  Plane out(g.w, g.h);
  for (int y = 1; y < g.h - 1; ++y)
    for (int x = 1; x < g.w - 1; ++x) {
      float angle = theta.at(x, y) * 180.0f / kPi;
      if (angle < 0.0f) angle += 180.0f;
      float q = 1.0f, r = 1.0f;
      if (angle <= 157.5f) {
        q = g.at(x, y + 1);
        r = g.at(x, y - 1);
      }
      const float cur = g.at(x, y);
      out.at(x, y) = (cur >= q && cur >= r) ? cur : 0.0f;
    }
  return out;
}

// Double threshold, then weak pixels next to a strong one become strong, the rest 0.
// sd.cpp compatibility: pixels below the low threshold keep their value, a 3-pixel border
// is cleared, and six of the eight neighbours are looked at, in place, row by row.
void hysteresis(Plane& img, const CannyParams& p) {
  const float ht = max_of(img) * p.high_threshold;
  const float lt = ht * p.low_threshold;
  for (float& v : img.v) {
    if (v >= ht)
      v = p.strong;
    else if (v <= ht && v >= lt)
      v = p.weak;
  }
  for (int y = 0; y < img.h; ++y)
    for (int x = 0; x < img.w; ++x)
      if (!(x >= 3 && x <= img.w - 3 && y >= 3 && y <= img.h - 3)) img.at(x, y) = 0.0f;
  for (int y = 1; y < img.h - 1; ++y)
    for (int x = 1; x < img.w - 1; ++x) {
      if (img.at(x, y) != p.weak) continue;
      const bool strong_next = img.at(x + 1, y - 1) == p.strong || img.at(x + 1, y) == p.strong ||
                               img.at(x, y - 1) == p.strong || img.at(x, y + 1) == p.strong ||
                               img.at(x - 1, y - 1) == p.strong || img.at(x - 1, y) == p.strong;
      img.at(x, y) = strong_next ? p.strong : 0.0f;
    }
}

uint8_t to_u8(float v) {
  if (v <= 0.0f) return 0;
  if (v >= 1.0f) return 255;
  return static_cast<uint8_t>(v * 255.0f + 0.5f);
}

}  // namespace

void canny_edges(uint8_t* pixels, int width, int height, int channels, const CannyParams& params) {
  SD_CHECK(pixels && width > 0 && height > 0, "[canny] the image is empty");
  SD_CHECK(channels >= 3, "[canny] the image has %d channels; it needs RGB (3 or more)", channels);
  const size_t n = static_cast<size_t>(width) * height;

  // 1. Grey (ITU-R 601 weights), 2. blurred.
  Plane gray(width, height);
  for (size_t i = 0; i < n; ++i) {
    const uint8_t* px = pixels + i * channels;
    const float r = px[0] / 255.f, g = px[1] / 255.f, b = px[2] / 255.f;
    gray.v[i] = 0.2989f * r + 0.5870f * g + 0.1140f * b;
  }
  const std::vector<float> gauss = gaussian_5x5();
  gray = correlate(gray, gauss.data(), 5);

  // 3. Sobel gradients: magnitude (scaled to a maximum of 1) and direction.
  static constexpr float kSobelX[9] = {-1, 0, 1, -2, 0, 2, -1, 0, 1};
  static constexpr float kSobelY[9] = {1, 2, 1, 0, 0, 0, -1, -2, -1};
  const Plane gx = correlate(gray, kSobelX, 3), gy = correlate(gray, kSobelY, 3);
  Plane g(width, height), theta(width, height);
  for (size_t i = 0; i < n; ++i) {
    g.v[i] = std::sqrt(gx.v[i] * gx.v[i] + gy.v[i] * gy.v[i]);
    theta.v[i] = std::atan2(gy.v[i], gx.v[i]);
  }
  const float g_max = max_of(g);
  if (g_max != 0.0f && std::isfinite(g_max))
    for (float& v : g.v) v *= 1.0f / g_max;

  // 4. Thin edges, 5. keep the connected ones.
  Plane edges = non_max_suppression(g, theta);
  hysteresis(edges, params);

  for (size_t i = 0; i < n; ++i) {
    const float v = params.inverse ? 1.0f - edges.v[i] : edges.v[i];
    std::fill(pixels + i * channels, pixels + (i + 1) * channels, to_u8(v));
  }
}

}  // namespace sd::pipeline
