#include "io/diffusers_folder.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "io/file_error.h"

namespace sd::io {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// Configs and shard indexes are a few hundred KiB at most (an index lists every tensor
// once); a larger one is not what we are looking for.
constexpr std::uintmax_t kMaxJsonBytes = 64ull << 20;

json read_json(const fs::path& path) {
  std::error_code ec;
  std::uintmax_t size = fs::file_size(path, ec);
  if (ec) fail_file(path.string(), "cannot read: " + ec.message());
  if (size > kMaxJsonBytes) {
    fail_file(path.string(), "is " + std::to_string(size) + " bytes; a diffusers JSON file is " +
                                 "far smaller (wrong file?)");
  }
  std::ifstream f(path, std::ios::binary);
  std::stringstream text;
  text << f.rdbuf();
  if (!f) fail_file(path.string(), "cannot read");
  json j = json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) fail_file(path.string(), "is not valid JSON (truncated download?)");
  if (!j.is_object()) fail_file(path.string(), "is not a JSON object");
  return j;
}

std::string string_field(const json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

bool is_dir(const fs::path& p) {
  std::error_code ec;
  return fs::is_directory(p, ec);
}
bool is_file(const fs::path& p) {
  std::error_code ec;
  return fs::is_regular_file(p, ec);
}

// Weight files of one part, in order of preference; `base` is "diffusion_pytorch_model"
// (diffusers models) or "model" (transformers models). Sharded saves are found by their
// index. PyTorch .bin files come last: they need the pickle reader and are slower to open.
std::vector<std::string> find_weights(const fs::path& dir, const std::vector<std::string>& bases,
                                      std::string_view variant) {
  std::vector<std::string> variants;  // "" is the full-precision file
  if (!variant.empty()) variants.emplace_back(variant);
  for (std::string_view v : {"", "fp16", "bf16"}) {
    if (variant.empty() || v != variant) variants.emplace_back(v);
  }
  for (const char* ext : {".safetensors", ".bin"}) {
    for (const std::string& v : variants) {
      for (const std::string& base : bases) {
        std::string name = base + (v.empty() ? "" : "." + v) + ext;
        if (is_file(dir / name)) return {(dir / name).string()};
        if (is_file(dir / (name + ".index.json"))) {
          return read_shard_index((dir / (name + ".index.json")).string());
        }
      }
    }
  }
  return {};
}

std::string listing(const fs::path& dir) {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) names.push_back(e.path().filename());
  std::sort(names.begin(), names.end());
  if (names.empty()) return "it is empty";
  std::string s = "it holds ";
  for (size_t i = 0; i < names.size() && i < 8; ++i) s += (i ? ", " : "") + names[i];
  if (names.size() > 8) s += ", ...";
  return s;
}

struct PartSpec {
  const char* name;
  std::vector<std::string> bases;
};
const PartSpec kUnet{"unet", {"diffusion_pytorch_model"}};
const PartSpec kVae{"vae", {"diffusion_pytorch_model"}};
const PartSpec kTextEncoder{"text_encoder", {"model", "pytorch_model"}};
const PartSpec kTextEncoder2{"text_encoder_2", {"model", "pytorch_model"}};

// Adds the part when its folder exists; a folder without weights is an error, since the
// user evidently meant to ship that part.
void add_part(DiffusersFolder& out, const PartSpec& spec, SourceLayout layout,
              std::string_view prefix, std::string_view variant) {
  fs::path dir = fs::path(out.path) / spec.name;
  if (!is_dir(dir)) return;
  std::vector<std::string> files = find_weights(dir, spec.bases, variant);
  if (files.empty()) {
    fail_file(dir.string(), "has no weights: expected " + spec.bases[0] +
                                ".safetensors (or a .fp16 variant, a sharded *.index.json, or a "
                                ".bin), but " +
                                listing(dir));
  }
  out.parts.push_back({spec.name, std::move(files), layout, std::string(prefix)});
}

}  // namespace

