// Schedulers: which sigmas a sampler visits. Each returns steps + 1 descending sigmas that
// end at 0, computed in the same float/double steps as stable-diffusion.cpp so schedules
// (and therefore images) agree to the last bit.
#pragma once

#include <string_view>
#include <vector>

#include "sampling/schedule.h"

namespace sd::sampling {

enum class Scheduler {
  Discrete,     // timesteps evenly spaced over the training range, 999 first
  Karras,       // rho = 7 interpolation of sigma^(1/rho) (Karras et al. 2022, eq. 5)
  Exponential,  // evenly spaced log sigma
  Ays,          // Align Your Steps: NVIDIA's optimised levels per model family
  Gits,         // GITS optimised levels (coefficient 1.20)
  SgmUniform,   // discrete without the last training step
  Simple,       // every (1000 / steps)-th training sigma
  Smoothstep,   // timesteps along a smoothstep curve
  KlOptimal,    // evenly spaced atan(sigma)
  Lcm,          // the 50-step grid latent consistency models were distilled on
  BongTangent,  // two arctangent ramps
  Ltx2,         // LTX-2's resolution-shifted flow schedule
  LogitNormal,  // logit-normal quantiles (Ideogram 4)
  Flux2,        // Flux.2's empirical resolution shift
  Flux,         // Flux's resolution shift
  Beta,         // Beta(0.6, 0.6) quantiles of the timesteps
};

// sd.cpp's names ("discrete", "karras", ..., "beta"; "normal" means discrete); anything
// else throws sd::Error listing the valid names.
Scheduler parse_scheduler(std::string_view name);
const char* scheduler_name(Scheduler scheduler);

// Which of NVIDIA's published Align Your Steps noise levels a model samples with (the
// model family's description chooses; None: the model has none).
enum class AysLevels { SD1, SDXL, SVD, None };

// The knobs of the schedulers that have any, at sd.cpp's defaults ("extra sample args").
struct SchedulerOptions {
  AysLevels ays_levels = AysLevels::SD1;
  int image_seq_len = 0;  // latent tokens: flux, flux2, ltx2, logit_normal
  double beta_alpha = 0.6;
  double beta_beta = 0.6;
  float flux_base_shift = 0.5f;
  float flux_max_shift = 1.15f;
  float ltx2_base_shift = 0.95f;
  float ltx2_max_shift = 2.05f;
  float ltx2_terminal = 0.1f;
  bool ltx2_stretch = true;
  float logit_normal_mean = 0.0f;
  float logit_normal_std = 1.75f;
  float logit_normal_logsnr_min = -15.0f;
  float logit_normal_logsnr_max = 18.0f;
  bool logit_normal_resolution_aware = true;
};

// steps + 1 sigmas ending at 0 (Beta may return fewer when timesteps coincide, as the
// reference does). steps >= 1; GITS needs >= 2.
std::vector<float> make_sigmas(Scheduler scheduler, int steps, const DiscreteSchedule& schedule,
                               const SchedulerOptions& options = {});

// "--sigmas": comma-separated floats, optionally in [ ]; blanks around items ignored.
// Throws sd::Error naming the bad item.
std::vector<float> parse_sigmas(std::string_view text);

// Image-to-image: the tail of `sigmas` that a partial denoise at `strength` (0..1) runs.
// `sample_steps` is the step count asked for (sigmas.size() - 1 unless custom sigmas
// changed it). strength >= 1 returns `sigmas` unchanged.
std::vector<float> img2img_sigmas(const std::vector<float>& sigmas, int sample_steps,
                                  float strength);

// Internal pieces shared by the scheduler files.
namespace detail {
// Log-linear resampling of a descending sigma list to `length` values.
std::vector<float> log_linear_interpolation(const std::vector<float>& sigmas, size_t length);
std::vector<float> ays_sigmas(int steps, AysLevels levels);
std::vector<float> gits_sigmas(int steps);
std::vector<float> beta_sigmas(int steps, const DiscreteSchedule& schedule, double alpha,
                               double beta);
std::vector<float> bong_tangent_sigmas(int steps, float sigma_min, float sigma_max);
std::vector<float> flux_sigmas(int steps, int image_seq_len, float base_shift, float max_shift);
std::vector<float> flux2_sigmas(int steps, int image_seq_len);
std::vector<float> ltx2_sigmas(int steps, const SchedulerOptions& options);
std::vector<float> logit_normal_sigmas(int steps, const SchedulerOptions& options);
}  // namespace detail

}  // namespace sd::sampling
