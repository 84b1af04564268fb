#include "pipeline/stable_diffusion.h"

#include "pipeline/stable_diffusion_impl.h"

namespace sd::pipeline {

StableDiffusion::StableDiffusion(const ModelOptions& options)
    : impl_(std::make_unique<Impl>(options)) {}

StableDiffusion::~StableDiffusion() = default;

std::string StableDiffusion::placement() const {
  std::string s;
  for (Module m : {Module::TextEncoder, Module::Diffusion, Module::Vae})
    s += (s.empty() ? "" : "; ") + impl_->backends->describe(m);
  if (impl_->control_net) s += "; " + impl_->backends->describe(Module::ControlNet);
  return s;
}

void StableDiffusion::load_control_net(const std::string& path) {
  impl_->load_control_net(path);
}

void StableDiffusion::unload_control_net() {
  impl_->control_net.reset();
}

bool StableDiffusion::has_control_net() const {
  return impl_->control_net != nullptr;
}

size_t StableDiffusion::resident_weight_bytes() const {
  size_t n = impl_->weights->resident_bytes() + impl_->weights->mapped_bytes();
  if (impl_->control_net) n += impl_->control_net->resident_bytes();
  if (impl_->taesd_weights)
    n += impl_->taesd_weights->resident_bytes() + impl_->taesd_weights->mapped_bytes();
  return n;
}

io::ModelVersion StableDiffusion::version() const {
  return impl_->version;
}
sampling::Prediction StableDiffusion::prediction() const {
  return impl_->prediction;
}
bool StableDiffusion::makes_video() const {
  return impl_->family->defaults().video_frame_stride > 0;
}
bool StableDiffusion::has_high_noise_expert() const {
  return impl_->high_noise != nullptr;
}
sampling::SampleMethod StableDiffusion::default_sample_method() const {
  return impl_->family->defaults().sample_method;
}
sampling::Scheduler StableDiffusion::default_scheduler(sampling::SampleMethod method) const {
  return impl_->family->default_scheduler(method, impl_->prediction);
}

}  // namespace sd::pipeline
