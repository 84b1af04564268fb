// A ControlNet given with --control-net (or sd_ctx_load_control_net): its file, its weights
// under the controlnet module's placement and residency, and its runner. Opening reads
// metadata only and checks that it fits the model, naming the file when not.
#pragma once

#include <map>
#include <memory>
#include <string>

#include "backend/backend_manager.h"
#include "models/unet.h"
#include "pipeline/controlnet_runner.h"
#include "weights/model_loader.h"
#include "weights/model_manager.h"

namespace sd::pipeline {

class LoadedControlNet {
 public:
  // Throws an sd::Error naming `path` when it is missing, not a ControlNet, or made for
  // another model than `unet`. `eager`: read every weight now.
  LoadedControlNet(const std::string& path, const models::UnetConfig& unet,
                   BackendManager& backends, const weights::ModelManagerOptions& options,
                   bool eager);
  ~LoadedControlNet();

  ControlNetRunner& runner() { return *runner_; }
  const std::string& path() const { return path_; }
  // Sampling is over: its compute buffer, and its weights when kept on disk, go back.
  void phase_done();
  size_t resident_bytes() const;

 private:
  // The runner asks for the engine's names (io/controlnet_names.h); the file's may differ.
  class Renamed final : public nn::Weights {
   public:
    Renamed(nn::Weights& inner, std::map<std::string, std::string> loaded_names)
        : inner_(inner), loaded_(std::move(loaded_names)) {}
    Tensor* get(Context& ctx, const std::string& name, const Shape& ne) override {
      return inner_.get(ctx, loaded(name), ne);
    }
    Tensor* get_conv_kernel(Context& ctx, const std::string& name, const Shape& ne,
                            int stride) override {
      return inner_.get_conv_kernel(ctx, loaded(name), ne, stride);
    }
    bool contains(const std::string& name) const override { return loaded_.count(name) != 0; }
    AttentionPrecision attention_precision(const Tensor* projection) override {
      return inner_.attention_precision(projection);
    }
    void after_compute() override { inner_.after_compute(); }
    std::string loaded(const std::string& name) const {
      auto it = loaded_.find(name);
      return it == loaded_.end() ? name : it->second;
    }

   private:
    nn::Weights& inner_;
    std::map<std::string, std::string> loaded_;
  };

  std::string path_;
  weights::ModelLoader loader_;
  std::unique_ptr<weights::ModelManager> weights_;
  std::unique_ptr<Renamed> view_;
  std::unique_ptr<ControlNetRunner> runner_;
};

}  // namespace sd::pipeline
