#include "models/t5_tokenizer.h"

#include <algorithm>
#include <cfloat>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "models/prompt_attention.h"
#include "models/tokenizer_files.h"
#include "tensor/cache_folder.h"
#include "tensor/error.h"

namespace sd::models {

namespace {

// sd.cpp's unknown-character cost: the lowest piece score minus this.
constexpr float kUnkPenalty = 10.0f;

// Bytes of the UTF-8 character starting with byte `c` (1 for stray continuation bytes).
size_t utf8_length(unsigned char c) {
  return "\1\1\1\1\1\1\1\1\1\1\1\1\2\2\3\4"[c >> 4];
}

// Runs of two or more spaces become one (sd.cpp's whole normalizer for T5).
std::string collapse_spaces(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text)
    if (c != ' ' || out.empty() || out.back() != ' ') out += c;
  return out;
}

const std::vector<std::string>& special_tokens() {
  static const std::vector<std::string> kSpecial = {"<pad>", "</s>", "<unk>"};
  return kSpecial;
}

// The Metaspace pre-tokenizer as sd.cpp applies it: the replacement in front, and before
// every piece of the text split at spaces (a trailing space makes no empty piece).
std::string metaspace(const std::string& text, const std::string& replacement, bool prefix) {
  std::string out = prefix ? replacement : std::string();
  std::stringstream ss(text);
  std::string word;
  bool first = true;
  while (std::getline(ss, word, ' ')) {
    if (!first) out += replacement;
    out += word;
    first = false;
  }
  return out;
}

}  // namespace

std::string find_t5_tokenizer(const std::string& explicit_path, const std::string& model_dir,
                              const std::string& t5_file, bool umt5) {
  const char* name = umt5 ? "umT5" : "T5";
  const char* variable = umt5 ? "SD_UMT5_TOKENIZER" : "SD_T5_TOKENIZER";
  if (!explicit_path.empty()) {
    if (file_exists(explicit_path)) return explicit_path;
    fail("%s tokenizer '%s' not found (the given path must name %s's %s)", name,
         explicit_path.c_str(), name, kT5TokenizerFileName);
  }
  if (const char* env = std::getenv(variable); env && *env) {
    if (file_exists(env)) return env;
    fail("%s='%s': no such file (unset it or point it at %s's %s)", variable, env, name,
         kT5TokenizerFileName);
  }
  namespace fs = std::filesystem;
  if (!model_dir.empty() && !umt5) {
    for (const char* sub : {"tokenizer_2", "tokenizer_3"}) {
      const std::string p = (fs::path(model_dir) / sub / kT5TokenizerFileName).string();
      if (file_exists(p)) return p;
    }
  }
  if (!t5_file.empty()) {
    const std::string p = (fs::path(t5_file).parent_path() / kT5TokenizerFileName).string();
    if (file_exists(p)) return p;
  }
  const std::string cached =
      cache_folder_path(std::string(umt5 ? "umt5/" : "t5/") + kT5TokenizerFileName);
  if (!cached.empty() && file_exists(cached)) return cached;
  const std::string where = cached.empty() ? std::string("~/.cache/sd-engine/") +
                                                 (umt5 ? "umt5/" : "t5/") + kT5TokenizerFileName
                                           : cached;
  if (umt5)
    fail(
        "umT5 tokenizer not found: Wan's umT5-XXL text encoder needs umT5's %s (Hugging Face, "
        "google/umt5-xxl, file tokenizer.json; T5's is another vocabulary). Save it as %s, put "
        "it next to the --t5xxl file, or set SD_UMT5_TOKENIZER to its path",
        kT5TokenizerFileName, where.c_str());
  fail(
      "T5 tokenizer not found: the T5-XXL text encoder needs T5's %s (Hugging Face, "
      "google/t5-v1_1-xxl, file tokenizer.json; a diffusers FLUX.1 folder has it as "
      "tokenizer_2/tokenizer.json). Save it as %s, put it next to the --t5xxl file, or set "
      "SD_T5_TOKENIZER to its path",
      kT5TokenizerFileName, where.c_str());
}

T5Tokenizer T5Tokenizer::from_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  SD_CHECK(in.good(), "T5 tokenizer '%s' cannot be read", path.c_str());
  std::stringstream ss;
  ss << in.rdbuf();
  try {
    return from_json(ss.str());
  } catch (const Error& e) {
    fail("T5 tokenizer '%s': %s", path.c_str(), e.what());
  }
}

