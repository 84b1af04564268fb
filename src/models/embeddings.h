// Textual inversion (Gal et al. 2022, "An Image is Worth One Word"): learned vectors that
// stand for a word. A file in the embeddings folder named "<word>.<ext>" holds the vectors;
// the word in a prompt is replaced by them, as extra rows of the token table with ids from
// vocab_size up. sd.cpp compatibility: words are the file stems lowercased, matched
// anywhere in the lowercased prompt (even inside longer words), and a file's vectors are
// the last tensor whose rows have the text encoder's width.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace sd::models {

// Embedding files of `dir` (extensions .safetensors, .pt, .ckpt, .gguf) by word (stem,
// lowercased). Empty when `dir` is empty or not a folder. For two files with one word the
// later in sorted file-name order wins.
std::map<std::string, std::string> list_embedding_files(const std::string& dir);

// The special words of those files in the order a tokenizer should try them (sorted by
// original stem, as sd.cpp registers them), each once.
std::vector<std::string> embedding_words(const std::string& dir);

// A stored tensor's shape as a file reader reports it (engine order, ne[0] fastest).
struct EmbeddingTensorShape {
  int n_dims = 0;
  std::array<int64_t, 4> ne{1, 1, 1, 1};
};

// Which tensor of a file holds the vectors for an encoder of width `hidden`: the last one
// whose ne[0] is `hidden`; nullopt when none is. Its row count is ne[1] (1 for a vector).
std::optional<size_t> pick_embedding_tensor(const std::vector<EmbeddingTensorShape>& tensors,
                                            int64_t hidden);

// The appended rows: vectors of every embedding used so far, and the ids they got.
class CustomEmbeddings {
 public:
  CustomEmbeddings(int64_t hidden, int64_t vocab_size) : hidden_(hidden), vocab_size_(vocab_size) {}

  // Appends `values` (f32, whole rows of `hidden`) for `word`; returns the new ids.
  std::vector<int> add(const std::string& word, const std::vector<float>& values);
  // Ids of a word added before, or null.
  const std::vector<int>* find(const std::string& word) const;

  int64_t rows() const { return static_cast<int64_t>(table_.size()) / hidden_; }
  int64_t hidden() const { return hidden_; }
  // Rows in id order: f32 [hidden, rows()].
  const std::vector<float>& table() const { return table_; }

 private:
  int64_t hidden_;
  int64_t vocab_size_;
  std::vector<float> table_;
  std::map<std::string, std::vector<int>> ids_;
};

}  // namespace sd::models