const DiffusersPart* DiffusersFolder::find(std::string_view part) const {
  for (const DiffusersPart& p : parts) {
    if (p.name == part) return &p;
  }
  return nullptr;
}

bool is_diffusers_folder(const std::string& path) {
  return is_dir(path) &&
         (is_file(fs::path(path) / "model_index.json") || is_dir(fs::path(path) / "unet"));
}

std::vector<std::string> read_shard_index(const std::string& index_path) {
  json j = read_json(index_path);
  auto map = j.find("weight_map");
  if (map == j.end() || !map->is_object()) {
    fail_file(index_path, "has no \"weight_map\" object (not a sharded-weights index?)");
  }
  fs::path dir = fs::path(index_path).parent_path();
  std::set<std::string> shards;
  for (const auto& [tensor, file] : map->items()) {
    if (!file.is_string()) fail_file(index_path, "maps '" + tensor + "' to a non-string");
    std::string name = file.get<std::string>();
    // Shards live beside their index; anything else would read outside the folder.
    if (name.empty() || name.find('/') != std::string::npos ||
        name.find('\\') != std::string::npos || name == "." || name == "..") {
      fail_file(index_path, "maps '" + tensor + "' to '" + name + "', which is not a file name");
    }
    shards.insert(name);
  }
  if (shards.empty()) fail_file(index_path, "lists no tensors");
  std::vector<std::string> paths;
  for (const std::string& s : shards) {
    fs::path p = dir / s;
    if (!is_file(p)) {
      fail_file(index_path, "names shard '" + s + "', which is missing (incomplete download?)");
    }
    paths.push_back(p.string());
  }
  return paths;
}

DiffusersFolder open_diffusers_folder(const std::string& path, std::string_view variant) {
  if (!is_dir(path)) fail_file(path, "is not a folder");
  DiffusersFolder out;
  out.path = path;
  fs::path root(path);
  if (is_file(root / "model_index.json")) {
    out.pipeline = string_field(read_json(root / "model_index.json"), "_class_name");
  }

  if (!is_dir(root / "unet")) {
    if (is_dir(root / "transformer")) {
      fail_file(path,
                "is a diffusers folder with transformer/ (a DiT such as SD3 or Flux); only "
                "UNet pipelines (SD1.x, SD2.x, SDXL) load from diffusers folders so far: use "
                "a single-file checkpoint with -m, or --diffusion-model with the DiT's file");
    }
    fail_file(path, "is not a diffusers pipeline folder: it has no unet/ (" + listing(root) +
                        "); give a checkpoint file with -m, or the folder that holds "
                        "model_index.json");
  }

  // SDXL's UNet takes the size/crop embedding ("text_time") and SDXL pipelines ship a
  // second text encoder; either tells the layout.
  bool xl = out.pipeline.find("XL") != std::string::npos || is_dir(root / "text_encoder_2");
  if (is_file(root / "unet" / "config.json")) {
    json cfg = read_json(root / "unet" / "config.json");
    if (string_field(cfg, "addition_embed_type") == "text_time") xl = true;
  }
  add_part(out, kUnet, xl ? SourceLayout::DiffusersUnetXl : SourceLayout::DiffusersUnet, kUnetRoot,
           variant);
  add_part(out, kVae, SourceLayout::DiffusersVae, kVaeRoot, variant);
  add_part(out, kTextEncoder, SourceLayout::HfTransformers, kTextEncoderRoot, variant);
  // The SDXL refiner has only text_encoder_2 (OpenCLIP-bigG); its checkpoint keeps it as
  // embedder 0, which sd.cpp files under cond_stage_model.
  bool has_te1 = out.find("text_encoder") != nullptr;
  add_part(out, kTextEncoder2, SourceLayout::HfTransformers,
           has_te1 ? kTextEncoder2Root : kTextEncoderRoot, variant);

  if (is_dir(root / "tokenizer")) out.tokenizer = (root / "tokenizer").string();
  if (is_dir(root / "tokenizer_2")) out.tokenizer_2 = (root / "tokenizer_2").string();
  return out;
}

}  // namespace sd::io
