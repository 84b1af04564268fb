#include "models/embeddings.h"

#include <algorithm>
#include <filesystem>

#include "tensor/error.h"

namespace sd::models {

namespace {

std::string ascii_lower(std::string s) {
  for (char& c : s)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return s;
}

// (stem, path) of the embedding files, sorted by file name.
std::vector<std::pair<std::string, std::string>> embedding_files(const std::string& dir) {
  namespace fs = std::filesystem;
  std::vector<std::pair<std::string, std::string>> files;
  std::error_code ec;
  if (dir.empty() || !fs::is_directory(dir, ec)) return files;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    std::error_code type_ec;
    if (!it->is_regular_file(type_ec)) continue;
    const fs::path& p = it->path();
    const std::string ext = p.extension().string();
    if (ext != ".safetensors" && ext != ".pt" && ext != ".ckpt" && ext != ".gguf") continue;
    files.emplace_back(p.stem().string(), p.string());
  }
  std::sort(files.begin(), files.end(),
            [](const auto& a, const auto& b) { return a.second < b.second; });
  return files;
}

}  // namespace

std::map<std::string, std::string> list_embedding_files(const std::string& dir) {
  std::vector<std::pair<std::string, std::string>> files = embedding_files(dir);
  // sd.cpp keys its map by the original stem and lowercases afterwards, so of "Foo" and
  // "foo" the byte-wise later stem wins.
  std::stable_sort(files.begin(), files.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  std::map<std::string, std::string> by_word;
  for (const auto& [stem, path] : files) by_word[ascii_lower(stem)] = path;
  return by_word;
}

std::vector<std::string> embedding_words(const std::string& dir) {
  std::vector<std::pair<std::string, std::string>> files = embedding_files(dir);
  std::stable_sort(files.begin(), files.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<std::string> words;
  for (const auto& [stem, path] : files) {
    std::string w = ascii_lower(stem);
    if (!w.empty() && std::find(words.begin(), words.end(), w) == words.end())
      words.push_back(std::move(w));
  }
  return words;
}

std::optional<size_t> pick_embedding_tensor(const std::vector<EmbeddingTensorShape>& tensors,
                                            int64_t hidden) {
  std::optional<size_t> pick;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const EmbeddingTensorShape& t = tensors[i];
    // A vector or a [rows, hidden] matrix; 3-D/4-D tensors are no embedding.
    if (t.n_dims >= 1 && t.n_dims <= 2 && t.ne[0] == hidden) pick = i;
  }
  return pick;
}

std::vector<int> CustomEmbeddings::add(const std::string& word, const std::vector<float>& values) {
  SD_CHECK(!values.empty() && values.size() % static_cast<size_t>(hidden_) == 0,
           "[embeddings] '%s': %zu values are not whole rows of %lld", word.c_str(), values.size(),
           static_cast<long long>(hidden_));
  std::vector<int> ids;
  const int64_t first = vocab_size_ + rows();
  const int64_t count = static_cast<int64_t>(values.size()) / hidden_;
  for (int64_t i = 0; i < count; ++i) ids.push_back(static_cast<int>(first + i));
  table_.insert(table_.end(), values.begin(), values.end());
  ids_[word] = ids;
  return ids;
}

const std::vector<int>* CustomEmbeddings::find(const std::string& word) const {
  auto it = ids_.find(word);
  return it == ids_.end() ? nullptr : &it->second;
}

}  // namespace sd::models
