// Model conversion (`sd-cli -M convert`): reads a checkpoint (safetensors, GGUF, .ckpt/.pt,
// or a diffusers folder), maps its names to the canonical scheme (io/name_conversion.h),
// optionally replaces the VAE with another file's, and writes a GGUF file whose tensors are
// converted to one output type, one tensor at a time.
//
// Which tensors keep their stored type (stable-diffusion.cpp compatibility: these are the
// rules of its ModelLoader::tensor_should_be_converted, so a file converted here and with
// `sd -M convert` holds the same types and, through quantize_rows with an all-ones
// importance matrix, the same bytes):
//   - every tensor when no output type is given (names are still converted);
//   - tensors whose ne[0] is not a multiple of the output block size (3x3 conv kernels
//     have ne[0] = 3): a block type cannot hold them;
//   - names ending in ".bias", ".scale" or ".weight_scale": small, and precision-critical;
//   - input/embedding layers, whose error feeds every later layer: names containing
//     "img_in.", "txt_in.", "time_in.", "vector_in.", "guidance_in.", "final_layer."
//     (Flux), "x_embedder.", "t_embedder.", "y_embedder.", "pos_embed",
//     "context_embedder." (MMDiT), "time_embed.", "label_emb." (UNet), "embedding";
//   - i32 tensors (integer buffers are not weights).
// A kept tensor keeps its stored float type (f32 stays f32, f16 stays f16); other file
// types (f64, f8, integers) are written as the engine type they load as.
// Note what is NOT kept: 1-D norm weights whose length is a multiple of the block size
// (e.g. GroupNorm ".weight" of 320 channels under q8_0) are quantized, as sd.cpp does.
//
// --tensor-type-rules "regex=type,...": for each tensor, the FIRST rule whose regex
// (ECMAScript, searched anywhere in the canonical name) matches sets the target type instead
// of --type; the keep-rules above still apply to it. First-match is sd.cpp's order.
// Unlike sd.cpp, a malformed rule is an error, not a warning.
//
// Training-only tensors (io::is_unused_tensor: EMA copies, position_ids, ...) are dropped.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <regex>
#include <string>
#include <string_view>
#include <vector>

#include "tensor/dtype.h"

namespace sd::api {

struct ConvertProgress {
  size_t index = 0;  // 1-based: tensors written so far, including this one
  size_t count = 0;
  std::string_view name;
  DType type = DType::F32;
  uint64_t bytes_written = 0;  // tensor data so far
  uint64_t bytes_total = 0;
};

struct ConvertOptions {
  std::string input;              // file or diffusers folder
  std::string output;             // GGUF file; written whole or not at all
  std::string vae;                // optional file whose tensors replace the VAE's
  std::optional<DType> type;      // nullopt: keep every tensor's stored type
  std::string tensor_type_rules;  // "regex=type,..."
  std::function<void(const ConvertProgress&)> progress;
};

struct ConvertResult {
  size_t tensors = 0;
  std::map<DType, size_t> type_counts;  // output type -> tensors
  uint64_t bytes = 0;                   // tensor data written
};

// Throws sd::Error "[convert] ..." (or "<path>: ..." from a reader) for a missing input,
// an unreadable or unknown file, a bad rule, an unwritable output; no output file is left
// behind on error.
ConvertResult convert_model(const ConvertOptions& options);

// The types convert writes, in the order help texts list them: "f32, f16, bf16, q4_0, ...".
const std::vector<DType>& convert_types();
std::string convert_type_list();
// Case-insensitive; throws sd::Error naming the valid types for anything else.
DType parse_convert_type(std::string_view name);

struct TensorTypeRule {
  std::string pattern;
  std::regex regex;
  DType type;
};
// "regex=type,..."; empty items are skipped. Throws sd::Error naming the bad item.
std::vector<TensorTypeRule> parse_tensor_type_rules(std::string_view rules);

// sd.cpp's tensor_should_be_converted: may the tensor `name` with first dim `ne0` and
// stored type `stored` be written as `target`?
bool tensor_should_be_converted(std::string_view name, int64_t ne0, DType stored, DType target);

// The type a tensor is written as: the first matching rule's type, else `type`, when
// tensor_should_be_converted allows it; else its stored type.
DType output_type(std::string_view name, int64_t ne0, DType stored, std::optional<DType> type,
                  const std::vector<TensorTypeRule>& rules);

}  // namespace sd::api
