// T5's tokenizer: a SentencePiece unigram model (Kudo 2018, "Subword Regularization"), read
// from the Hugging Face `tokenizer.json` that T5 repositories ship beside the weights
// (`model.type` Unigram, `model.vocab` as [piece, score] pairs whose index is the id).
//
// Text handling follows stable-diffusion.cpp so the same prompt gives the same ids: runs of
// spaces become one, the special tokens <pad>, </s> and <unk> are cut out of the text, the
// Metaspace pre-tokenizer writes every space as "▁" (plus one in front), and the best
// segmentation by summed piece scores is found with the Viterbi algorithm, an unknown
// character costing the lowest score minus 10. No NFKC normalization (sd.cpp has none).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace sd::models {

inline constexpr int kT5PadToken = 0;  // <pad>
inline constexpr int kT5EosToken = 1;  // </s>
// Tokens per T5 window in FLUX.1's conditioning (sd.cpp: chunk_len 256).
inline constexpr int kT5ChunkLength = 256;

inline constexpr const char* kT5TokenizerFileName = "tokenizer.json";

// Finds T5's tokenizer.json. Order: `explicit_path`, the SD_T5_TOKENIZER environment
// variable, `model_dir`/tokenizer_2/tokenizer.json (a diffusers FLUX folder),
// `model_dir`/tokenizer_3/ (SD3), a tokenizer.json next to `t5_file`, the user cache
// ($XDG_CACHE_HOME or ~/.cache)/sd-engine/t5/tokenizer.json. Throws an sd::Error naming
// the file, where to get it and where to put it when none exists.
// `umt5`: umT5's vocabulary instead (Wan; 256384 pieces, google/umt5-xxl), looked for as
// SD_UMT5_TOKENIZER, next to the file and in the cache's umt5/ folder.
std::string find_t5_tokenizer(const std::string& explicit_path, const std::string& model_dir,
                              const std::string& t5_file, bool umt5 = false);

class T5Tokenizer {
 public:
  // Reads tokenizer.json; throws sd::Error naming the file when it is not a unigram model.
  static T5Tokenizer from_file(const std::string& path);
  static T5Tokenizer from_json(std::string_view json_text);

  // The ids of `text`, without </s>.
  std::vector<int> encode(const std::string& text) const;
  // The pieces the ids stand for, for tests and logs.
  std::vector<std::string> encode_pieces(const std::string& text) const;

  int64_t vocab_size() const { return static_cast<int64_t>(pieces_.size()); }
  int unk_id() const { return unk_id_; }
  const std::string& piece(int id) const { return pieces_.at(static_cast<size_t>(id)); }

 private:
  T5Tokenizer() = default;
  // Viterbi over one pre-tokenized run of text: (piece start, id) pairs in order.
  std::vector<std::pair<size_t, int>> segment(std::string_view text) const;
  void encode_into(const std::string& text, std::vector<int>& ids,
                   std::vector<std::string>* pieces) const;

  std::vector<std::string> pieces_;
  std::vector<float> scores_;
  std::unordered_map<std::string, int> ids_;
  size_t max_piece_bytes_ = 0;
  float min_score_ = 0.0f;
  int unk_id_ = 2;
  std::string replacement_ = "\xE2\x96\x81";  // U+2581 "▁"
  bool add_prefix_space_ = true;
};

// T5 input as sd.cpp builds it for FLUX.1: the prompt's ids (emphasis parsed, one weight
// per id), </s>, then <pad> up to a multiple of kT5ChunkLength; a longer prompt fills more
// windows, each ending in </s> and padded alike.
struct T5Chunks {
  std::vector<int> ids;
  std::vector<float> weights;
};
T5Chunks t5_tokenize_prompt(const T5Tokenizer& tokenizer, const std::string& prompt,
                            int chunk_length = kT5ChunkLength);

}  // namespace sd::models
