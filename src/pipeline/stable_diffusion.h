// Image generation for every model family (pipeline/families/): text-to-image, image-to-image and
// inpainting, computing what stable-diffusion.cpp computes for the same request, seed and
// RNG. Owns the loaded model (files, weights, runners) for as many requests as asked.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "io/image.h"
#include "io/model_version.h"
#include "pipeline/architecture.h"
#include "pipeline/image_request.h"
#include "pipeline/model_options.h"
#include "sampling/schedule.h"
#include "sampling/schedulers.h"

namespace sd::pipeline {

class StableDiffusion {
 public:
  // Reads the model files' metadata, detects the version and prepares the runners;
  // weights load when first used. Throws sd::Error for missing or unsupported files.
  explicit StableDiffusion(const ModelOptions& options);
  ~StableDiffusion();

  io::ModelVersion version() const;
  // "te: CPU, diffusion: CPU, weights on disk, vae: CPU", for the log.
  std::string placement() const;
  // Bytes of weights resident now (copied and mapped), for tests and benchmarks.
  size_t resident_weight_bytes() const;
  sampling::Prediction prediction() const;
  // A video model: requests with video_frames > 0 make clips.
  bool makes_video() const;
  // A second network for the noisiest steps (Wan 2.2 A14B): ImageRequest::high_noise applies.
  bool has_high_noise_expert() const;
  // What a request that names no sampler or scheduler gets with this model.
  sampling::SampleMethod default_sample_method() const;
  sampling::Scheduler default_scheduler(sampling::SampleMethod method) const;

  // One image per batch entry (seeds seed, seed + 1, ...), at the hires target size when
  // the highres fix is on. Throws sd::Error for invalid requests before any work is done.
  std::vector<io::Image> generate(const ImageRequest& request);
  // The checks generate makes before any work, alone (no warnings): throws sd::Error for an
  // invalid request. Reads only what the model was opened with, so a thread may check
  // requests while another generates.
  void check(const ImageRequest& request) const;

  // A ControlNet for the following requests (replacing one loaded before), or none. Throws
  // sd::Error naming the file when it does not fit this model; the old one stays then.
  void load_control_net(const std::string& path);
  void unload_control_net();
  bool has_control_net() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace sd::pipeline
