// Prompt emphasis syntax (AUTOMATIC1111's webui, as stable-diffusion.cpp parses it) and the
// weighted tokenization built on it:
//   (text)      weight x 1.1          [text]   weight / 1.1
//   (text:1.3)  weight x 1.3          \(       a literal '('
//   BREAK       fill the current 75-token window with EOS and start the next
// Brackets nest and multiply; an unclosed bracket applies to the end of the prompt; an
// unopened ')' or ']' is plain text. sd.cpp compatibility: only "\(" loses its backslash
// ("\)", "\[", "\]" and "\\" stay as written), and "BREAK" counts wherever a capital B
// starts it (also "xBREAK"), but not inside brackets, where it is weighted text.
#pragma once

#include <string>
#include <vector>

#include "models/clip_tokenizer.h"

namespace sd::models {

struct PromptPiece {
  std::string text;
  float weight = 1.0f;
  // sd.cpp marks BREAK as the text "BREAK" with weight -1.
  bool is_break() const { return text == "BREAK" && weight == -1.0f; }
  bool operator==(const PromptPiece&) const = default;
};

// Splits `text` into runs of equal weight (adjacent equal weights merged). Never empty:
// an empty prompt is one empty piece of weight 1. Throws sd::Error for a weight that is
// not a finite float, e.g. "(x:.)" or "(x:1e99)" written out in digits.
std::vector<PromptPiece> parse_prompt_attention(const std::string& text);

// The prompt as text-encoder input: emphasis parsed, each piece tokenized with its
// weight, BREAKs padded with EOS to a 75-token boundary, then wrapped into 77-token
// windows with `pad_id` (pad_to_chunks).
TokenChunks tokenize_prompt(const ClipTokenizer& tokenizer, const std::string& prompt, int pad_id,
                            const ClipTokenizer::SpecialWords* special = nullptr);

}  // namespace sd::models
