#include "api/tokenize.h"

#include "pipeline/families/tokenizers.h"

namespace sd::api {

std::vector<int> tokenize_text(const TokenizeOptions& options) {
  return pipeline::find_llm_tokenizer(options.tokenizer, "", options.llm)->encode(options.text);
}

std::string token_line(const std::vector<int>& ids) {
  std::string line;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i) line += ' ';
    line += std::to_string(ids[i]);
  }
  return line + "\n";
}

}  // namespace sd::api
