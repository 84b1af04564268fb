// The ModelManager: the production nn::Weights, and the one place that decides where a
// weight's bytes are (ARCHITECTURE.md, "Placement and residency").
//
// Weights belong to modules (text encoder, diffusion net, VAE), each registered with the
// device it computes on and a residency:
// - Compute (default): loaded onto the compute device on first use and kept; weights
//   converted on load (--type) into host RAM are freed when their phase ends, since the
//   OS cannot reclaim them as it can mapped file pages;
// - Device: kept on another device (RAM for a GPU module) and staged into the compute
//   device for each graph; the staged copy is dropped after the graph ran;
// - Disk: loaded when a phase first needs them and freed when the phase ends, so sampling
//   reads the file once, not every step; the file is checked before each phase.
// Where the file's bytes can be used as they are (same dtype, no transform, a device that
// reads host memory), a weight aliases the memory-mapped file instead of being copied:
// loading then costs no RAM beyond the page cache, and freeing drops the pages from this
// process.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/backend_manager.h"
#include "nn/param_recorder.h"
#include "nn/weights.h"
#include "weights/lora.h"
#include "weights/model_loader.h"
#include "weights/weight_type.h"

namespace sd::weights {

struct ModelManagerOptions {
  // --type: convert weights to this type on load, with convert's rules (weight_type.h).
  std::optional<DType> weight_type;
  bool use_mmap = true;
  int load_threads = 0;  // parallel reads for load_module(); 0: hardware threads
  // How LoRAs reach the weights they change (--lora-apply-mode):
  // Merge: into the weight as it becomes resident (sampling runs at the plain speed);
  // AtRuntime: the weight stays as stored and each graph adds the LoRA's product to it
  //   (no requantization of quantized weights; costs a little per graph);
  // Auto: at runtime for quantized weights, merged for the others.
  enum class LoraMode { Auto, Merge, AtRuntime } lora_mode = LoraMode::Auto;
  // --tensor-type-rules: per-name target types ahead of weight_type (weight_type.h).
  std::vector<TensorTypeRule> type_rules = {};
};

// One module's weights: the names under `prefixes`, where it computes, where they live.
struct ModuleSpec {
  std::string name;  // "te", "diffusion", "vae": for messages and phase_done()
  std::vector<std::string> prefixes;
  Device* compute = nullptr;
  Residency residency;
  // --quantize-convs: its convolution kernels with float weights and input channels in
  // whole 32-value blocks are held in q8_0 in a layout of ops/conv2d.h, made as they are
  // read, in place of the stored weights: 3x3 kernels at stride 1 as their Winograd
  // F(2x2, 3x3) transform (16/9 the values: 0.94x an f16 kernel's bytes), the others
  // channels-last (0.53x). Kernels a LoRA changes keep their stored type and layout.
  bool quantize_convs = false;
  // --fa / --diffusion-fa: its attention multiplies bf16-rounded queries, keys, values and
  // softmax weights (at the bf16 rate where its device has it), as the reference's flash
  // attention rounds keys and values to f16; otherwise attention is f32 unless the weights
  // are bf16 (nn::attention_precision_for).
  bool bf16_attention = false;
};

// Byte counters, for tests and benchmarks.
struct WeightTraffic {
  size_t loaded = 0;  // copied into device buffers (read, converted)
  size_t mapped = 0;  // aliased from the mapped file
  size_t staged = 0;  // copied into the compute device for one graph
  size_t freed = 0;   // released (loaded, mapped and staged bytes alike)
};

class ModelManager final : public nn::Weights {
 public:
  // Weights for registered modules only (add_module()).
  explicit ModelManager(ModelLoader& loader, ModelManagerOptions options = {});
  // One module holding every weight on `device`, kept there: the simple case.
  ModelManager(ModelLoader& loader, Device& device, ModelManagerOptions options = {});
  ~ModelManager() override;

  void add_module(ModuleSpec spec);
  // The parameters a module's graphs read (from nn::ParamRecorder): checked against the
  // files at once (every missing or mis-shaped tensor in one error) and remembered for
  // load_module(). `part` names the file's role in the error (default: "the <module>
  // weights") and `fix`, a sentence, says what to do (default: a part missing, e.g. --vae).
  void declare(const std::string& module, const std::vector<nn::ParamDecl>& params,
               const std::string& part = "", const std::string& fix = "");

  Tensor* get(Context& ctx, const std::string& name, const Shape& ne) override;
  Tensor* get_conv_kernel(Context& ctx, const std::string& name, const Shape& ne,
                          int stride) override;
  bool contains(const std::string& name) const override { return loader_.contains(name); }
  AttentionPrecision attention_precision(const Tensor* projection) override;
  // Drops the copies staged for the graph that just ran.
  void after_compute() override;

