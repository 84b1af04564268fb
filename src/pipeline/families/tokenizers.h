// The tokenizers families read prompts with, found as the user placed them: a flag or
// environment variable, the model's own folder, the user cache (models/*_tokenizer.h).
#pragma once

#include <memory>
#include <string>

#include "models/bpe_tokenizer.h"
#include "models/clip_tokenizer.h"
#include "models/t5_tokenizer.h"
#include "pipeline/families/family.h"

namespace sd::pipeline {

std::shared_ptr<const models::ClipTokenizer> clip_tokenizer(const ModelFiles& files);
// `umt5`: umT5's vocabulary (Wan), models::find_t5_tokenizer's umt5 search.
std::shared_ptr<const models::T5Tokenizer> t5_tokenizer(const ModelFiles& files, bool umt5 = false);
// The --llm encoder's byte-level BPE tokenizer of vocabulary `which` (Qwen's, Mistral's): a
// tokenizer.json given or found (models::find_bpe_tokenizer), else the tokenizer a GGUF
// --llm file carries.
std::shared_ptr<const models::BpeTokenizer> llm_tokenizer(
    const ModelFiles& files, const models::BpeVocabSearch& which = models::kQwenVocab);
// The same search from paths: `explicit_path` (a flag), the vocabulary's environment
// variable, then the tokenizer inside a GGUF `llm_file`, then `model_dir`/tokenizer/, beside
// `llm_file`, the user cache, and last, for Qwen, the built-in tokenizer (that of every Qwen
// text encoder the families read). Mistral's is not built in: not finding one is an
// sd::Error that says where to get it and where to put it.
std::shared_ptr<const models::BpeTokenizer> find_llm_tokenizer(
    const std::string& explicit_path, const std::string& model_dir, const std::string& llm_file,
    const models::BpeVocabSearch& which = models::kQwenVocab);

}  // namespace sd::pipeline
