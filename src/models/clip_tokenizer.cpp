#include "models/clip_tokenizer.h"

#include <zlib.h>

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <filesystem>

#include "models/byte_level.h"
#include "models/tokenizer_files.h"
#include "tensor/cache_folder.h"
#include "tensor/error.h"

namespace sd::models {

namespace {

// CLIP uses the first 49152 - 256 - 2 merges of its list: with 512 byte symbols and two
// specials the vocabulary has 49408 entries.
constexpr size_t kClipMergeCount = 49152 - 256 - 2;
// The real lists are 1.3 MB (gzip: 1.8 MB unpacked); more is not a merge list.
constexpr size_t kMaxMergesBytes = 64u << 20;

const char* const kBosText = "<|startoftext|>";
const char* const kEosText = "<|endoftext|>";

bool is_clip_space(unsigned char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r';
}
bool is_ascii_alpha(unsigned char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}
bool is_ascii_digit(unsigned char c) {
  return c >= '0' && c <= '9';
}

std::string read_possibly_gzipped(const std::string& path) {
  gzFile f = gzopen(path.c_str(), "rb");  // reads plain files unchanged
  if (!f) throw Error(format("CLIP vocabulary '%s': cannot open the file", path.c_str()));
  std::string text;
  char buf[1 << 16];
  for (;;) {
    const int n = gzread(f, buf, sizeof(buf));
    if (n < 0) {
      int code = 0;
      const std::string what = gzerror(f, &code);
      gzclose(f);
      throw Error(format("CLIP vocabulary '%s': %s (corrupt or truncated download?)", path.c_str(),
                         what.c_str()));
    }
    if (n == 0) break;
    text.append(buf, static_cast<size_t>(n));
    if (text.size() > kMaxMergesBytes) {
      gzclose(f);
      throw Error(format("CLIP vocabulary '%s': more than %zu MiB of text, not a BPE merge list",
                         path.c_str(), kMaxMergesBytes >> 20));
    }
  }
  gzclose(f);
  return text;
}

}  // namespace

std::string find_clip_vocab(const std::string& explicit_path, const std::string& model_dir) {
  if (!explicit_path.empty()) {
    if (file_exists(explicit_path)) return explicit_path;
    throw Error(
        format("CLIP vocabulary '%s' not found (the given path must name %s or a "
               "tokenizer/merges.txt)",
               explicit_path.c_str(), kClipVocabFileName));
  }
  if (const char* env = std::getenv("SD_CLIP_VOCAB"); env && *env) {
    if (file_exists(env)) return env;
    throw Error(format("SD_CLIP_VOCAB='%s': no such file (unset it or point it at %s)", env,
                       kClipVocabFileName));
  }
  if (!model_dir.empty()) {
    const std::string merges = (std::filesystem::path(model_dir) / "tokenizer" / "merges.txt");
    if (file_exists(merges)) return merges;
  }
  const std::string cached = cache_folder_path(kClipVocabFileName);
  if (!cached.empty() && file_exists(cached)) return cached;
  return "";  // nothing placed: the built-in one (models/embedded_vocab.h)
}

ClipTokenizer ClipTokenizer::from_file(const std::string& path) {
  const std::string text = read_possibly_gzipped(path);
  try {
    return from_merges(text);
  } catch (const Error& e) {
    throw Error(format("CLIP vocabulary '%s': %s", path.c_str(), e.what()));
  }
}

ClipTokenizer ClipTokenizer::from_merges(std::string_view text) {
  std::vector<std::pair<std::string, std::string>> merges;
  merges.reserve(kClipMergeCount);
  size_t pos = 0;
  bool first_line = true;
  while (merges.size() < kClipMergeCount && pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    // OpenAI's file starts with '"bpe_simple_vocab_16e6.txt#version: 0.2', diffusers'
    // merges.txt with '#version: 0.2'.
    if (first_line && line.find("#version") != std::string_view::npos) {
      first_line = false;
      continue;
    }
    first_line = false;
    const size_t space = line.find(' ');
    if (space == std::string_view::npos || space == 0 || space + 1 == line.size())
      throw Error(format("merge %zu is not a 'left right' pair", merges.size() + 1));
    merges.emplace_back(std::string(line.substr(0, space)), std::string(line.substr(space + 1)));
  }
  if (merges.size() < kClipMergeCount)
    throw Error(format("only %zu merges, CLIP needs %zu (not CLIP's %s?)", merges.size(),
                       kClipMergeCount, kClipVocabFileName));

  ClipTokenizer t;
  const ByteLevelAlphabet& alphabet = byte_level_alphabet();
  t.byte_symbol_.assign(alphabet.symbol.begin(), alphabet.symbol.end());
  t.vocab_.reserve(kClipVocabSize);
  for (uint8_t b : alphabet.vocab_order) t.vocab_.push_back(alphabet.symbol[b]);
  for (uint8_t b : alphabet.vocab_order) t.vocab_.push_back(alphabet.symbol[b] + "</w>");
  for (const auto& [left, right] : merges) t.vocab_.push_back(left + right);
  t.vocab_.push_back(kBosText);
  t.vocab_.push_back(kEosText);
  // A repeated entry maps to its last id, as a dict built in order would.
  for (size_t i = 0; i < t.vocab_.size(); ++i) t.encoder_[t.vocab_[i]] = static_cast<int>(i);
  for (size_t r = 0; r < merges.size(); ++r)
    t.merge_rank_[merges[r].first + " " + merges[r].second] = static_cast<int>(r);
  return t;
}

int ClipTokenizer::token_id(const std::string& token) const {
  auto it = encoder_.find(token);
  return it == encoder_.end() ? -1 : it->second;
}

const std::string& ClipTokenizer::token_text(int id) const {
  static const std::string empty;
  return id >= 0 && id < static_cast<int>(vocab_.size()) ? vocab_[id] : empty;
}

std::vector<std::string> ClipTokenizer::bpe(std::string_view word) const {
  std::vector<std::string> symbols;
  if (word.empty()) return symbols;
  for (unsigned char b : word) symbols.push_back(byte_symbol_[b]);
  symbols.back() += "</w>";
  // Merge the adjacent pair of lowest rank, everywhere it occurs, until none is left.
  std::string key;
  while (symbols.size() > 1) {
    int best_rank = INT_MAX;
    size_t best = 0;
    for (size_t i = 0; i + 1 < symbols.size(); ++i) {
      key.assign(symbols[i]).append(" ").append(symbols[i + 1]);
      auto it = merge_rank_.find(key);
      if (it != merge_rank_.end() && it->second < best_rank) {
        best_rank = it->second;
        best = i;
      }
    }
    if (best_rank == INT_MAX) break;
    const std::string left = symbols[best], right = symbols[best + 1];
    std::vector<std::string> merged;
    merged.reserve(symbols.size());
    for (size_t i = 0; i < symbols.size();) {
      if (i + 1 < symbols.size() && symbols[i] == left && symbols[i + 1] == right) {
        merged.push_back(left + right);
        i += 2;
      } else {
        merged.push_back(std::move(symbols[i]));
        i += 1;
      }
    }
    symbols = std::move(merged);
  }
  return symbols;
}

std::string clip_normalize(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  bool pending_space = false;
  for (unsigned char c : text) {
    if (is_clip_space(c)) {
      pending_space = !out.empty();  // leading whitespace is dropped
      continue;
    }
    if (pending_space) out += ' ';
    pending_space = false;
    out += static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
  }
  return out;  // trailing whitespace never got written
}

std::vector<std::string> clip_pre_tokenize(std::string_view text) {
  static const char* const kContractions[] = {"'s", "'t", "'re", "'ve", "'m", "'ll", "'d"};
  std::vector<std::string> words;
  size_t i = 0;
  const size_t n = text.size();
  while (i < n) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (c == '\'') {
      bool matched = false;
      for (const char* k : kContractions) {
        const std::string_view kv(k);
        // The case-insensitive pattern also takes "'S"; normalized text has no capitals,
        // but compare case-blind to keep the function's contract on its own.
        if (i + kv.size() <= n &&
            std::equal(kv.begin(), kv.end(), text.begin() + static_cast<ptrdiff_t>(i),
                       [](char a, char b) {
                         return a == (b >= 'A' && b <= 'Z' ? static_cast<char>(b - 'A' + 'a') : b);
                       })) {
          words.emplace_back(text.substr(i, kv.size()));
          i += kv.size();
          matched = true;
          break;
        }
      }
      if (matched) continue;
    }
    size_t j = i + 1;
    if (is_ascii_alpha(c)) {
      while (j < n && is_ascii_alpha(static_cast<unsigned char>(text[j]))) ++j;
    } else if (is_ascii_digit(c)) {
      // one digit per word
    } else if (is_clip_space(c)) {
      i = j;  // no pattern starts with a space
      continue;
    } else {
      while (j < n) {
        const unsigned char d = static_cast<unsigned char>(text[j]);
        if (is_clip_space(d) || is_ascii_alpha(d) || is_ascii_digit(d)) break;
        ++j;
      }
    }
    words.emplace_back(text.substr(i, j - i));
    i = j;
  }
  return words;
}

