// The tokenizers families read prompts with, found as the user placed them: a flag or
// environment variable, the model's own folder, the user cache (models/*_tokenizer.h).
#pragma once

#include <memory>

#include "models/bpe_tokenizer.h"
#include "models/clip_tokenizer.h"
#include "models/t5_tokenizer.h"
#include "pipeline/families/family.h"

namespace sd::pipeline {

std::shared_ptr<const models::ClipTokenizer> clip_tokenizer(const ModelFiles& files);
std::shared_ptr<const models::T5Tokenizer> t5_tokenizer(const ModelFiles& files);
// The --llm encoder's byte-level BPE tokenizer: a tokenizer.json given or found
// (models::find_bpe_tokenizer), else the tokenizer a GGUF --llm file carries.
std::shared_ptr<const models::BpeTokenizer> llm_tokenizer(const ModelFiles& files);
// The same search from paths: `explicit_path` (a flag), SD_QWEN_TOKENIZER, then the
// tokenizer inside a GGUF `llm_file`, then `model_dir`/tokenizer/, beside `llm_file`, the
// user cache, and last the built-in Qwen tokenizer (the one of every Qwen text encoder the
// families read; a Mistral family will need its own).
std::shared_ptr<const models::BpeTokenizer> find_llm_tokenizer(const std::string& explicit_path,
                                                               const std::string& model_dir,
                                                               const std::string& llm_file);

}  // namespace sd::pipeline