T5Tokenizer T5Tokenizer::from_json(std::string_view json_text) {
  using nlohmann::json;
  json data = json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  SD_CHECK(!data.is_discarded() && data.is_object(), "not a JSON tokenizer file");
  SD_CHECK(data.contains("model") && data["model"].is_object(),
           "no \"model\" entry: not a Hugging Face tokenizer.json");
  const json& model = data["model"];
  const std::string type = model.value("type", std::string());
  SD_CHECK(type == "Unigram",
           "model type \"%s\", expected \"Unigram\" (T5's SentencePiece tokenizer.json; a "
           "CLIP or BPE tokenizer does not fit)",
           type.c_str());
  SD_CHECK(model.contains("vocab") && model["vocab"].is_array() && !model["vocab"].empty(),
           "the unigram model has no vocabulary");

  T5Tokenizer t;
  if (model.contains("unk_id") && model["unk_id"].is_number_integer())
    t.unk_id_ = model["unk_id"].get<int>();
  // The Metaspace pre-tokenizer, alone or inside a Sequence.
  const json* meta = nullptr;
  if (data.contains("pre_tokenizer") && data["pre_tokenizer"].is_object()) {
    const json& pre = data["pre_tokenizer"];
    if (pre.value("type", std::string()) == "Metaspace") meta = &pre;
    if (pre.contains("pretokenizers") && pre["pretokenizers"].is_array())
      for (const json& p : pre["pretokenizers"])
        if (p.is_object() && p.value("type", std::string()) == "Metaspace") meta = &p;
  }
  if (meta) {
    if ((*meta).contains("replacement") && (*meta)["replacement"].is_string())
      t.replacement_ = (*meta)["replacement"].get<std::string>();
    if ((*meta).contains("add_prefix_space") && (*meta)["add_prefix_space"].is_boolean())
      t.add_prefix_space_ = (*meta)["add_prefix_space"].get<bool>();
    else if ((*meta).contains("prepend_scheme") && (*meta)["prepend_scheme"].is_string())
      t.add_prefix_space_ = (*meta)["prepend_scheme"].get<std::string>() != "never";
  }

  const json& vocab = model["vocab"];
  t.pieces_.reserve(vocab.size());
  t.scores_.reserve(vocab.size());
  t.min_score_ = FLT_MAX;
  for (size_t i = 0; i < vocab.size(); ++i) {
    const json& item = vocab[i];
    SD_CHECK(item.is_array() && item.size() == 2 && item[0].is_string() && item[1].is_number(),
             "vocabulary entry %zu is not a [piece, score] pair", i);
    std::string piece = item[0].get<std::string>();
    const float score = item[1].get<float>();
    t.min_score_ = std::min(t.min_score_, score);
    t.max_piece_bytes_ = std::max(t.max_piece_bytes_, piece.size());
    // The first of equal pieces wins, as a trie built from sorted (piece, id) pairs finds.
    if (!piece.empty()) t.ids_.emplace(piece, static_cast<int>(i));
    t.pieces_.push_back(std::move(piece));
    t.scores_.push_back(score);
  }
  SD_CHECK(t.unk_id_ >= 0 && t.unk_id_ < static_cast<int>(t.pieces_.size()),
           "unk_id %d is outside the %zu-piece vocabulary", t.unk_id_, t.pieces_.size());
  return t;
}

std::vector<std::pair<size_t, int>> T5Tokenizer::segment(std::string_view text) const {
  struct Node {
    int id = -1;
    float score = 0.0f;
    int64_t start = -1;  // -1: not reached yet
  };
  const size_t n = text.size();
  std::vector<Node> best(n + 1);
  const float unk_score = min_score_ - kUnkPenalty;
  // Forward pass: from every character start, every vocabulary piece that begins there.
  for (size_t start = 0; start < n;) {
    const float here = best[start].score;
    const size_t char_len =
        std::min(utf8_length(static_cast<unsigned char>(text[start])), n - start);
    bool single_char_piece = false;
    const size_t longest = std::min(max_piece_bytes_, n - start);
    for (size_t len = 1; len <= longest; ++len) {
      auto it = ids_.find(std::string(text.substr(start, len)));
      if (it == ids_.end()) continue;
      Node& target = best[start + len];
      const float candidate = scores_[static_cast<size_t>(it->second)] + here;
      if (target.start == -1 || candidate > target.score) {
        target = {it->second, candidate, static_cast<int64_t>(start)};
      }
      if (len == char_len) single_char_piece = true;
    }
    if (!single_char_piece) {
      Node& target = best[start + char_len];
      const float candidate = unk_score + here;
      if (target.start == -1 || candidate > target.score)
        target = {unk_id_, candidate, static_cast<int64_t>(start)};
    }
    start += char_len;
  }
  // Backward pass along the best path.
  std::vector<std::pair<size_t, int>> out;
  for (size_t end = n; end > 0;) {
    const Node& node = best[end];
    out.emplace_back(static_cast<size_t>(node.start), node.id);
    end = static_cast<size_t>(node.start);
  }
  std::reverse(out.begin(), out.end());
  return out;
}

