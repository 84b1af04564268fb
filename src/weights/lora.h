// LoRA files as per-weight changes. A LoRA (and its LyCORIS relatives) stores, for some of
// a model's weights, a low-rank or otherwise factored change; merging it adds
// multiplier * delta to the weight before the model runs.
//
//   kind      file factors (PyTorch shapes)                delta W [out, in(, kh, kw)]
//   LowRank   up [out, r(,1,1)], down [r, in(, kh, kw)]    up x down
//             + mid [r, r, kh, kw] (Tucker core),          sum_ab up[o,a] mid[a,b] down[b,i]
//               down [r, in, 1, 1]
//   Hadamard  w1_a [out, r], w1_b [r, in*kh*kw], w2_a/b    (w1_a x w1_b) .* (w2_a x w2_b)
//             (+ t1/t2 Tucker cores, then w*_a [r, out])
//   Kronecker w1 [a, b] (or w1_a x w1_b),                  w1 (x) w2 (Kronecker product)
//             w2 [c, d(, kh, kw)] (or w2_a x w2_b)
//   Full      diff, shaped like the weight                 diff
//
// scaled by alpha / r (the file's `.alpha`, r when absent; a `.scale` tensor replaces the
// quotient), r being the first dimension of `down` (w1_b); LoKr uses alpha / r only when a
// factor is stored as a low-rank pair of rank r > 1, else 1. Factors are read as f32 in
// engine layout (ne[0] fastest): up {r, out}, down {in*kh*kw, r}, as the file stores them.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "tensor/context.h"

namespace sd::weights {

enum class LoraKind {
  LowRank,    // LoRA, LoCon (conv down), LoCon with a Tucker core
  Hadamard,   // LoHa
  Kronecker,  // LoKr
  Full,       // a stored difference (`.diff`, `.diff_b`)
};

const char* lora_kind_name(LoraKind kind);

// One factor: its values (f32, engine order) and shape as the file gives it.
struct LoraFactor {
  Shape ne{1, 1, 1, 1};
  int n_dims = 0;  // as stored; ne[n_dims - 1] is PyTorch's first dimension
  std::vector<float> values;
  bool empty() const { return values.empty(); }
};

// One change to one model weight.
struct LoraUpdate {
  std::string target;           // canonical weight name it changes
  Shape target_ne{1, 1, 1, 1};  // that weight's shape, engine order
  LoraKind kind = LoraKind::LowRank;
  int64_t rank = 0;  // r; 0 for Full
  float alpha = 0;   // as stored, or r when the file has none
  float scale = 1;   // alpha / r (or the stored `.scale`); 1 for Full
  // LowRank: up [out, r], down [r, K] with K = numel(target) / out, optional mid.
  // Hadamard: up/down = w1_a/w1_b, up2/down2 = w2_a/w2_b, mid/mid2 = t1/t2; a factor with
  // a Tucker core is stored transposed, as up [r, out], and is turned to [out, r] on reading.
  // Kronecker: up = w1 [a, b], up2 = w2 [c, d*kh*kw], both whole.
  // Full: `up` holds the difference.
  LoraFactor up, down, mid;
  LoraFactor up2, down2, mid2;
  std::vector<std::string> keys;  // the file's tensor names that make it, for messages
};

struct LoraFile {
  std::string path;
  std::vector<LoraUpdate> updates;  // sorted by target
  // Keys that change nothing (not fatal): they name no weight of the model, or carry what
  // is not applied (DoRA's dora_scale, an alpha without factors).
  std::vector<std::string> unmatched;
};

// Reads a LoRA file (.safetensors, .gguf, .ckpt/.pt) and maps every key onto a canonical
// weight among `model_weights` (canonical name -> engine shape). Throws sd::Error naming
// the file for an unreadable file, and naming the key for factors that do not fit their
// target or a factor without its partner.
LoraFile read_lora(const std::string& path, const std::map<std::string, Shape>& model_weights);

// Adds multiplier * scale * delta to `weight` (f32, engine layout, shape `ne`, which must
// be the target's).
void add_lora_delta(const LoraUpdate& u, float multiplier, const Shape& ne, float* weight);

// The update's delta (times scale, not multiplier) as a new f32 array shaped like the
// target; for tests and for backends that merge on their own.
std::vector<float> lora_delta(const LoraUpdate& u);

}  // namespace sd::weights
