// GPT-2's byte-level BPE tokenizer (Radford et al. 2019, "Language Models are Unsupervised
// Multitask Learners"; Sennrich et al. 2016 for BPE) as the Qwen2/2.5/3, Llama 3 and Mistral
// "tekken" vocabularies use it: the text encoders of Qwen-Image (Qwen2.5-VL), Z-Image (Qwen3)
// and FLUX.2 (Mistral) read their prompts through it.
//
// It is read from a Hugging Face `tokenizer.json` (`model.type` BPE) or from a GGUF file's
// tokenizer metadata, and gives the ids Hugging Face's `tokenizers` gives:
//   1. added tokens (<|im_start|>, <|endoftext|>, <think>, ...) are cut out of the raw text,
//      the longest one first where several start at the same place (the reference matches
//      tokens marked "normalized" after step 2; no byte-level family has such a token);
//   2. the text between them is NFC-normalized when the file says so (Qwen's does);
//   3. the pre-tokenizer's regex, read from the file, splits it into words (PCRE2 with
//      Unicode classes; `\s` is Unicode White_Space, as in the Oniguruma engine the
//      reference uses);
//   4. each word's bytes become GPT-2's printable byte symbols and are merged pairwise,
//      lowest merge rank first (leftmost among equals).
//
// Input that is not valid UTF-8, which the reference cannot be given at all (it takes
// Unicode strings), is accepted: the regex never matches an invalid byte, so each run of
// them becomes a word of its own, and its bytes go through the byte symbols like any others.
// decode(encode(x)) == x therefore holds for every byte string (that NFC, where the file
// asks for it, leaves alone), and decode returns raw bytes: a cut through a multi-byte
// character stays cut, where the reference shows U+FFFD.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace sd::models {

inline constexpr const char* kBpeTokenizerFileName = "tokenizer.json";
inline constexpr const char* kTekkenFileName = "tekken.json";  // Mistral's (tekken_vocab.h)

// Which vocabulary a tokenizer search is for: its name in messages, the environment
// variable that names its tokenizer.json, and its folder in the user cache.
struct BpeVocabSearch {
  const char* name;
  const char* env;
  const char* cache_folder;
};
inline constexpr BpeVocabSearch kQwenVocab{"Qwen", "SD_QWEN_TOKENIZER", "qwen"};
inline constexpr BpeVocabSearch kMistralVocab{"Mistral", "SD_MISTRAL_TOKENIZER", "mistral"};

// Finds the tokenizer file of `which` vocabulary. Order: `explicit_path` (a flag), the
// environment variable (SD_QWEN_TOKENIZER, ...), `model_dir`/tokenizer/ (a diffusers folder),
// the folder of `llm_file`, the user cache ($XDG_CACHE_HOME or ~/.cache)/sd-engine/
// <cache_folder>/; in each folder tokenizer.json, else tekken.json (Mistral's own file). "" when
// none of them exists (for Qwen the caller then uses the built-in tokenizer,
// models/embedded_vocab.h); an explicit path or environment variable that does not exist is an
// sd::Error. Nothing is downloaded.
std::string find_bpe_tokenizer(const BpeVocabSearch& which, const std::string& explicit_path,
                               const std::string& model_dir, const std::string& llm_file);

// The tokenizer keys of a GGUF file (llama.cpp's names). The weights layer fills this from
// io::GgufFile (models/ does not read files): tokenizer.ggml.model, .pre, .tokens, .merges
// and .token_type.
struct BpeGgufVocab {
  std::string model;                 // must be "gpt2" (byte-level BPE)
  std::string pre;                   // "qwen2", "llama-bpe", "tekken", ...: picks the regex
  std::vector<std::string> tokens;   // byte-symbol text; the index is the id
  std::vector<std::string> merges;   // "left right", in rank order
  std::vector<int32_t> token_types;  // 1 normal, 3 control, 4 user-defined...; may be empty
};

class BpeTokenizer {
 public:
  // Reads a tokenizer.json, or Mistral's tekken.json (tekken_vocab.h); throws sd::Error
  // naming the file and the problem.
  static BpeTokenizer from_file(const std::string& path);
  static BpeTokenizer from_json(std::string_view json_text);
  // GGUF files carry no regex: `pre` names one of a small table (qwen2, llama-bpe, tekken,
  // gpt-2); an unknown name is an sd::Error. Control (3) and user-defined (4) tokens are
  // the added tokens.
  static BpeTokenizer from_gguf_metadata(const BpeGgufVocab& vocab);

  // The ids of `utf8`, without BOS/EOS or any template.
  std::vector<int> encode(const std::string& utf8) const;
  // The bytes the ids stand for; added tokens give their text. Throws sd::Error for an id
  // outside the vocabulary.
  std::string decode(const std::vector<int>& ids) const;

  // The words the pre-tokenizer makes of text without added tokens (after normalization,
  // before byte symbols); exposed for tests.
  std::vector<std::string> pre_tokenize(std::string_view utf8) const;
  // The id of an added token's text or of a vocabulary entry as the file writes it (byte
  // symbols: " hello" is "Ġhello"), or -1.
  int token_id(std::string_view token) const;
  // The file's text of an id ("" when out of range).
  const std::string& token_text(int id) const;
  // One more than the largest id, added tokens included.
  int64_t vocab_size() const { return static_cast<int64_t>(tokens_.size()); }

 private:
  struct Regex;
  struct WordCache;
  // One step of the pre-tokenizer: a ByteLevel step may put a space in front of each piece;
  // then the regex, if any, cuts each piece into its matches and the text between them.
  struct Stage {
    std::shared_ptr<const Regex> regex;
    bool add_prefix_space = false;
  };
  struct AddedToken {
    std::string content;
    int id = 0;
    bool lstrip = false;
    bool rstrip = false;
  };
  struct Merge {
    int rank = 0;
    int result = 0;
  };

  BpeTokenizer();
  void set_token(int id, const std::string& text, bool added);
  void add_merge(size_t rank, std::string_view left, std::string_view right);
  void add_added_token(AddedToken token);
  void add_split(const std::string& pattern, bool literal);
  void finish();

  void encode_text(std::string_view text, std::vector<int>& ids) const;
  void encode_word(std::string_view word, std::vector<int>& ids) const;
  void merge_word(std::string_view word, std::vector<int>& ids) const;

  std::vector<std::string> tokens_;  // id -> byte-symbol text, or an added token's text
  std::vector<uint8_t> is_added_;
  std::unordered_map<std::string, int> vocab_;  // BPE tokens only
  std::unordered_map<std::string, int> added_ids_;
  std::unordered_map<uint64_t, Merge> merges_;  // (left id << 32 | right id) -> merge
  std::array<int, 256> byte_id_{};              // -1: the vocabulary lacks the byte
  std::vector<AddedToken> added_;
  std::array<std::vector<int>, 256> added_by_first_byte_;  // indices into added_, longest first
  std::vector<Stage> stages_;
  bool nfc_ = false;
  bool ignore_merges_ = false;
  int unk_id_ = -1;
  std::shared_ptr<WordCache> cache_;
};

}  // namespace sd::models