void T5Tokenizer::encode_into(const std::string& text, std::vector<int>& ids,
                              std::vector<std::string>* pieces) const {
  const std::string normalized = collapse_spaces(text);
  // Cut the special tokens out; the text between them is segmented on its own.
  std::vector<std::string> parts;
  for (size_t pos = 0; pos < normalized.size();) {
    size_t next = normalized.size();
    std::string matched;
    for (const std::string& s : special_tokens()) {
      const size_t at = normalized.find(s, pos);
      if (at != std::string::npos && at < next) {
        next = at;
        matched = s;
      }
    }
    if (next > pos) parts.push_back(normalized.substr(pos, next - pos));
    if (matched.empty()) break;
    parts.push_back(matched);
    pos = next + matched.size();
  }
  if (parts.empty()) parts.push_back(normalized);

  for (const std::string& part : parts) {
    const auto& sp = special_tokens();
    if (std::find(sp.begin(), sp.end(), part) != sp.end()) {
      ids.push_back(part == "<pad>" ? kT5PadToken : part == "</s>" ? kT5EosToken : unk_id_);
      if (pieces) pieces->push_back(part);
      continue;
    }
    const std::string pre = metaspace(part, replacement_, add_prefix_space_);
    const std::vector<std::pair<size_t, int>> seg = segment(pre);
    for (size_t i = 0; i < seg.size(); ++i) {
      ids.push_back(seg[i].second);
      if (pieces) {
        const size_t end = i + 1 < seg.size() ? seg[i + 1].first : pre.size();
        pieces->push_back(pre.substr(seg[i].first, end - seg[i].first));
      }
    }
  }
}

std::vector<int> T5Tokenizer::encode(const std::string& text) const {
  std::vector<int> ids;
  encode_into(text, ids, nullptr);
  return ids;
}

std::vector<std::string> T5Tokenizer::encode_pieces(const std::string& text) const {
  std::vector<int> ids;
  std::vector<std::string> pieces;
  encode_into(text, ids, &pieces);
  return pieces;
}

T5Chunks t5_tokenize_prompt(const T5Tokenizer& tokenizer, const std::string& prompt,
                            int chunk_length) {
  SD_CHECK(chunk_length >= 2, "[t5] window of %d tokens is too short", chunk_length);
  std::vector<int> ids;
  std::vector<float> weights;
  for (const PromptPiece& piece : parse_prompt_attention(prompt)) {
    const std::vector<int> piece_ids = tokenizer.encode(piece.text);
    ids.insert(ids.end(), piece_ids.begin(), piece_ids.end());
    weights.insert(weights.end(), piece_ids.size(), piece.weight);
  }
  // Windows of chunk_length - 1 prompt tokens, each closed by </s> and padded.
  const size_t per_window = static_cast<size_t>(chunk_length) - 1;
  T5Chunks out;
  size_t offset = 0;
  do {
    const size_t take = std::min(per_window, ids.size() - offset);
    out.ids.insert(out.ids.end(), ids.begin() + offset, ids.begin() + offset + take);
    out.weights.insert(out.weights.end(), weights.begin() + offset,
                       weights.begin() + offset + take);
    out.ids.push_back(kT5EosToken);
    out.weights.push_back(1.0f);
    const size_t pad = per_window - take;
    out.ids.insert(out.ids.end(), pad, kT5PadToken);
    out.weights.insert(out.weights.end(), pad, 1.0f);
    offset += take;
  } while (offset < ids.size());
  return out;
}

}  // namespace sd::models
