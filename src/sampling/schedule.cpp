#include "sampling/schedule.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>

#include "tensor/error.h"

namespace sd::sampling {

namespace {

constexpr Prediction kAllPredictions[] = {Prediction::Eps, Prediction::V, Prediction::EdmV,
                                          Prediction::Sd3Flow, Prediction::FluxFlow};

// The data's standard deviation in the EDM scalings; latents are scaled to unit variance.
constexpr float kSigmaData = 1.0f;

// EDM v-prediction (CosXL) trains on a continuous range instead of 1000 steps.
constexpr float kEdmSigmaMin = 0.002f;
constexpr float kEdmSigmaMax = 120.0f;

// SD3's shift: sigma' = shift * t / (1 + (shift - 1) * t).
float shift_time_snr(float shift, float t) {
  if (shift == 1.0f) return t;
  return shift * t / (1 + (shift - 1) * t);
}

// Flux's shift in the exponential form exp(mu) / (exp(mu) + (1/t - 1)).
float flux_time_shift(float mu, float t) {
  return ::expf(mu) / (::expf(mu) + ::powf(1.0f / t - 1.0f, 1.0f));
}

}  // namespace

Prediction parse_prediction(std::string_view name) {
  std::string valid;
  for (Prediction p : kAllPredictions) {
    if (name == prediction_name(p)) return p;
    valid += valid.empty() ? "" : ", ";
    valid += prediction_name(p);
  }
  throw Error(format("unknown prediction '%.*s'; valid predictions: %s",
                     static_cast<int>(name.size()), name.data(), valid.c_str()));
}

const char* prediction_name(Prediction prediction) {
  switch (prediction) {
    case Prediction::Eps:
      return "eps";
    case Prediction::V:
      return "v";
    case Prediction::EdmV:
      return "edm_v";
    case Prediction::Sd3Flow:
      return "sd3_flow";
    case Prediction::FluxFlow:
      return "flux_flow";
  }
  return "unknown";
}

bool is_flow(Prediction prediction) {
  return prediction == Prediction::Sd3Flow || prediction == Prediction::FluxFlow;
}

std::vector<float> scaled_linear_alphas_cumprod() {
  const float sqrt_start = sqrtf(0.00085f);
  const float sqrt_end = sqrtf(0.0120f);
  const float span = sqrt_end - sqrt_start;
  std::vector<float> alphas_cumprod(kTrainingTimesteps);
  float product = 1.0f;
  for (int i = 0; i < kTrainingTimesteps; ++i) {
    const float sqrt_beta = sqrt_start + span * (static_cast<float>(i) / (kTrainingTimesteps - 1));
    product *= 1.0f - sqrt_beta * sqrt_beta;
    alphas_cumprod[i] = product;
  }
  return alphas_cumprod;
}

DiscreteSchedule::DiscreteSchedule(Prediction prediction, std::vector<float> alphas_cumprod,
                                   float flow_shift)
    : prediction_(prediction), flow_shift_(flow_shift) {
  if (is_flow(prediction)) return;
  if (alphas_cumprod.empty()) alphas_cumprod = scaled_linear_alphas_cumprod();
  SD_CHECK(alphas_cumprod.size() == kTrainingTimesteps,
           "[schedule] alphas_cumprod has %zu values; the schedule needs %d (one per training "
           "timestep)",
           alphas_cumprod.size(), kTrainingTimesteps);
  for (float a : alphas_cumprod) {
    SD_CHECK(std::isfinite(a) && a > 0.0f && a <= 1.0f,
             "[schedule] alphas_cumprod value %g is outside (0, 1]; the table is not a noise "
             "schedule",
             a);
  }
  alphas_cumprod_ = std::move(alphas_cumprod);
  sigmas_.resize(kTrainingTimesteps);
  log_sigmas_.resize(kTrainingTimesteps);
  for (int i = 0; i < kTrainingTimesteps; ++i) {
    const float a = alphas_cumprod_[i];
    sigmas_[i] = std::sqrt((1 - a) / a);
    log_sigmas_[i] = std::log(sigmas_[i]);
  }
}

float DiscreteSchedule::sigma_min() const {
  switch (prediction_) {
    case Prediction::EdmV:
      return kEdmSigmaMin;
    case Prediction::Sd3Flow:
    case Prediction::FluxFlow:
      return t_to_sigma(0);
    default:
      return sigmas_.front();
  }
}

float DiscreteSchedule::sigma_max() const {
  switch (prediction_) {
    case Prediction::EdmV:
      return kEdmSigmaMax;
    case Prediction::Sd3Flow:
    case Prediction::FluxFlow:
      return t_to_sigma(kTrainingTimesteps - 1);
    default:
      return sigmas_.back();
  }
}

float DiscreteSchedule::sigma_to_t(float sigma) const {
  switch (prediction_) {
    case Prediction::EdmV:
      return 0.25f * std::log(sigma);
    case Prediction::Sd3Flow:
      return sigma * 1000.f;
    case Prediction::FluxFlow:
      return sigma;
    default:
      break;
  }
  const float log_sigma = std::log(sigma);
  // Index of the last training step whose log sigma is <= ours, kept inside the table.
  int at_or_below = 0;
  for (float l : log_sigmas_) at_or_below += (log_sigma - l >= 0) ? 1 : 0;
  const int low_idx = std::min(std::max(at_or_below - 1, 0), kTrainingTimesteps - 2);
  const int high_idx = low_idx + 1;
  const float low = log_sigmas_[low_idx];
  const float high = log_sigmas_[high_idx];
  float w = (low - log_sigma) / (low - high);
  w = std::max(0.f, std::min(1.f, w));
  return (1.0f - w) * low_idx + w * high_idx;
}

float DiscreteSchedule::t_to_sigma(float t) const {
  switch (prediction_) {
    case Prediction::EdmV:
      return std::exp(t * 4 / static_cast<float>(kTrainingTimesteps));
    case Prediction::Sd3Flow:
      return shift_time_snr(flow_shift_, (t + 1) / 1000.f);
    case Prediction::FluxFlow:
      return flux_time_shift(flow_shift_, (t + 1) / kTrainingTimesteps);
    default:
      break;
  }
  SD_CHECK(t > -1 && t <= kTrainingTimesteps - 1,
           "[schedule] timestep %g is outside the training range [0, %d]", t,
           kTrainingTimesteps - 1);
  const int low_idx = static_cast<int>(std::floor(t));
  const int high_idx = static_cast<int>(std::ceil(t));
  const float w = t - static_cast<float>(low_idx);
  // A uniform timestep grid computed in float can end a hair below 0 (e.g. 22 steps). The
  // reference then reads the word just before its log-sigma table, which is the largest
  // training sigma (not its log); taking the same value keeps those schedules identical.
  const float low_log_sigma = low_idx < 0 ? sigmas_.back() : log_sigmas_[low_idx];
  const float log_sigma = (1.0f - w) * low_log_sigma + w * log_sigmas_[high_idx];
  return std::exp(log_sigma);
}

Scalings DiscreteSchedule::scalings(float sigma) const {
  const float sd = kSigmaData;
  switch (prediction_) {
    case Prediction::Eps:
      return {1.0f, -sigma, 1.0f / std::sqrt(sigma * sigma + sd * sd)};
    case Prediction::V:
    case Prediction::EdmV:
      return {sd * sd / (sigma * sigma + sd * sd), -sigma * sd / std::sqrt(sigma * sigma + sd * sd),
              1.0f / std::sqrt(sigma * sigma + sd * sd)};
    case Prediction::Sd3Flow:
    case Prediction::FluxFlow:
      return {1.0f, -sigma, 1.0f};
  }
  return {1.0f, -sigma, 1.0f};
}

ModelStep DiscreteSchedule::model_step(float sigma, int shifted_timestep) const {
  const float t = sigma_to_t(sigma);
  Scalings s = scalings(sigma);
  if (shifted_timestep <= 0) return {t, s};
  const float shifted = t * (float(shifted_timestep) / float(kTrainingTimesteps));
  const int64_t shifted_t =
      std::clamp<int64_t>(static_cast<int64_t>(roundf(shifted)), 0, kTrainingTimesteps - 1);
  const Scalings at_shifted = scalings(t_to_sigma(static_cast<float>(shifted_t)));
  // Keep c_in for the true sigma; rescale c_skip so x * c_in * (c_skip'/c_in') is the
  // skip connection the shifted timestep expects.
  s.c_skip = at_shifted.c_skip * s.c_in / at_shifted.c_in;
  s.c_out = at_shifted.c_out;
  return {static_cast<float>(shifted_t), s};
}

std::vector<float> DiscreteSchedule::noised_latent(float sigma, const std::vector<float>& noise,
                                                   const std::vector<float>& latent) const {
  SD_CHECK(noise.size() == latent.size(),
           "[schedule] noise has %zu values but the latent %zu; draw noise of the latent's size",
           noise.size(), latent.size());
  std::vector<float> out(latent.size());
  if (is_flow(prediction_)) {
    for (size_t i = 0; i < out.size(); ++i) {
      const float kept = latent[i] * (1.0f - sigma);
      const float added = noise[i] * sigma;
      out[i] = kept + added;
    }
  } else {
    for (size_t i = 0; i < out.size(); ++i) {
      const float added = noise[i] * sigma;
      out[i] = latent[i] + added;
    }
  }
  return out;
}

std::vector<float> DiscreteSchedule::inverse_noise_scaling(float sigma,
                                                           std::vector<float> latent) const {
  if (!is_flow(prediction_)) return latent;
  const float scale = 1.0f / (1.0f - sigma);
  for (float& v : latent) v *= scale;
  return latent;
}

float DiscreteSchedule::noise_level_to_sigma(float level) const {
  if (is_flow(prediction_)) return level;
  return level / (1.0f - level);
}

}  // namespace sd::sampling
