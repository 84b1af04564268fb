#include "pipeline/families/tokenizers.h"

#include <cstdlib>
#include <optional>
#include <string>

#include "io/gguf.h"
#include "models/embedded_vocab.h"
#include "tensor/error.h"
#include "weights/model_loader.h"

namespace sd::pipeline {

namespace {

// A diffusers folder keeps its tokenizers beside tokenizer/: the folder above it.
std::string model_folder(const ModelFiles& files) {
  const std::string& dir = files.loader.tokenizer_dir();
  return dir.empty() ? std::string() : dir + "/..";
}

// The tokenizer metadata of a GGUF file (llama.cpp's keys), or none.
std::optional<models::BpeGgufVocab> gguf_vocab(const std::string& path) {
  if (path.size() < 5 || path.compare(path.size() - 5, 5, ".gguf") != 0) return std::nullopt;
  const io::GgufFile file = io::GgufFile::open(path);
  if (!file.find_value("tokenizer.ggml.tokens")) return std::nullopt;
  models::BpeGgufVocab v;
  v.model = file.get_string("tokenizer.ggml.model");
  if (const io::GgufValue* pre = file.find_value("tokenizer.ggml.pre")) v.pre = pre->as_string();
  v.tokens = file.value("tokenizer.ggml.tokens").as_string_array();
  if (const io::GgufValue* m = file.find_value("tokenizer.ggml.merges"))
    v.merges = m->as_string_array();
  if (const io::GgufValue* t = file.find_value("tokenizer.ggml.token_type"))
    for (int64_t type : t->as_i64_array()) v.token_types.push_back(static_cast<int32_t>(type));
  return v;
}

// The built-in vocabularies, inflated and parsed once per process (Qwen's takes ~0.5 s);
// tokenizers are immutable and shared.
std::shared_ptr<const models::ClipTokenizer> builtin_clip() {
  static const auto kClip = std::make_shared<const models::ClipTokenizer>(
      models::ClipTokenizer::from_merges(models::embedded_clip_merges()));
  return kClip;
}

std::shared_ptr<const models::BpeTokenizer> builtin_qwen() {
  static const auto kQwen = std::make_shared<const models::BpeTokenizer>(
      models::BpeTokenizer::from_json(models::embedded_qwen_tokenizer_json()));
  return kQwen;
}

}  // namespace

std::shared_ptr<const models::ClipTokenizer> clip_tokenizer(const ModelFiles& files) {
  const std::string vocab = models::find_clip_vocab(files.options.clip_vocab, model_folder(files));
  if (vocab.empty()) return builtin_clip();  // none given or placed
  return std::make_shared<const models::ClipTokenizer>(models::ClipTokenizer::from_file(vocab));
}

std::shared_ptr<const models::T5Tokenizer> t5_tokenizer(const ModelFiles& files, bool umt5) {
  const std::string vocab = models::find_t5_tokenizer(
      files.options.t5_tokenizer, model_folder(files), files.options.t5xxl, umt5);
  return std::make_shared<const models::T5Tokenizer>(models::T5Tokenizer::from_file(vocab));
}

std::shared_ptr<const models::BpeTokenizer> find_llm_tokenizer(
    const std::string& explicit_path, const std::string& model_dir, const std::string& llm_file,
    const models::BpeVocabSearch& which) {
  // A tokenizer.json the user points at wins; then the one a GGUF file carries (it belongs
  // to its weights); then the folders and the cache.
  const char* env = std::getenv(which.env);
  const bool pointed = !explicit_path.empty() || (env && *env);
  if (!pointed)
    if (std::optional<models::BpeGgufVocab> v = gguf_vocab(llm_file))
      return std::make_shared<const models::BpeTokenizer>(
          models::BpeTokenizer::from_gguf_metadata(*v));
  const std::string path = models::find_bpe_tokenizer(which, explicit_path, model_dir, llm_file);
  if (!path.empty())
    return std::make_shared<const models::BpeTokenizer>(models::BpeTokenizer::from_file(path));
  // None given or placed.
  if (&which == &models::kQwenVocab) return builtin_qwen();
  fail(
      "no %s tokenizer found: the --llm file carries none (a GGUF from llama.cpp does) and no "
      "%s was placed. Take the one of the text encoder's Hugging Face repository (FLUX.2 dev: "
      "black-forest-labs/FLUX.2-dev, tokenizer/tokenizer.json; or Mistral's own %s) and put "
      "it next to the --llm file or in ~/.cache/sd-engine/%s/, or name it with %s",
      which.name, models::kBpeTokenizerFileName, models::kTekkenFileName, which.cache_folder,
      which.env);
}

std::shared_ptr<const models::BpeTokenizer> llm_tokenizer(const ModelFiles& files,
                                                          const models::BpeVocabSearch& which) {
  return find_llm_tokenizer(files.options.llm_tokenizer, model_folder(files), files.options.llm,
                            which);
}

}  // namespace sd::pipeline
