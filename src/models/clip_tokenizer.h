// CLIP's byte-level BPE tokenizer (Radford et al. 2021, "Learning Transferable Visual
// Models From Natural Language Supervision"), as the SD1.x/SD2.x text encoders read it.
//
// The vocabulary is fully determined by CLIP's merge list: the 256 byte symbols, the same
// with the end-of-word mark "</w>", one token per merge (48,894 of them), then
// <|startoftext|> and <|endoftext|>: 49,408 ids. The merge list comes from OpenAI's
// `bpe_simple_vocab_16e6.txt.gz` or from a diffusers folder's `tokenizer/merges.txt`.
//
// Text handling follows stable-diffusion.cpp rather than the Python original, so the same
// prompt gives the same ids: whitespace runs become one space, the text is trimmed and
// ASCII-lowercased (no ftfy, no Unicode case folding), and the pre-tokenizer's letter and
// digit classes are ASCII only (an accented letter splits a word like punctuation does).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace sd::models {

inline constexpr int kClipBosToken = 49406;  // <|startoftext|>
inline constexpr int kClipEosToken = 49407;  // <|endoftext|>
inline constexpr int kClipVocabSize = 49408;
// Tokens per text-encoder window: BOS + 75 prompt tokens + EOS.
inline constexpr int kClipChunkLength = 77;

// The file's name, as OpenAI's CLIP repository publishes it (a copy is built in).
inline constexpr const char* kClipVocabFileName = "bpe_simple_vocab_16e6.txt.gz";

// Finds CLIP's merge list. Order: `explicit_path` (a flag), the SD_CLIP_VOCAB environment
// variable, `model_dir`/tokenizer/merges.txt (a diffusers folder), the user cache
// ($XDG_CACHE_HOME or ~/.cache)/sd-engine/bpe_simple_vocab_16e6.txt.gz. "" when none of
// them exists (the caller then uses the built-in copy, models/embedded_vocab.h); an explicit
// path or SD_CLIP_VOCAB that does not exist is an sd::Error (never silently skipped).
// Nothing is downloaded.
std::string find_clip_vocab(const std::string& explicit_path, const std::string& model_dir);

class ClipTokenizer {
 public:
  // Reads a merge list: gzip (bpe_simple_vocab_16e6.txt.gz) or plain text (merges.txt).
  // Throws sd::Error naming the file when it is unreadable or too short.
  static ClipTokenizer from_file(const std::string& path);
  // Builds the vocabulary from merge-list text: an optional "#version" header line, then one
  // "left right" pair per line; the first 48,894 pairs are CLIP's.
  static ClipTokenizer from_merges(std::string_view merges_text);

  // Words that stand for something other than their BPE tokens (textual-inversion
  // embeddings): found anywhere in the normalized text like <|endoftext|> is, and turned
  // into ids by `ids_of`. Listed in priority order for matches starting at one position.
  struct SpecialWords {
    std::vector<std::string> words;  // lowercase
    std::function<std::vector<int>(const std::string& word)> ids_of;
  };

  // The ids of `text` without BOS/EOS.
  std::vector<int> encode(const std::string& text, const SpecialWords* special = nullptr) const;

  // The BPE symbols of one pre-tokenized word (its bytes mapped to CLIP's printable
  // characters, "</w>" on the last symbol); exposed for tests.
  std::vector<std::string> bpe(std::string_view word) const;
  // The id of a vocabulary entry (as written in the merge list), or -1.
  int token_id(const std::string& token) const;
  // Vocabulary entry of an id, "" when out of range.
  const std::string& token_text(int id) const;
  int64_t vocab_size() const { return static_cast<int64_t>(vocab_.size()); }

 private:
  ClipTokenizer() = default;

  std::vector<std::string> byte_symbol_;  // byte -> UTF-8 of its printable stand-in
  std::unordered_map<std::string, int> encoder_;
  std::vector<std::string> vocab_;
  std::unordered_map<std::string, int> merge_rank_;  // "left right" -> rank
};

// sd.cpp's text normalization: whitespace runs -> one space, trimmed, ASCII lowercase.
std::string clip_normalize(const std::string& text);
// CLIP's pre-tokenizer pattern, implemented by hand with sd.cpp's ASCII classes:
//   's|'t|'re|'ve|'m|'ll|'d|[a-z]+|[0-9]|[^\s a-z 0-9]+
// on already normalized text.
std::vector<std::string> clip_pre_tokenize(std::string_view text);

// Token ids in whole 77-token windows with one weight per token.
struct TokenChunks {
  std::vector<int> ids;
  std::vector<float> weights;
  int64_t chunk_count() const { return static_cast<int64_t>(ids.size()) / kClipChunkLength; }
};

// Wraps prompt tokens into windows as sd.cpp does: up to 75 tokens fit one window
// (BOS, tokens, EOS, then `pad_id` up to 77); longer prompts fill consecutive windows of
// 75, each with its own BOS/EOS and padding. BOS, EOS and padding get weight 1.
TokenChunks pad_to_chunks(const std::vector<int>& ids, const std::vector<float>& weights,
                          int pad_id);

}  // namespace sd::models
