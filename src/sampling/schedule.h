// The noise schedule a diffusion model was trained with, and what the sampler needs from
// it: the sigma of each of the 1000 training timesteps, the mapping between sigma and
// the (fractional) timestep the network is conditioned on, and the scalings that turn a
// network output into a denoised latent (Karras et al. 2022, "Elucidating the Design
// Space of Diffusion-Based Generative Models", Table 1):
//   model input = x * c_in,   denoised = output * c_out + x * c_skip.
#pragma once

#include <string_view>
#include <vector>

namespace sd::sampling {

inline constexpr int kTrainingTimesteps = 1000;

// What the network predicts. Eps and V use the discrete DDPM schedule; EdmV a continuous
// EDM one; the flow kinds interpolate linearly between data and noise (sigma in [0, 1]).
enum class Prediction { Eps, V, EdmV, Sd3Flow, FluxFlow };

// "eps", "v", "edm_v", "sd3_flow", "flux_flow"; anything else throws sd::Error listing them.
Prediction parse_prediction(std::string_view name);
const char* prediction_name(Prediction prediction);
bool is_flow(Prediction prediction);

// Stable Diffusion's training schedule: betas linear in sqrt(beta) from 0.00085 to 0.012
// ("scaled linear"), accumulated in float: alphas_cumprod[t] = prod_{i<=t} (1 - beta_i).
std::vector<float> scaled_linear_alphas_cumprod();

struct Scalings {
  float c_skip;
  float c_out;
  float c_in;
};

// What one network call needs for a sigma: the timestep to embed and the scalings.
struct ModelStep {
  float timestep;
  Scalings scalings;
};

class DiscreteSchedule {
 public:
  // `alphas_cumprod` (1000 values) is a checkpoint's own table when it carries one,
  // otherwise the scaled linear one; only Eps and V use it. `flow_shift` shifts the flow
  // schedules towards high noise (SD3: 3; Flux: 1.15 with a guidance embedding, else 1).
  explicit DiscreteSchedule(Prediction prediction = Prediction::Eps,
                            std::vector<float> alphas_cumprod = {}, float flow_shift = 3.0f);

  Prediction prediction() const { return prediction_; }
  float flow_shift() const { return flow_shift_; }
  // Eps/V: the table of training sigmas, sqrt((1 - a) / a) (empty for the other kinds).
  const std::vector<float>& sigmas() const { return sigmas_; }
  const std::vector<float>& alphas_cumprod() const { return alphas_cumprod_; }

  float sigma_min() const;
  float sigma_max() const;
  // Eps/V: linear interpolation of log sigma between neighbouring training steps.
  float sigma_to_t(float sigma) const;
  float t_to_sigma(float t) const;  // t in [0, 999] (a float hair below 0 is tolerated)

  Scalings scalings(float sigma) const;

  // Timestep and scalings for one call. `shifted_timestep` > 0 is the "--timestep-shift"
  // of NitroFusion-style SDXL distillations: the network sees timestep
  // round(t * shift / 1000) and c_skip/c_out follow that timestep's sigma.
  ModelStep model_step(float sigma, int shifted_timestep = 0) const;

  // The latent sampling starts from: latent + noise * sigma (flow: latent * (1 - sigma) +
  // noise * sigma). Text-to-image passes a zero latent; image-to-image the encoded image.
  std::vector<float> noised_latent(float sigma, const std::vector<float>& noise,
                                   const std::vector<float>& latent) const;
  // Undoes the flow kinds' (1 - sigma) factor at the last sigma; identity otherwise.
  std::vector<float> inverse_noise_scaling(float sigma, std::vector<float> latent) const;
  // Image-to-image "strength as noise level": the sigma whose noise fraction is `level`.
  float noise_level_to_sigma(float level) const;

 private:
  Prediction prediction_;
  float flow_shift_;
  std::vector<float> alphas_cumprod_;
  std::vector<float> sigmas_;
  std::vector<float> log_sigmas_;
};

}  // namespace sd::sampling
