// sd-cli -M tokenize: what a prompt becomes for an LLM text encoder, without a model. The
// ids of the text alone (no template, no BOS/EOS), so users and tests can check a
// tokenizer file against another implementation.
#pragma once

#include <string>
#include <vector>

namespace sd::api {

struct TokenizeOptions {
  std::string tokenizer;  // --tokenizer: a tokenizer.json; empty: searched as for --llm
  std::string llm;        // --llm: its GGUF tokenizer, or a tokenizer.json beside it
  std::string text;       // -p
};

// Throws sd::Error naming the tokenizer file that is missing or malformed.
std::vector<int> tokenize_text(const TokenizeOptions& options);
// The ids space-separated on one line, as -M tokenize prints them.
std::string token_line(const std::vector<int>& ids);

}  // namespace sd::api
