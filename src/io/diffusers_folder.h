// A diffusers pipeline folder (model_index.json, unet/, vae/, text_encoder/,
// text_encoder_2/, tokenizer/...): where each part's weights are and how their names
// convert to the canonical scheme (name_conversion.h). Only the folder layout and small
// JSON files are read here; the weight files are opened by their readers.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "io/name_conversion.h"

namespace sd::io {

struct DiffusersPart {
  std::string name;                // the subfolder: "unet", "vae", "text_encoder", ...
  std::vector<std::string> files;  // one weight file, or every shard of a sharded save
  SourceLayout layout = SourceLayout::Ldm;
  std::string prefix;  // canonical root, for convert_name(name, layout, prefix)
};

struct DiffusersFolder {
  std::string path;
  std::string pipeline;              // model_index.json "_class_name"; "" without one
  std::vector<DiffusersPart> parts;  // unet first, then vae and the text encoders present
  std::string tokenizer;             // tokenizer/ folder, "" when absent
  std::string tokenizer_2;           // tokenizer_2/ (SDXL)

  const DiffusersPart* find(std::string_view part) const;
};

// A folder with a model_index.json or a unet/ subfolder.
bool is_diffusers_folder(const std::string& path);

// Finds each part's weights. `variant` ("fp16", "bf16") is preferred when given
// (<name>.fp16.safetensors); otherwise full-precision files are preferred, and a variant
// is taken when it is all there is. safetensors come before PyTorch .bin files.
// Throws sd::Error "<path>: ..." for a folder without unet/, a part folder without
// weights, a malformed JSON file or a shard index naming a missing file.
DiffusersFolder open_diffusers_folder(const std::string& path, std::string_view variant = "");

// The shard files a `*.safetensors.index.json` ("weight_map": tensor -> file) names, as
// paths beside the index, each once, sorted.
std::vector<std::string> read_shard_index(const std::string& index_path);

}  // namespace sd::io
