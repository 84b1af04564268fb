#include "pipeline/control_net.h"

#include "backend/placement.h"
#include "tensor/error.h"

namespace sd::pipeline {

LoadedControlNet::LoadedControlNet(const std::string& path, const models::UnetConfig& unet,
                                   BackendManager& backends,
                                   const weights::ModelManagerOptions& options, bool eager)
    : path_(path) {
  SD_CHECK(!path.empty(), "--control-net: no file given");
  try {
    loader_.add(path, io::FileRole::Model);
  } catch (const Error& e) {
    fail("--control-net %s: %s", path.c_str(), e.what());
  }
  std::map<std::string, std::string> loaded;
  for (const auto& [name, source] : loader_.tensors()) loaded[io::controlnet_name(name)] = name;
  const ShapeOf shape_of = [&](const std::string& name) {
    std::optional<std::array<int64_t, 4>> ne;
    auto it = loaded.find(name);
    if (it != loaded.end()) ne = loader_.find(it->second).ne;
    return ne;
  };
  models::ControlNetConfig config;
  try {
    config = controlnet_config_from_shapes(ControlNetRunner::kScope, shape_of);
  } catch (const Error& e) {
    fail("--control-net %s: %s", path.c_str(), e.what());
  }
  check_controlnet_fits(config, unet, path);

  const std::string module = module_name(Module::ControlNet);
  weights_ = std::make_unique<weights::ModelManager>(loader_, options);
  weights_->add_module(weights::ModuleSpec{module,
                                           {""},
                                           &backends.compute_device(Module::ControlNet),
                                           backends.residency(Module::ControlNet)});
  view_ = std::make_unique<Renamed>(*weights_, std::move(loaded));
  runner_ =
      std::make_unique<ControlNetRunner>(*view_, config, backends.backend(Module::ControlNet));
  std::vector<nn::ParamDecl> params = runner_->parameters();
  for (nn::ParamDecl& p : params) p.name = view_->loaded(p.name);
  try {
    weights_->declare(module, params);
  } catch (const Error& e) {
    fail("--control-net %s: %s", path.c_str(), e.what());
  }
  if (eager) weights_->load_module(module, {}, /*prefault=*/true);
}

LoadedControlNet::~LoadedControlNet() = default;

void LoadedControlNet::phase_done() {
  runner_->release();
  weights_->phase_done(module_name(Module::ControlNet));
}

size_t LoadedControlNet::resident_bytes() const {
  return weights_->resident_bytes() + weights_->mapped_bytes();
}

}  // namespace sd::pipeline
