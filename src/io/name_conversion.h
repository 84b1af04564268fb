// Tensor names from every supported source, mapped onto one canonical scheme: the names of
// the original (LDM) single-file checkpoints, as stable-diffusion.cpp uses them internally
// after its own conversion, so a model file works the same here and there.
//
//   part                       canonical root            names below the root
//   UNet                       model.diffusion_model.    input_blocks.*, middle_block.*, ...
//   VAE                        first_stage_model.        encoder.down.*, decoder.up.*, ...
//   first text encoder         cond_stage_model.         transformer.text_model.* (HF CLIP)
//   second (SDXL) encoder      cond_stage_model.1.       transformer.text_model.* (HF CLIP)
//   DiT families' encoders     text_encoders.clip_l. / text_encoders.clip_g. /
//                              text_encoders.t5xxl.      transformer.*
//
// Text encoders always end up with Hugging Face CLIP names: OpenCLIP checkpoints (SD2.x
// `cond_stage_model.model.*`, SDXL `conditioner.embedders.1.model.*`) are renamed, and SDXL's
// `conditioner.embedders.N.` becomes `cond_stage_model.` / `cond_stage_model.1.` (sd.cpp
// compatibility: its name_conversion.cpp does the same). Where OpenCLIP stores a tensor
// differently from HF CLIP, the mapping says what the loader must do (see Transform).
#pragma once

#include <array>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace sd::io {

// How the names of one file (or one part of a file) are spelled.
enum class SourceLayout {
  Ldm,              // original checkpoints, incl. OpenCLIP and SDXL `conditioner.*` names
  DiffusersUnet,    // diffusers UNet2DConditionModel of SD1.x / SD2.x (unet/)
  DiffusersUnetXl,  // the same for SDXL: 3 levels, attention in the two deeper ones
  DiffusersVae,     // diffusers AutoencoderKL (vae/)
  HfTransformers,   // a transformers model (text_encoder/, --clip_l files): text_model.*
};

const char* layout_name(SourceLayout layout);

// Canonical roots (see the table above).
inline constexpr std::string_view kUnetRoot = "model.diffusion_model.";
// A second diffusion network sampling the first, noisiest steps (Wan 2.2 A14B's
// high-noise expert, --high-noise-diffusion-model), named as sd.cpp names it.
inline constexpr std::string_view kHighNoiseUnetRoot = "model.high_noise_diffusion_model.";
inline constexpr std::string_view kVaeRoot = "first_stage_model.";
// The VAE decoder's first convolution: its presence tells that a VAE was given.
inline constexpr std::string_view kVaeConvIn = "first_stage_model.decoder.conv_in.weight";
inline constexpr std::string_view kTextEncoderRoot = "cond_stage_model.";
inline constexpr std::string_view kTextEncoder2Root = "cond_stage_model.1.";
inline constexpr std::string_view kClipLRoot = "text_encoders.clip_l.";
inline constexpr std::string_view kClipGRoot = "text_encoders.clip_g.";
inline constexpr std::string_view kT5xxlRoot = "text_encoders.t5xxl.";
// Where the T5 encoder's Hugging Face names sit, as sd.cpp has them: every T5 spelling
// (bare HF names of a --t5xxl file, "text_encoders.t5xxl.*", llama.cpp's GGUF names with
// or without the root) is mapped below it.
inline constexpr std::string_view kT5Root = "text_encoders.t5xxl.transformer.";
// Where an LLM text encoder's (--llm) Hugging Face names sit ("model.layers.N..."), as
// sd.cpp has them; llama.cpp's GGUF names (blk.N.attn_q, token_embd, ...) are mapped there.
inline constexpr std::string_view kLlmRoot = "text_encoders.llm.";
// Qwen2.5-VL's vision tower (--llm_vision, or visual.* in the --llm file), llama.cpp's
// spelling of its blocks (io/llm_gguf_names.h maps mmproj names there).
inline constexpr std::string_view kLlmVisionRoot = "text_encoders.llm.visual.";
// CLIP vision (--clip_vision: Wan's image-to-video image encoder), Hugging Face names
// (vision_model.*, visual_projection.weight) below it.
inline constexpr std::string_view kClipVisionRoot = "clip_vision.";
// Its token embeddings: present in every LLM text encoder file, so they tell one is given.
inline constexpr std::string_view kLlmEmbeddings = "text_encoders.llm.model.embed_tokens.weight";

// Which flag a file came from; each puts its names under a root, as sd.cpp's
// init_from_file prefixes do ("model.diffusion_model.", "vae.", "clip_l.", "clip_g.",
// "text_encoders.t5xxl.transformer."; sd.cpp then turns "vae." into "first_stage_model."
// and "clip_l."/"clip_g." into the UNet or DiT encoder roots).
enum class FileRole {
  Model,
  DiffusionModel,
  HighNoiseDiffusionModel,
  Vae,
  ClipL,
  ClipG,
  T5xxl,
  Llm,
  LlmVision,
  ClipVision
};
// `unet_family`: SD1.x/SD2.x/SDXL (encoders under cond_stage_model.) rather than a DiT.
std::string_view file_prefix(FileRole role, bool unet_family);

// What the loader must do to the stored tensor beyond renaming it.
enum class Transform {
  None,
  // A 2-D tensor stored with its two dimensions swapped (no current mapping uses it:
  // OpenCLIP's text_projection is kept as stored, as sd.cpp reads it).
  Transpose,
  // OpenCLIP's fused attention input projection (in_proj, q;k;v stacked on the outer dim):
  // qkv_split_names() gives the three canonical names, one third of the rows each.
  SplitQkv,
  // A diffusers VAE attention Linear [C, C] whose canonical (LDM) tensor is a 1x1 conv
  // [C, C, 1, 1]: same bytes, two more unit dims.
  Conv1x1,
};

struct NameMapping {
  std::string name;  // canonical name; for an unknown name: prefix + name, unchanged
  Transform transform = Transform::None;
  bool known = false;  // a rule matched
};

// Maps one stored name. `prefix` is the root of the part the file holds (file_prefix()).
// For SourceLayout::Ldm, "" means a whole checkpoint, and a name already under `prefix` is
// not prefixed twice; the mapping is idempotent (a canonical name maps onto itself). For
// the other layouts "" means the part's usual root: kUnetRoot, kVaeRoot, kTextEncoderRoot.
NameMapping convert_name(std::string_view name, SourceLayout layout, std::string_view prefix);

inline std::string to_canonical(std::string_view name, SourceLayout layout,
                                std::string_view prefix) {
  return convert_name(name, layout, prefix).name;
}

// The names no rule knows (they pass through unchanged), in input order.
std::vector<std::string> unmapped_names(const std::vector<std::string>& names, SourceLayout layout,
                                        std::string_view prefix);

// For a canonical `...self_attn.in_proj.weight|bias`: the q_proj/k_proj/v_proj names its
// three row blocks load into.
std::optional<std::array<std::string, 3>> qkv_split_names(std::string_view canonical);

// Guesses how a separately given file (--diffusion-model, --vae, --clip_l) spells its
// names, from names only: diffusers UNet (SDXL when it has add_embedding), diffusers VAE,
// transformers (text_model.*), otherwise Ldm.
SourceLayout guess_layout(const std::vector<std::string>& names);

// Tensors that checkpoints carry but no model reads (training buffers, EMA copies,
// position_ids, logit_scale); a loader skips them instead of reporting them as unused.
bool is_unused_tensor(std::string_view canonical);

}  // namespace sd::io