std::vector<int> ClipTokenizer::encode(const std::string& text, const SpecialWords* special) const {
  const std::string normalized = clip_normalize(text);
  std::vector<std::string> specials = {kBosText, kEosText};
  if (special)
    for (const std::string& w : special->words)
      if (!w.empty()) specials.push_back(w);

  std::vector<int> ids;
  auto encode_plain = [&](std::string_view piece) {
    for (const std::string& word : clip_pre_tokenize(piece)) {
      for (const std::string& symbol : bpe(word)) {
        auto it = encoder_.find(symbol);
        ids.push_back(it == encoder_.end() ? kClipEosToken : it->second);  // unknown -> EOS
      }
    }
  };
  // Special words split the text wherever they occur, even inside a word (sd.cpp): the
  // earliest match wins, the first listed on a tie.
  size_t pos = 0;
  while (pos < normalized.size()) {
    size_t best = std::string::npos;
    const std::string* match = nullptr;
    for (const std::string& s : specials) {
      const size_t at = normalized.find(s, pos);
      if (at != std::string::npos && (best == std::string::npos || at < best)) {
        best = at;
        match = &s;
      }
    }
    if (!match) {
      encode_plain(std::string_view(normalized).substr(pos));
      break;
    }
    if (best > pos) encode_plain(std::string_view(normalized).substr(pos, best - pos));
    std::vector<int> word_ids;
    if (special && special->ids_of && *match != kBosText && *match != kEosText)
      word_ids = special->ids_of(*match);
    if (word_ids.empty()) {
      // BOS/EOS, or a special word whose vectors could not be used: sd.cpp then looks the
      // word up as a vocabulary entry, and an absent entry reads as id 0.
      const int id = token_id(*match);
      word_ids.push_back(id < 0 ? 0 : id);
    }
    ids.insert(ids.end(), word_ids.begin(), word_ids.end());
    pos = best + match->size();
  }
  return ids;
}

