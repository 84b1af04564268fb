#include "models/prompt_attention.h"

#include <charconv>
#include <cmath>

#include "tensor/error.h"

namespace sd::models {

namespace {

bool is_word_char(unsigned char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}
bool is_digit_or_dot(char c) {
  return c == '.' || (c >= '0' && c <= '9');
}

// One token of the emphasis grammar at the start of `s` (sd.cpp's alternation, in order):
//   \( \) \[ \] \\ \  ( [  :<number>)  ) ]  BREAK  <plain run>  :  B
// `number` receives the weight text of ":<number>)". Every input starts some token, so the
// scan never skips text.
size_t next_token(std::string_view s, std::string_view& number) {
  number = {};
  const char c = s[0];
  if (c == '\\') {
    if (s.size() > 1 && (s[1] == '(' || s[1] == ')' || s[1] == '[' || s[1] == ']' || s[1] == '\\'))
      return 2;
    return 1;
  }
  if (c == '(' || c == '[' || c == ')' || c == ']') return 1;
  if (c == ':') {
    size_t i = 1;
    if (i < s.size() && (s[i] == '+' || s[i] == '-')) ++i;
    const size_t digits = i;
    while (i < s.size() && is_digit_or_dot(s[i])) ++i;
    if (i > digits && i < s.size() && s[i] == ')') {
      number = s.substr(1, i - 1);
      return i + 1;
    }
    return 1;
  }
  if (c == 'B') {
    // Each token restarts the search on the remaining text, so a 'B' always sits at a word
    // boundary; only the end of "BREAK" is checked.
    if (s.substr(0, 5) == "BREAK" && (s.size() == 5 || !is_word_char(s[5]))) return 5;
    return 1;
  }
  size_t i = 1;
  while (i < s.size() && s[i] != '\\' && s[i] != '(' && s[i] != ')' && s[i] != '[' && s[i] != ']' &&
         s[i] != ':' && s[i] != 'B')
    ++i;
  return i;
}

// std::stof's reading of "[+-]?[.0-9]+": the longest number prefix; no number or one out of
// float range is an error (sd.cpp would abort there).
float parse_weight(std::string_view number) {
  const char* begin = number.data();
  const char* end = begin + number.size();
  if (begin != end && *begin == '+') ++begin;  // from_chars takes '-' only
  float value = 0.0f;
  const auto [ptr, ec] = std::from_chars(begin, end, value, std::chars_format::fixed);
  if (ec != std::errc() || !std::isfinite(value))
    throw Error(format("prompt weight ':%.*s)' is not a number (write e.g. '(word:1.2)')",
                       static_cast<int>(number.size()), number.data()));
  if (value != 0.0f && std::fabs(value) < 1.17549435e-38f)  // strtof's ERANGE: stof throws
    throw Error(format("prompt weight ':%.*s)' is too small for a float",
                       static_cast<int>(number.size()), number.data()));
  return value;
}

}  // namespace

std::vector<PromptPiece> parse_prompt_attention(const std::string& text) {
  const float round_multiplier = 1.1f;
  const float square_multiplier = 1 / 1.1f;
  std::vector<PromptPiece> res;
  std::vector<size_t> round_open, square_open;
  auto multiply_from = [&](size_t start, float m) {
    for (size_t p = start; p < res.size(); ++p) res[p].weight *= m;
  };

  std::string_view rest(text);
  while (!rest.empty()) {
    std::string_view number;
    const size_t len = next_token(rest, number);
    const std::string_view tok = rest.substr(0, len);
    rest.remove_prefix(len);

    if (tok == "(") {
      round_open.push_back(res.size());
    } else if (tok == "[") {
      square_open.push_back(res.size());
    } else if (!number.empty()) {
      const float w = parse_weight(number);
      if (!round_open.empty()) {  // without an open '(' the ":1.2)" is dropped
        multiply_from(round_open.back(), w);
        round_open.pop_back();
      }
    } else if (tok == ")" && !round_open.empty()) {
      multiply_from(round_open.back(), round_multiplier);
      round_open.pop_back();
    } else if (tok == "]" && !square_open.empty()) {
      multiply_from(square_open.back(), square_multiplier);
      square_open.pop_back();
    } else if (tok == "\\(") {
      res.push_back({"(", 1.0f});
    } else if (tok == "BREAK") {
      res.push_back({"BREAK", -1.0f});
    } else {
      res.push_back({std::string(tok), 1.0f});
    }
  }
  for (size_t pos : round_open) multiply_from(pos, round_multiplier);
  for (size_t pos : square_open) multiply_from(pos, square_multiplier);

  if (res.empty()) res.push_back({"", 1.0f});
  for (size_t i = 0; i + 1 < res.size();) {
    if (res[i].weight == res[i + 1].weight) {
      res[i].text += res[i + 1].text;
      res.erase(res.begin() + static_cast<ptrdiff_t>(i) + 1);
    } else {
      ++i;
    }
  }
  return res;
}

TokenChunks tokenize_prompt(const ClipTokenizer& tokenizer, const std::string& prompt, int pad_id,
                            const ClipTokenizer::SpecialWords* special) {
  std::vector<int> ids;
  std::vector<float> weights;
  constexpr size_t kPerWindow = kClipChunkLength - 2;
  for (const PromptPiece& piece : parse_prompt_attention(prompt)) {
    if (piece.is_break()) {
      // sd.cpp fills with EOS (not the pad id) up to the next window boundary.
      const size_t fill = (kPerWindow - ids.size() % kPerWindow) % kPerWindow;
      ids.insert(ids.end(), fill, kClipEosToken);
      weights.insert(weights.end(), fill, 1.0f);
      continue;
    }
    const std::vector<int> piece_ids = tokenizer.encode(piece.text, special);
    ids.insert(ids.end(), piece_ids.begin(), piece_ids.end());
    weights.insert(weights.end(), piece_ids.size(), piece.weight);
  }
  return pad_to_chunks(ids, weights, pad_id);
}

}  // namespace sd::models
