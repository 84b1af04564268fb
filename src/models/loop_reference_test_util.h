// Plain loops over token-major values ([tokens][channels], row-major), the oracles that
// model tests compare graphs with. Weights are read as stored: a Linear's [out][in].
#pragma once

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "nn/random_weights.h"

namespace sd::models::loops {

using Values = std::vector<float>;

// y = x W^T (+ b) over every token.
inline Values linear(const nn::RandomWeights& w, const std::string& name, const Values& x,
                     int64_t in, int64_t out, bool bias = true) {
  const Values wt = w.values(name + ".weight");
  const Values b = bias ? w.values(name + ".bias") : Values(static_cast<size_t>(out), 0.0f);
  const int64_t len = static_cast<int64_t>(x.size()) / in;
  Values y(static_cast<size_t>(len * out));
  for (int64_t t = 0; t < len; ++t)
    for (int64_t o = 0; o < out; ++o) {
      double acc = b[o];
      for (int64_t i = 0; i < in; ++i) acc += double(wt[o * in + i]) * x[t * in + i];
      y[t * out + o] = static_cast<float>(acc);
    }
  return y;
}

// x / sqrt(mean(x^2) + eps) * g over rows of `d`.
inline Values rms_norm(Values x, int64_t d, const Values& g, float eps) {
  for (size_t t = 0; t < x.size() / d; ++t) {
    double ss = 0;
    for (int64_t i = 0; i < d; ++i) ss += double(x[t * d + i]) * x[t * d + i];
    const double r = 1.0 / std::sqrt(ss / d + eps);
    for (int64_t i = 0; i < d; ++i) x[t * d + i] = static_cast<float>(x[t * d + i] * r * g[i]);
  }
  return x;
}

// LayerNorm without affine parameters over rows of `d`.
inline Values layer_norm(Values x, int64_t d, float eps) {
  for (size_t t = 0; t < x.size() / d; ++t) {
    double mean = 0, var = 0;
    for (int64_t i = 0; i < d; ++i) mean += x[t * d + i];
    mean /= d;
    for (int64_t i = 0; i < d; ++i) var += (x[t * d + i] - mean) * (x[t * d + i] - mean);
    var /= d;
    for (int64_t i = 0; i < d; ++i)
      x[t * d + i] = static_cast<float>((x[t * d + i] - mean) / std::sqrt(var + eps));
  }
  return x;
}

// Multi-head attention on [L][heads * hd] q, k, v: softmax(scale q k + bias(head, q, k)) v.
inline Values attention(const Values& q, const Values& k, const Values& v, int64_t len,
                        int64_t heads, int64_t hd, double scale,
                        const std::function<double(int64_t, int64_t, int64_t)>& bias = {}) {
  const int64_t d = heads * hd;
  Values out(static_cast<size_t>(len * d));
  for (int64_t h = 0; h < heads; ++h)
    for (int64_t qi = 0; qi < len; ++qi) {
      std::vector<double> score(static_cast<size_t>(len));
      double mx = -1e300, sum = 0;
      for (int64_t ki = 0; ki < len; ++ki) {
        double dot = 0;
        for (int64_t j = 0; j < hd; ++j)
          dot += double(q[qi * d + h * hd + j]) * k[ki * d + h * hd + j];
        score[ki] = dot * scale + (bias ? bias(h, qi, ki) : 0.0);
        mx = std::max(mx, score[ki]);
      }
      for (double& s : score) sum += (s = std::exp(s - mx));
      for (int64_t j = 0; j < hd; ++j) {
        double acc = 0;
        for (int64_t ki = 0; ki < len; ++ki) acc += score[ki] / sum * v[ki * d + h * hd + j];
        out[qi * d + h * hd + j] = static_cast<float>(acc);
      }
    }
  return out;
}

}  // namespace sd::models::loops
