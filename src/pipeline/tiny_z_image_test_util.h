// A tiny Z-Image as the files it is distributed as, in the released layouts: the transformer
// (ComfyUI names), a Qwen3-style LLM (Hugging Face names, model.*), FLUX.1's autoencoder
// (small channels), and a byte-level BPE tokenizer.json beside the LLM with Qwen's chat
// tokens. 128-channel heads as released (the rotary axes need them); the rest is tiny.
#pragma once

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "models/byte_level.h"
#include "models/llm.h"
#include "models/z_image.h"
#include "nn/random_weights.h"
#include "pipeline/tiny_model_test_util.h"

namespace sd::pipeline::test {

struct TinyZImageFiles {
  std::string dit, llm, vae, tokenizer, dir;
};

inline models::ZImageConfig tiny_z_image_config() {
  models::ZImageConfig c;
  c.hidden = 128;
  c.heads = 1;
  c.ffn_hidden = 64;
  c.caption_dim = 32;
  c.layers = 1;
  c.refiner_layers = 1;
  return c;
}

inline models::LlmConfig tiny_qwen3_config() {
  models::LlmConfig c = models::LlmConfig::qwen3_4b();
  c.vocab_size = 272;
  c.hidden = 32;
  c.intermediate = 48;
  c.layers = 3;
  c.heads = 4;
  c.kv_heads = 2;
  c.head_dim = 8;
  return c;
}

// GPT-2's printable stand-in of a byte, as UTF-8 (the byte-level tokenizers' alphabet).
inline std::string byte_symbol(int b) {
  return models::byte_level_alphabet().symbol[static_cast<size_t>(b)];
}

// 256 byte tokens, a few merges ("a", " cat"), and `added` as added tokens from id 260.
inline std::string tiny_bpe_tokenizer_json_with(const std::vector<std::string>& added) {
  auto quoted = [](const std::string& s) {
    std::string q = "\"";
    for (char ch : s) {
      if (ch == '"' || ch == '\\') q += '\\';
      q += ch;
    }
    return q + "\"";
  };
  std::string vocab;
  for (int b = 0; b < 256; ++b)
    vocab += (b ? "," : "") + quoted(byte_symbol(b)) + ":" + std::to_string(b);
  const std::string space = byte_symbol(' ');
  vocab += "," + quoted(space + "c") + ":256," + quoted("at") + ":257," + quoted(space + "cat") +
           ":258," + quoted(space + "a") + ":259";
  const std::string merges = "[" + quoted(space + " c") + "," + quoted("a t") + "," +
                             quoted(space + "c at") + "," + quoted(space + " a") + "]";
  std::string tokens;
  for (size_t i = 0; i < added.size(); ++i)
    tokens += std::string(i ? "," : "") + "{\"id\": " + std::to_string(260 + i) +
              ", \"content\": " + quoted(added[i]) + ", \"special\": true}";
  return "{\"added_tokens\": [" + tokens + R"(],
  "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false, "use_regex": true},
  "model": {"type": "BPE", "vocab": {)" +
         vocab + "}, \"merges\": " + merges + "}}";
}

// Qwen's <|im_start|> and <|im_end|> as added tokens: 262 ids; `endoftext` adds Qwen's
// padding token <|endoftext|> as id 262.
inline std::string tiny_bpe_tokenizer_json(bool endoftext = false) {
  std::vector<std::string> added = {"<|im_start|>", "<|im_end|>"};
  if (endoftext) added.push_back("<|endoftext|>");
  return tiny_bpe_tokenizer_json_with(added);
}

inline TinyZImageFiles write_tiny_z_image(const std::string& dir,
                                          const models::ZImageConfig& zc = tiny_z_image_config(),
                                          const models::LlmConfig& lc = tiny_qwen3_config()) {
  TinyZImageFiles f{dir + "/z_image.safetensors", dir + "/qwen3.safetensors",
                    dir + "/ae.safetensors", dir + "/tokenizer.json", dir};
  std::filesystem::create_directories(dir);
  Context ctx;
  {
    nn::RandomWeights w(DType::F16, 31);
    const int64_t width = int64_t{zc.patch_size} * zc.patch_size * zc.in_channels;
    Tensor* img = ctx.new_tensor(DType::F32, {width, 4});
    Tensor* cap = ctx.new_tensor(DType::F32, {zc.caption_dim, 4});
    Tensor* t = ctx.new_tensor(DType::F32, {1});
    const models::ZImageRope rope = models::z_image_rope(zc, 4, 2, 2);
    const int64_t tokens = static_cast<int64_t>(rope.cos.size()) / (zc.head_dim / 2);
    Tensor* r = ctx.new_tensor(DType::F32, {zc.head_dim / 2, tokens});
    models::z_image_forward(nn::Scope(ctx, w, ""), zc, img, cap, t, r, r);
    w.save_safetensors(f.dit);
  }
  {
    nn::RandomWeights w(DType::F16, 32);
    Tensor* ids = ctx.new_tensor(DType::I32, {4});
    Tensor* r = ctx.new_tensor(DType::F32, {lc.head_dim / 2, 4});
    Tensor* mask = ctx.new_tensor(DType::F32, {4, 4});
    models::llm_forward(nn::Scope(ctx, w, ""), lc, ids, r, r, mask, {lc.layers});
    w.save_safetensors(f.llm);
  }
  write_tiny_flux_vae(f.vae, 33);
  std::ofstream(f.tokenizer) << tiny_bpe_tokenizer_json();
  return f;
}

}  // namespace sd::pipeline::test
