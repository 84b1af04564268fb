// How a model is opened: its files, tokenizers, placement, memory budgets and LoRA mode,
// as sd-cli's and the C API's context parameters give them.
#pragma once

#include <functional>
#include <optional>
#include <string>

#include "pipeline/architecture.h"
#include "sampling/schedule.h"
#include "tensor/dtype.h"
#include "weights/model_manager.h"

namespace sd::pipeline {

struct ModelOptions {
  std::string model;                       // -m: checkpoint file or diffusers folder
  std::string diffusion_model;             // --diffusion-model: a separate UNet file
  std::string high_noise_diffusion_model;  // --high-noise-diffusion-model: Wan 2.2 A14B's expert
  std::string vae;                         // --vae: replaces the checkpoint's VAE
  std::string taesd;                       // --taesd: decode (and encode) with TAESD instead
  bool taesd_preview_only = false;         // --taesd-preview-only: TAESD for previews only
  std::string clip_l;                      // --clip_l: a separate text-encoder file
  std::string clip_g;                      // --clip_g: SD3's CLIP-G text encoder
  std::string t5xxl;                       // --t5xxl: T5-XXL's encoder (FLUX.1, SD3)
  std::string t5_tokenizer;                // T5's tokenizer.json; empty: searched (t5_tokenizer.h)
  std::string llm;                         // --llm: an LLM text encoder (Z-Image's Qwen3)
  std::string llm_vision;                  // --llm_vision: its vision tower (an mmproj file)
  std::string clip_vision;                 // --clip_vision: CLIP's vision tower (Wan 2.1 I2V)
  std::string llm_tokenizer;               // its tokenizer.json; empty: searched (bpe_tokenizer.h)
  std::string embeddings_dir;              // --embd-dir: textual-inversion embeddings
  std::string control_net;                 // --control-net: a ControlNet for the UNet
  std::string clip_vocab;            // the CLIP merges file; empty: searched (clip_tokenizer.h)
  int threads = 0;                   // 0: all cores
  std::optional<DType> weight_type;  // --type
  // --tensor-type-rules: types per tensor name pattern, ahead of --type (weights/weight_type.h).
  std::vector<weights::TensorTypeRule> tensor_type_rules;
  std::optional<sampling::Prediction> prediction;  // --prediction
  bool use_mmap = true;
  // Placement (backend/placement.h): where each module computes and where its weights live.
  std::string backend;         // --backend
  std::string params_backend;  // --params-backend
  bool eager_load = false;     // read every weight when the model is opened
  // --quantize-convs: the diffusion network's convolution kernels held in q8_0 and run on
  // 8-bit integer dot products, where its device has them (weights/model_manager.h).
  bool quantize_convs = false;
  // --fa: every module's attention on bf16-rounded operands (weights::ModuleSpec::
  // bf16_attention), the reference's flash attention; --diffusion-fa: the diffusion
  // network's only.
  bool flash_attn = false;
  bool diffusion_flash_attn = false;
  // --max-vram (backend/max_vram.h) and --stream-layers: device memory budgets, within
  // which weights of modules on GPU or remote devices are streamed segment by segment.
  std::string max_vram;
  bool stream_layers = false;
  // --auto-fit: placements chosen from the modules' sizes and the devices' free memory
  // (backend/auto_fit.h); --backend and --params-backend are then not read.
  bool auto_fit = false;
  // Told about placement decisions when the model is opened (budgets, auto-fit's plan).
  std::function<void(const std::string&)> note;
  // --lora-apply-mode: merged on load, added in each graph, or auto (at runtime for
  // quantized weights only).
  weights::ModelManagerOptions::LoraMode lora_mode = weights::ModelManagerOptions::LoraMode::Auto;
  // Told while --eager-load reads a module: (module, tensors done, tensors in all).
  std::function<void(const std::string&, size_t, size_t)> load_progress;
  std::optional<Architecture> architecture;  // unset: detected from the files
  // --model-args: "key=value,..." (pipeline/model_args.h); Chroma's masking options.
  std::string model_args;
};

// `o` with its thread count bounded by the machine's (backend.h's usable_threads), a warning
// through o.note when it was cut.
ModelOptions with_usable_threads(const ModelOptions& o);

}  // namespace sd::pipeline
