// Model conversion (`sd-cli -M convert`): reads a checkpoint (safetensors, GGUF, .ckpt/.pt,
// or a diffusers folder), maps its names to the canonical scheme (io/name_conversion.h),
// optionally replaces the VAE with another file's, and writes a GGUF file whose tensors are
// converted to one output type, one tensor at a time.
//
// Which tensors keep their stored type: every tensor when no output type is given (names
// are still converted), otherwise weights/weight_type.h's rules, which are sd.cpp's, so a
// file converted here and with `sd -M convert` holds the same types and, through
// quantize_rows with an all-ones importance matrix, the same bytes. A kept tensor keeps its
// stored float type; other file types (f64, f8, integers) are written as the engine type
// they load as.
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
#include "weights/weight_type.h"

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

// Separate part files, as sd.cpp's convert takes them (--diffusion-model, --clip_l,
// --clip_g, --t5xxl): each one's names go under its part's canonical root, so the output
// loads back through the same flag. ConvertOptions::input may then be empty.
struct ConvertParts {
  std::string diffusion_model, clip_l, clip_g, t5xxl, llm;
};

struct ConvertResult {
  size_t tensors = 0;
  std::map<DType, size_t> type_counts;  // output type -> tensors
  uint64_t bytes = 0;                   // tensor data written
};

// Throws sd::Error "[convert] ..." (or "<path>: ..." from a reader) for a missing input,
// an unreadable or unknown file, a bad rule, an unwritable output; no output file is left
// behind on error.
ConvertResult convert_model(const ConvertOptions& options, const ConvertParts& parts = {});

// The types convert writes, in the order help texts list them: "f32, f16, bf16, q4_0, ...".
const std::vector<DType>& convert_types();
std::string convert_type_list();
// Case-insensitive; throws sd::Error naming the valid types for anything else.
DType parse_convert_type(std::string_view name);

using weights::TensorTypeRule;
// "regex=type,..." (--tensor-type-rules, for convert and for loading); empty items are
// skipped. Throws sd::Error naming the bad item.
std::vector<TensorTypeRule> parse_tensor_type_rules(std::string_view rules);

}  // namespace sd::api
