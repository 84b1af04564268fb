#include "sampling/schedulers.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "tensor/error.h"

namespace sd::sampling {

namespace {

constexpr Scheduler kAllSchedulers[] = {
    Scheduler::Discrete,    Scheduler::Karras,     Scheduler::Exponential, Scheduler::Ays,
    Scheduler::Gits,        Scheduler::SgmUniform, Scheduler::Simple,      Scheduler::Smoothstep,
    Scheduler::KlOptimal,   Scheduler::Lcm,        Scheduler::BongTangent, Scheduler::Ltx2,
    Scheduler::LogitNormal, Scheduler::Flux2,      Scheduler::Flux,        Scheduler::Beta,
};

constexpr int kMaxTimestep = kTrainingTimesteps - 1;

std::vector<float> discrete_sigmas(uint32_t n, const DiscreteSchedule& s) {
  if (n == 1) return {s.t_to_sigma(static_cast<float>(kMaxTimestep)), 0.0f};
  const int t_max = kMaxTimestep;
  const float step = static_cast<float>(t_max) / static_cast<float>(n - 1);
  std::vector<float> sigmas;
  for (uint32_t i = 0; i < n; ++i) sigmas.push_back(s.t_to_sigma(t_max - step * i));
  sigmas.push_back(0.0f);
  return sigmas;
}

// Karras et al. 2022, eq. 5, rho = 7; the powers run in double like the reference.
std::vector<float> karras_sigmas(uint32_t n, float sigma_min, float sigma_max) {
  if (n == 1) return {sigma_max, 0.0f};  // the formula divides 0 by 0 here
  const float rho = 7.f;
  sigma_min = std::max(sigma_min, 1e-6f);
  const float min_inv_rho = static_cast<float>(std::pow(double{sigma_min}, double{1.f / rho}));
  const float max_inv_rho = static_cast<float>(std::pow(double{sigma_max}, double{1.f / rho}));
  std::vector<float> sigmas(n + 1);
  for (uint32_t i = 0; i < n; ++i) {
    const float ramp = static_cast<float>(i) / (static_cast<float>(n) - 1.f);
    const float base = max_inv_rho + ramp * (min_inv_rho - max_inv_rho);
    sigmas[i] = static_cast<float>(std::pow(double{base}, double{rho}));
  }
  sigmas[n] = 0.0f;
  return sigmas;
}

std::vector<float> exponential_sigmas(uint32_t n, float sigma_min, float sigma_max) {
  if (n == 1) return {sigma_max, 0.0f};  // the step divides by 0 here
  const float log_min = std::log(sigma_min);
  const float log_max = std::log(sigma_max);
  const float step = (log_max - log_min) / static_cast<float>(n - 1);
  std::vector<float> sigmas;
  for (uint32_t i = 0; i < n; ++i) sigmas.push_back(std::exp(log_max - step * i));
  sigmas.push_back(0.0f);
  return sigmas;
}

// Timesteps 999 .. 0 in n + 1 float-accumulated steps; the last (t = 0) is replaced by 0.
std::vector<float> sgm_uniform_sigmas(uint32_t n, const DiscreteSchedule& s) {
  const float start = static_cast<float>(kMaxTimestep);
  const float increment = (0.0f - start) / static_cast<float>(n);
  std::vector<float> sigmas;
  float t = start;
  for (uint32_t i = 0; i < n; ++i) {
    sigmas.push_back(s.t_to_sigma(t));
    t = t + increment;
  }
  sigmas.push_back(0.0f);
  return sigmas;
}

std::vector<float> simple_sigmas(uint32_t n, const DiscreteSchedule& s) {
  const float stride = static_cast<float>(kTrainingTimesteps) / static_cast<float>(n);
  std::vector<float> sigmas;
  for (uint32_t i = 0; i < n; ++i) {
    const int offset = static_cast<int>(static_cast<float>(i) * stride);
    const int t = std::max(kTrainingTimesteps - 1 - offset, 0);
    sigmas.push_back(s.t_to_sigma(static_cast<float>(t)));
  }
  sigmas.push_back(0.0f);
  return sigmas;
}

std::vector<float> smoothstep_sigmas(uint32_t n, const DiscreteSchedule& s) {
  if (n == 1) return {s.t_to_sigma(static_cast<float>(kMaxTimestep)), 0.0f};
  const auto smoothstep = [](float x) { return x * x * (3.0f - 2.0f * x); };
  std::vector<float> sigmas;
  for (uint32_t i = 0; i < n; ++i) {
    const float u = 1.f - float(i) / float(n);
    sigmas.push_back(s.t_to_sigma(std::round(smoothstep(u) * kMaxTimestep)));
  }
  sigmas.push_back(0.0f);
  return sigmas;
}

std::vector<float> kl_optimal_sigmas(uint32_t n, float sigma_min, float sigma_max) {
  if (n == 1) return {sigma_max, 0.0f};
  sigma_min = std::max(sigma_min, 1e-6f);
  const float angle_min = std::atan(sigma_min);
  const float angle_max = std::atan(sigma_max);
  std::vector<float> sigmas;
  for (uint32_t i = 0; i < n; ++i) {
    const float t = static_cast<float>(i) / static_cast<float>(n - 1);
    sigmas.push_back(std::tan(t * angle_min + (1.0f - t) * angle_max));
  }
  sigmas.push_back(0.0f);
  return sigmas;
}

// Latent consistency models were distilled on every 20th timestep (50 of 1000).
std::vector<float> lcm_sigmas(uint32_t n, const DiscreteSchedule& s) {
  const uint32_t original_steps = 50;
  const int stride = kTrainingTimesteps / static_cast<int>(original_steps);
  std::vector<float> sigmas;
  for (uint32_t i = 0; i < n; ++i) {
    const int index = static_cast<int>((i * original_steps) / n);
    const int t = (static_cast<int>(original_steps) - index) * stride - 1;
    sigmas.push_back(s.t_to_sigma(static_cast<float>(t)));
  }
  sigmas.push_back(0.0f);
  return sigmas;
}

std::string trimmed(std::string_view text) {
  const char* blanks = " \t\n\r\f\v";
  const size_t begin = text.find_first_not_of(blanks);
  if (begin == std::string_view::npos) return "";
  const size_t end = text.find_last_not_of(blanks);
  return std::string(text.substr(begin, end - begin + 1));
}

}  // namespace

Scheduler parse_scheduler(std::string_view name) {
  if (name == "normal") return Scheduler::Discrete;
  std::string valid;
  for (Scheduler s : kAllSchedulers) {
    if (name == scheduler_name(s)) return s;
    valid += valid.empty() ? "" : ", ";
    valid += scheduler_name(s);
  }
  throw Error(format("unknown scheduler '%.*s'; valid schedulers: %s (normal = discrete)",
                     static_cast<int>(name.size()), name.data(), valid.c_str()));
}

const char* scheduler_name(Scheduler scheduler) {
  switch (scheduler) {
    case Scheduler::Discrete:
      return "discrete";
    case Scheduler::Karras:
      return "karras";
    case Scheduler::Exponential:
      return "exponential";
    case Scheduler::Ays:
      return "ays";
    case Scheduler::Gits:
      return "gits";
    case Scheduler::SgmUniform:
      return "sgm_uniform";
    case Scheduler::Simple:
      return "simple";
    case Scheduler::Smoothstep:
      return "smoothstep";
    case Scheduler::KlOptimal:
      return "kl_optimal";
    case Scheduler::Lcm:
      return "lcm";
    case Scheduler::BongTangent:
      return "bong_tangent";
    case Scheduler::Ltx2:
      return "ltx2";
    case Scheduler::LogitNormal:
      return "logit_normal";
    case Scheduler::Flux2:
      return "flux2";
    case Scheduler::Flux:
      return "flux";
    case Scheduler::Beta:
      return "beta";
  }
  return "unknown";
}

std::vector<float> make_sigmas(Scheduler scheduler, int steps, const DiscreteSchedule& schedule,
                               const SchedulerOptions& options) {
  SD_CHECK(steps >= 1, "[%s scheduler] steps is %d; it must be at least 1",
           scheduler_name(scheduler), steps);
  const auto n = static_cast<uint32_t>(steps);
  const float sigma_min = schedule.sigma_min();
  const float sigma_max = schedule.sigma_max();
  switch (scheduler) {
    case Scheduler::Discrete:
      return discrete_sigmas(n, schedule);
    case Scheduler::Karras:
      return karras_sigmas(n, sigma_min, sigma_max);
    case Scheduler::Exponential:
      return exponential_sigmas(n, sigma_min, sigma_max);
    case Scheduler::Ays:
      return detail::ays_sigmas(steps, options.ays_levels);
    case Scheduler::Gits:
      return detail::gits_sigmas(steps);
    case Scheduler::SgmUniform:
      return sgm_uniform_sigmas(n, schedule);
    case Scheduler::Simple:
      return simple_sigmas(n, schedule);
    case Scheduler::Smoothstep:
      return smoothstep_sigmas(n, schedule);
    case Scheduler::KlOptimal:
      return kl_optimal_sigmas(n, sigma_min, sigma_max);
    case Scheduler::Lcm:
      return lcm_sigmas(n, schedule);
    case Scheduler::BongTangent:
      return detail::bong_tangent_sigmas(steps, sigma_min, sigma_max);
    case Scheduler::Ltx2:
      return detail::ltx2_sigmas(steps, options);
    case Scheduler::LogitNormal:
      return detail::logit_normal_sigmas(steps, options);
    case Scheduler::Flux2:
      return detail::flux2_sigmas(steps, options.image_seq_len);
    case Scheduler::Flux:
      return detail::flux_sigmas(steps, options.image_seq_len, options.flux_base_shift,
                                 options.flux_max_shift);
    case Scheduler::Beta:
      return detail::beta_sigmas(steps, schedule, options.beta_alpha, options.beta_beta);
  }
  fail("[scheduler] unknown scheduler %d", static_cast<int>(scheduler));
}

std::vector<float> parse_sigmas(std::string_view text) {
  std::string body = trimmed(text);
  if (!body.empty() && body.front() == '[') body.erase(0, 1);
  if (!body.empty() && body.back() == ']') body.pop_back();
  std::vector<float> sigmas;
  size_t start = 0;
  while (start <= body.size()) {
    size_t comma = body.find(',', start);
    if (comma == std::string::npos) comma = body.size();
    const std::string item = trimmed(std::string_view(body).substr(start, comma - start));
    start = comma + 1;
    if (item.empty()) continue;
    char* end = nullptr;
    errno = 0;
    const float value = std::strtof(item.c_str(), &end);
    SD_CHECK(end == item.c_str() + item.size() && errno != ERANGE && std::isfinite(value),
             "[--sigmas] '%s' is not a number; give comma-separated values like "
             "\"14.61,7.8,3.5,0\"",
             item.c_str());
    sigmas.push_back(value);
  }
  SD_CHECK(sigmas.size() >= 2,
           "[--sigmas] got %zu value(s); give at least a start and an end sigma, e.g. "
           "\"14.61,7.8,3.5,0\"",
           sigmas.size());
  return sigmas;
}

std::vector<float> img2img_sigmas(const std::vector<float>& sigmas, int sample_steps,
                                  float strength) {
  if (!(strength < 1.0f)) return sigmas;
  SD_CHECK(sample_steps >= 1 && static_cast<size_t>(sample_steps) < sigmas.size(),
           "[img2img] %d steps do not fit a schedule of %zu sigmas", sample_steps, sigmas.size());
  strength = std::max(strength, 0.0f);
  // The last t_enc steps run; at least one, never all of them plus the first.
  auto t_enc = static_cast<size_t>(sample_steps * strength);
  if (t_enc == static_cast<size_t>(sample_steps)) t_enc--;
  return std::vector<float>(sigmas.begin() + (sample_steps - static_cast<int>(t_enc) - 1),
                            sigmas.end());
}

}  // namespace sd::sampling
