// Guidance beyond plain classifier-free guidance, from --extra-sample-args (key=value
// pairs separated by ',' or ';', as stable-diffusion.cpp reads them):
// - Adaptive projected guidance (Sadat et al., "Eliminating Oversaturation and Artifacts of
//   High Guidance Scales in Diffusion Models"): the guidance direction cond - uncond, with
//   momentum over steps, rescaled to a norm threshold, and its component along the
//   conditional output scaled by eta. Keys apg_eta (1), apg_momentum (0),
//   apg_norm_threshold (0: off), apg_norm_threshold_smoothing (0).
// - guidance_schedule=<scale>x<count>+...: a guidance scale per step instead of one for all,
//   indexed as the reference does (from the end of the list by step number).
#pragma once

#include <string>
#include <vector>

namespace sd::sampling {

struct ApgOptions {
  float eta = 1.0f;
  float momentum = 0.0f;
  float norm_threshold = 0.0f;
  float norm_threshold_smoothing = 0.0f;
  bool enabled() const { return eta != 1.0f || momentum != 0.0f || norm_threshold > 0.0f; }
};

struct GuidanceExtras {
  ApgOptions apg;
  std::vector<float> schedule;       // empty: the one --cfg-scale for every step
  std::vector<std::string> unknown;  // keys this build does not use (sampler arguments, ...)
};

// Throws sd::Error naming a malformed pair or value.
GuidanceExtras parse_guidance_extras(const std::string& extra_sample_args);

// "7x5+3.5x15" -> 5 times 7, 15 times 3.5; throws sd::Error naming a bad segment.
std::vector<float> parse_guidance_schedule(const std::string& spec);

// APG over one image's steps (it keeps the momentum buffer).
class AdaptiveProjectedGuidance {
 public:
  explicit AdaptiveProjectedGuidance(const ApgOptions& options) : options_(options) {}
  // The guided output from the conditional and unconditional ones at guidance `scale`.
  std::vector<float> guide(const std::vector<float>& cond, const std::vector<float>& uncond,
                           float scale) {
    return guide(cond, &uncond, nullptr, scale, 1.0f);
  }
  // With image guidance (--img-cfg-scale: inpainting and instruct-pix2pix models), from the
  // unconditional and the image-unconditional outputs, either of which may be null but not
  // both: the guidance direction is the one the three-way CFG formula steps along, and the
  // result steps along it by the scale that formula gives it, as the reference's APG does.
  std::vector<float> guide(const std::vector<float>& cond, const std::vector<float>* uncond,
                           const std::vector<float>* img_uncond, float scale, float img_scale);

 private:
  ApgOptions options_;
  std::vector<float> momentum_;
};

}  // namespace sd::sampling
