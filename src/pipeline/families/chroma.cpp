// Chroma (lodestones/Chroma; sd.cpp's Chroma support): FLUX.1 schnell's transformer with
// one approximator for all modulations, conditioned on T5-XXL alone (no CLIP) with its
// padding masked (pipeline/t5_only_conditioner.h), FLUX.1's autoencoder and sampling
// defaults; flow shift 1 (no guidance embedding). Dimensions from the files.
#include "pipeline/families/flux.h"
#include "pipeline/families/registry.h"
#include "pipeline/families/tokenizers.h"
#include "pipeline/flux_conditioner.h"
#include "pipeline/t5_only_conditioner.h"
#include "tensor/error.h"
#include "weights/model_manager.h"

namespace sd::pipeline {

namespace {

using io::ModelVersion;

class Chroma final : public FluxFamily {
 public:
  Chroma() : FluxFamily(io::ModelFamily::Chroma, defaults()) {}

  // Its transformer, T5-XXL and FLUX.1's autoencoder; a --clip_l file is not read (as
  // sd.cpp: Chroma has no CLIP).
  void require_files(const ModelFiles& files) const override {
    SD_CHECK(files.contains(std::string(FluxConditioner::kT5Scope) + "shared.weight"),
             "Chroma needs its T5-XXL text encoder: pass --t5xxl FILE (t5xxl_fp16.safetensors)");
    SD_CHECK(files.contains(std::string(io::kVaeConvIn)),
             "Chroma needs its autoencoder: pass --vae FILE (ae.safetensors)");
    if (files.contains(std::string(FluxConditioner::kClipScope) +
                       "embeddings.token_embedding.weight"))
      files.note("warning: Chroma has no CLIP text encoder; the --clip_l file is not used");
  }
  Architecture architecture(ModelVersion version, const ModelFiles& files) const override {
    return transformer_architecture(version, files);
  }
  // Chroma reads its masking options (--model-args chroma_*).
  void check_model_args(const ModelFiles&) const override {}
  std::unique_ptr<PromptEncoder> make_prompt_encoder(const Architecture& arch,
                                                     const ModelFiles& files,
                                                     const NetworkPlaces& places) const override {
    return std::make_unique<T5OnlyConditioner>(t5_tokenizer(files), *arch.t5,
                                               files.model_args.chroma, places.weights,
                                               places.text_backend, FluxConditioner::kT5Scope);
  }

 private:
  static FamilyDefaults defaults() {
    FamilyDefaults d = flux_defaults();
    d.flow_shift = [](ModelVersion) { return 1.0f; };
    return d;
  }
  models::FluxConfig transformer(ModelVersion v) const override {
    if (v != ModelVersion::Chroma) fail_unsupported(v);
    return models::FluxConfig::chroma();
  }
};

}  // namespace

const Family& chroma_family() {
  static const Chroma kFamily;
  return kFamily;
}

}  // namespace sd::pipeline
