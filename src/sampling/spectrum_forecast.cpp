#include "sampling/spectrum_forecast.h"

#include <algorithm>
#include <cmath>

namespace sd::sampling {

namespace {

// Chebyshev polynomials T_0..T_{n-1} at t (T_0 = 1, T_1 = t, T_j = 2 t T_{j-1} - T_{j-2}).
std::vector<float> chebyshev(float t, int n) {
  std::vector<float> T(static_cast<size_t>(n));
  T[0] = 1.0f;
  if (n > 1) T[1] = t;
  for (int j = 2; j < n; ++j) T[j] = 2.0f * t * T[j - 1] - T[j - 2];
  return T;
}

// Lower-triangular L with L L^T = A (n x n, row-major); false when A is not positive
// definite.
bool cholesky(const std::vector<float>& A, std::vector<float>& L, int n) {
  L.assign(A.size(), 0.0f);
  for (int i = 0; i < n; ++i) {
    for (int j = 0; j <= i; ++j) {
      float sum = 0.0f;
      for (int k = 0; k < j; ++k) sum += L[i * n + k] * L[j * n + k];
      if (i == j) {
        const float d = A[i * n + i] - sum;
        if (d <= 0.0f) return false;
        L[i * n + j] = std::sqrt(d);
      } else {
        L[i * n + j] = (A[i * n + j] - sum) / L[j * n + j];
      }
    }
  }
  return true;
}

// Solves L L^T x = b.
std::vector<float> cholesky_solve(const std::vector<float>& L, const std::vector<float>& b, int n) {
  std::vector<float> y(static_cast<size_t>(n)), x(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) {
    float sum = 0.0f;
    for (int j = 0; j < i; ++j) sum += L[i * n + j] * y[j];
    y[i] = (b[i] - sum) / L[i * n + i];
  }
  for (int i = n - 1; i >= 0; --i) {
    float sum = 0.0f;
    for (int j = i + 1; j < n; ++j) sum += L[j * n + i] * x[j];
    x[i] = (y[i] - sum) / L[i * n + i];
  }
  return x;
}

}  // namespace

SpectrumForecast::SpectrumForecast(const SpectrumOptions& options, size_t steps)
    : options_(options),
      history_(static_cast<size_t>(std::max(options.m + 1, 6))),
      stop_call_(static_cast<int>(options.stop * static_cast<float>(steps))),
      window_(static_cast<float>(options.window)) {}

bool SpectrumForecast::due() const {
  if (calls_ < options_.warmup) return false;
  if (stop_call_ > 0 && calls_ >= stop_call_) return false;
  if (latents_.size() < 2) return false;
  const int window = std::max(1, static_cast<int>(std::floor(window_)));
  return (forecasts_in_row_ + 1) % window != 0;
}

void SpectrumForecast::observe(const std::vector<float>& x0) {
  latents_.push_back(x0);
  positions_.push_back(position(calls_));
  while (latents_.size() > history_) {
    latents_.pop_front();
    positions_.pop_front();
  }
  if (calls_ >= options_.warmup) window_ += options_.flex;
  forecasts_in_row_ = 0;
  ++calls_;
}

bool SpectrumForecast::forecast(std::vector<float>& x0) {
  if (!due()) return false;
  const int K = static_cast<int>(latents_.size());
  const int M = options_.m + 1;

  // Ridge regression of the latents on T(position): the weights w_k with
  // forecast = sum_k w_k latent_k are X (X^T X + lam I)^-1 T(next).
  std::vector<std::vector<float>> X;
  for (int k = 0; k < K; ++k) X.push_back(chebyshev(positions_[k], M));
  std::vector<float> XtX(static_cast<size_t>(M * M));
  for (int i = 0; i < M; ++i) {
    for (int j = 0; j < M; ++j) {
      float sum = 0.0f;
      for (int k = 0; k < K; ++k) sum += X[k][i] * X[k][j];
      XtX[i * M + j] = sum + (i == j ? options_.lam : 0.0f);
    }
  }
  std::vector<float> L;
  if (!cholesky(XtX, L, M)) {
    float trace = 0.0f;
    for (int i = 0; i < M; ++i) trace += XtX[i * M + i];
    for (int i = 0; i < M; ++i) XtX[i * M + i] += 1e-4f * trace / M;
    cholesky(XtX, L, M);
  }
  const std::vector<float> v = cholesky_solve(L, chebyshev(position(calls_), M), M);
  std::vector<float> weights(static_cast<size_t>(K), 0.0f);
  for (int k = 0; k < K; ++k)
    for (int j = 0; j < M; ++j) weights[k] += X[k][j] * v[j];

  const std::vector<float>& last = latents_.back();
  const std::vector<float>& before_last = latents_[latents_.size() - 2];
  const float w_cheb = options_.w, w_taylor = 1.0f - options_.w;
  x0.resize(last.size());
  for (size_t f = 0; f < last.size(); ++f) {
    float cheb = 0.0f;
    for (int k = 0; k < K; ++k) cheb += weights[k] * latents_[k][f];
    const float taylor = last[f] + 0.5f * (last[f] - before_last[f]);
    x0[f] = w_taylor * taylor + w_cheb * cheb;
  }
  ++forecasts_in_row_;
  ++forecasts_;
  ++calls_;
  return true;
}

}  // namespace sd::sampling