  // Makes every declared weight of `module` resident now, reading in parallel;
  // `progress(done, total)` after each tensor. `prefault` also reads the pages of mapped
  // weights, so the first graph does not wait for the disk (--eager-load). get() calls it
  // (without prefault) for the first weight a module needs in a phase.
  void load_module(const std::string& module,
                   const std::function<void(size_t, size_t)>& progress = {}, bool prefault = false);
  // A phase of `module` ended: disk weights, and converted host copies, are freed (a later
  // get() loads them again).
  void phase_done(const std::string& module);

  // LoRAs merged into the weights they change as those become resident (and again after a
  // disk reload). A different set drops the weights either set changes, so they are read
  // again clean and merged anew; an empty set removes every LoRA. Returns warnings (keys
  // of a file that change no weight of this model); throws for unreadable files, for a
  // file that changes no weight at all, and for one made for another family's diffusion
  // network (`model`, e.g. "SD3", names this one in that error), before anything changes.
  // Returns via `changed` whether any resident weight was dropped (backend caches are then
  // stale).
  struct LoraRequest {
    std::string path;
    float multiplier = 1.0f;
    // Empty: the weights the file names. A root (io::kHighNoiseUnetRoot): its diffusion
    // network's changes go to the network under that root instead (a second network of the
    // same shapes), the rest of the file is not used.
    std::string root;
  };
  std::vector<std::string> set_loras(const std::vector<LoraRequest>& loras, bool* changed = nullptr,
                                     std::string_view model = {});

  // The dtype `name` has (or will have) once resident.
  DType resident_type(const std::string& name) const;
  // Drops every resident weight whose name starts with `prefix`.
  void release(const std::string& prefix);
  // Bytes held in device buffers (mapped weights not counted) and mapped, now.
  size_t resident_bytes() const;
  size_t mapped_bytes() const;
  const WeightTraffic& traffic() const { return traffic_; }

 private:
  struct Resident {
    Tensor tensor;
    std::unique_ptr<Buffer> buffer;
    bool mapped = false;
    // A conv kernel held in q8_0 in another layout (quantize_convs), else Standard.
    ConvKernelLayout layout = ConvKernelLayout::Standard;
  };
  struct Module {
    ModuleSpec spec;
    std::vector<nn::ParamDecl> params;
    bool files_checked = false;  // this phase (disk residency)
    bool loaded = false;         // load_module() ran this phase
  };
  Module& module_of(const std::string& name);
  // The module whose prefix is the longest one `name` starts with, or null.
  const Module* owner_of(const std::string& name) const;
  Module* find_module(const std::string& name);
  Device& params_device(const Module& m) const;
  // Creates the resident tensor and its memory; returns true when its bytes still have to
  // be read (not mapped).
  bool place(const std::string& name, Device& device, Resident& r);
  void fill(const std::string& name, Resident& r);
  // The layout conv kernel `name` becomes resident in: channels-last or Winograd in q8_0
  // (quantize_convs), else Standard.
  ConvKernelLayout kernel_layout(const std::string& name) const;
  // Reads conv kernel `name` into r in q8_0 in r's layout (conv_kernel_layout.h).
  void fill_conv_kernel(const std::string& name, Resident& r);
  Tensor* get_leaf(Context& ctx, const std::string& name, const Shape& ne, bool conv_kernel);
  void drop(std::map<std::string, Resident>::iterator it);
  // Reads `name` as f32, adds its LoRA deltas and stores it in r's type.
  void fill_merged(const std::string& name, Resident& r);
  const LoraFile& lora_file(const std::string& path);
  using LoraList = std::vector<std::pair<const LoraUpdate*, float>>;
  // Whether `name`'s LoRAs are added in each graph instead of merged on load.
  bool lora_at_runtime(const std::string& name) const;
  // weight + its LoRAs' changes, as nodes of `ctx` (at-runtime mode).
  Tensor* add_runtime_loras(Context& ctx, const std::string& name, Tensor* weight, Device& device);
  // An f32 host tensor holding `values` (shape ne), kept until the LoRA set changes.
  Tensor* runtime_constant(Context& ctx, const std::string& key, const Shape& ne,
                           const std::vector<float>& values, Device& device);

  ModelLoader& loader_;
  ModelManagerOptions options_;
  std::vector<Module> modules_;
  std::map<std::string, Resident> resident_;
  std::map<std::string, Resident> staged_;  // for the graph being built
  WeightTraffic traffic_;
  std::map<std::string, LoraFile> lora_files_;       // read once per path
  std::map<std::string, LoraList> lora_targets_;     // weight -> the updates merged into it
  std::map<std::string, Resident> runtime_factors_;  // at-runtime LoRA factors, by key
  std::map<std::string, int> conv_kernels_;          // weights read as conv kernels: stride
};

}  // namespace sd::weights