TokenChunks pad_to_chunks(const std::vector<int>& ids, const std::vector<float>& weights,
                          int pad_id) {
  SD_CHECK(ids.size() == weights.size(), "[clip tokens] %zu ids but %zu weights", ids.size(),
           weights.size());
  constexpr size_t kWindow = kClipChunkLength, kPerWindow = kWindow - 2;
  TokenChunks out;
  auto window = [&](size_t begin, size_t count) {
    out.ids.push_back(kClipBosToken);
    out.weights.push_back(1.0f);
    out.ids.insert(out.ids.end(), ids.begin() + begin, ids.begin() + begin + count);
    out.weights.insert(out.weights.end(), weights.begin() + begin, weights.begin() + begin + count);
    out.ids.push_back(kClipEosToken);
    out.weights.push_back(1.0f);
    const size_t used = count + 2;
    out.ids.insert(out.ids.end(), kWindow - used, pad_id);
    out.weights.insert(out.weights.end(), kWindow - used, 1.0f);
  };
  if (ids.size() <= kPerWindow) {
    window(0, ids.size());
  } else {
    for (size_t begin = 0; begin < ids.size(); begin += kPerWindow)
      window(begin, std::min(kPerWindow, ids.size() - begin));
  }
  return out;
}

}  // namespace sd::models
