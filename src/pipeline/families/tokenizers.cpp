#include "pipeline/families/tokenizers.h"

#include <string>

#include "weights/model_loader.h"

namespace sd::pipeline {

namespace {

// A diffusers folder keeps its tokenizers beside tokenizer/: the folder above it.
std::string model_folder(const ModelFiles& files) {
  const std::string& dir = files.loader.tokenizer_dir();
  return dir.empty() ? std::string() : dir + "/..";
}

}  // namespace

std::shared_ptr<const models::ClipTokenizer> clip_tokenizer(const ModelFiles& files) {
  const std::string vocab = models::find_clip_vocab(files.options.clip_vocab, model_folder(files));
  return std::make_shared<const models::ClipTokenizer>(models::ClipTokenizer::from_file(vocab));
}

std::shared_ptr<const models::T5Tokenizer> t5_tokenizer(const ModelFiles& files) {
  const std::string vocab = models::find_t5_tokenizer(files.options.t5_tokenizer,
                                                      model_folder(files), files.options.t5xxl);
  return std::make_shared<const models::T5Tokenizer>(models::T5Tokenizer::from_file(vocab));
}

}  // namespace sd::pipeline
