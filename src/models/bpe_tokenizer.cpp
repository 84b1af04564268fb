#include "models/bpe_tokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <unicode/bytestream.h>
#include <unicode/normalizer2.h>

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <queue>
#include <sstream>

#include "models/byte_level.h"
#include "models/tekken_vocab.h"
#include "models/tokenizer_files.h"
#include "tensor/cache_folder.h"
#include "tensor/error.h"

namespace sd::models {

namespace {

using nlohmann::json;

// The pre-tokenizer regexes of the vocabularies a GGUF file may name in tokenizer.ggml.pre
// (GGUF files carry the name, not the regex), copied from each family's tokenizer.json; NFC
// and ignore_merges as those files set them.
struct GgufPreset {
  const char* name;
  const char* regex;
  bool nfc;
  bool ignore_merges;
};

// clang-format off
// Qwen2, Qwen2.5 and Qwen3: one digit per word.
constexpr const char* kQwen2Regex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d))"
    R"(|[^\r\n\p{L}\p{N}]?\p{L}+)"
    R"(|\p{N})"
    R"(| ?[^\s\p{L}\p{N}]+[\r\n]*)"
    R"(|\s*[\r\n]+)"
    R"(|\s+(?!\S))"
    R"(|\s+)";
// Llama 3: up to three digits per word.
constexpr const char* kLlama3Regex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d))"
    R"(|[^\r\n\p{L}\p{N}]?\p{L}+)"
    R"(|\p{N}{1,3})"
    R"(| ?[^\s\p{L}\p{N}]+[\r\n]*)"
    R"(|\s*[\r\n]+)"
    R"(|\s+(?!\S))"
    R"(|\s+)";
// Mistral tekken (Nemo, Small 3.x, Pixtral): words split at lower-to-upper case changes.
constexpr const char* kTekkenRegex =
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+)"
    R"(|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*)"
    R"(|\p{N})"
    R"(| ?[^\s\p{L}\p{N}]+[\r\n/]*)"
    R"(|\s*[\r\n]+)"
    R"(|\s+(?!\S))"
    R"(|\s+)";
// GPT-2: also what a ByteLevel pre-tokenizer with use_regex splits by.
constexpr const char* kGpt2Regex =
    R"('s|'t|'re|'ve|'m|'ll|'d)"
    R"(| ?\p{L}+)"
    R"(| ?\p{N}+)"
    R"(| ?[^\s\p{L}\p{N}]+)"
    R"(|\s+(?!\S))"
    R"(|\s+)";
// clang-format on

constexpr GgufPreset kGgufPresets[] = {
    {"qwen2", kQwen2Regex, /*nfc=*/true, /*ignore_merges=*/false},
    {"llama-bpe", kLlama3Regex, /*nfc=*/false, /*ignore_merges=*/true},
    {"llama3", kLlama3Regex, /*nfc=*/false, /*ignore_merges=*/true},
    {"tekken", kTekkenRegex, /*nfc=*/false, /*ignore_merges=*/false},
    {"gpt-2", kGpt2Regex, /*nfc=*/false, /*ignore_merges=*/false},
};

// GGUF token types (llama.cpp's llama_token_type).
constexpr int32_t kGgufTokenControl = 3;
constexpr int32_t kGgufTokenUserDefined = 4;

// Ids beyond this are a broken file, not a vocabulary (the largest ones have ~256k entries);
// the bound keeps a hostile id from sizing the tables.
constexpr int64_t kMaxTokenId = 1 << 24;

// Words seen before are looked up, not merged again; past this many the cache starts over so
// a long-running server's memory stays bounded. Longer words are rare and not kept.
constexpr size_t kMaxCachedWords = 1 << 16;
constexpr size_t kMaxCachedWordBytes = 256;

// Bytes of the UTF-8 character starting with byte `c` (1 for bytes that cannot start one).
size_t utf8_length(unsigned char c) {
  return "\1\1\1\1\1\1\1\1\1\1\1\1\2\2\3\4"[c >> 4];
}

std::string to_byte_symbols(std::string_view bytes) {
  const ByteLevelAlphabet& alphabet = byte_level_alphabet();
  std::string out;
  out.reserve(bytes.size() * 2);
  for (char c : bytes) out += alphabet.symbol[static_cast<unsigned char>(c)];
  return out;
}

// Hugging Face's tokenizers match with Oniguruma, whose `\s` is Unicode White_Space; PCRE2's
// also takes U+180E (a format character since Unicode 6.3), so `\s`/`\S` become the property
// where PCRE2 knows it (10.40 and later). Both work inside character classes too.
std::string to_pcre2_pattern(const std::string& pattern) {
#if PCRE2_MAJOR > 10 || (PCRE2_MAJOR == 10 && PCRE2_MINOR >= 40)
  std::string out;
  out.reserve(pattern.size() + 32);
  for (size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] != '\\' || i + 1 == pattern.size()) {
      out += pattern[i];
      continue;
    }
    const char next = pattern[++i];
    if (next == 's')
      out += "\\p{White_Space}";
    else if (next == 'S')
      out += "\\P{White_Space}";
    else
      (out += '\\') += next;
  }
  return out;
#else
  return pattern;
#endif
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  SD_CHECK(in.good(), "BPE tokenizer '%s' cannot be read", path.c_str());
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Canonical composition (NFC), as the "NFC" normalizer of Qwen's tokenizer.json asks. ICU
// passes invalid UTF-8 through unchanged.
std::string nfc(std::string_view text) {
  // Code points below U+0300 (lead bytes below 0xCC) are never changed by NFC, nor do they
  // compose with what precedes them: most prompts need no ICU call.
  if (std::none_of(text.begin(), text.end(),
                   [](char c) { return static_cast<unsigned char>(c) >= 0xCC; }))
    return std::string(text);
  SD_CHECK(text.size() < INT32_MAX, "[bpe] a prompt of %zu bytes is too long", text.size());
  UErrorCode status = U_ZERO_ERROR;
  const icu::Normalizer2* normalizer = icu::Normalizer2::getNFCInstance(status);
  std::string out;
  if (U_SUCCESS(status)) {
    icu::StringByteSink<std::string> sink(&out, static_cast<int32_t>(text.size()));
    normalizer->normalizeUTF8(0, icu::StringPiece(text.data(), static_cast<int32_t>(text.size())),
                              sink, nullptr, status);
  }
  SD_CHECK(U_SUCCESS(status), "[bpe] NFC normalization failed (ICU: %s)", u_errorName(status));
  return out;
}

bool json_bool(const json& object, const char* key, bool fallback) {
  const auto it = object.find(key);
  return it != object.end() && it->is_boolean() ? it->get<bool>() : fallback;
}

std::string json_string(const json& object, const char* key) {
  const auto it = object.find(key);
  return it != object.end() && it->is_string() ? it->get<std::string>() : std::string();
}

}  // namespace

struct BpeTokenizer::Regex {
  pcre2_code* code = nullptr;
  std::string pattern;  // as the file writes it, for messages
  ~Regex() { pcre2_code_free(code); }
};

struct BpeTokenizer::WordCache {
  std::mutex mutex;
  std::unordered_map<std::string, std::vector<int>> ids;
};

std::string find_bpe_tokenizer(const BpeVocabSearch& which, const std::string& explicit_path,
                               const std::string& model_dir, const std::string& llm_file) {
  if (!explicit_path.empty()) {
    if (file_exists(explicit_path)) return explicit_path;
    fail("%s tokenizer '%s' not found (the given path must name the text encoder's %s)", which.name,
         explicit_path.c_str(), kBpeTokenizerFileName);
  }
  if (const char* env = std::getenv(which.env); env && *env) {
    if (file_exists(env)) return env;
    fail("%s='%s': no such file (unset it or point it at the text encoder's %s)", which.env, env,
         kBpeTokenizerFileName);
  }
  namespace fs = std::filesystem;
  // In each folder a Hugging Face tokenizer.json, else Mistral's own tekken.json.
  auto in_folder = [](const fs::path& folder) -> std::string {
    for (const char* name : {kBpeTokenizerFileName, kTekkenFileName}) {
      const std::string p = (folder / name).string();
      if (file_exists(p)) return p;
    }
    return "";
  };
  if (!model_dir.empty())
    if (std::string p = in_folder(fs::path(model_dir) / "tokenizer"); !p.empty()) return p;
  if (!llm_file.empty())
    if (std::string p = in_folder(fs::path(llm_file).parent_path()); !p.empty()) return p;
  const std::string cache = cache_folder_path(which.cache_folder);
  if (!cache.empty())
    if (std::string p = in_folder(cache); !p.empty()) return p;
  return "";
}

BpeTokenizer::BpeTokenizer() : cache_(std::make_shared<WordCache>()) {
  byte_id_.fill(-1);
}

BpeTokenizer BpeTokenizer::from_file(const std::string& path) {
  const std::string text = read_file(path);
  try {
    return from_json(text);
  } catch (const Error& e) {
    fail("BPE tokenizer '%s': %s", path.c_str(), e.what());
  }
}

BpeTokenizer BpeTokenizer::from_json(std::string_view json_text) {
  json data = json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  SD_CHECK(!data.is_discarded() && data.is_object(), "not a JSON tokenizer file");
  if (is_tekken_json(data)) return from_gguf_metadata(tekken_vocab(data));
  SD_CHECK(data.contains("model") && data["model"].is_object(),
           "no \"model\" entry: not a Hugging Face tokenizer.json");
  const json& model = data["model"];
  std::string type = json_string(model, "type");
  if (type.empty() && model.contains("merges")) type = "BPE";  // files older than "type"
  SD_CHECK(type == "BPE",
           "model type \"%s\", expected \"BPE\" (a byte-level BPE tokenizer.json such as "
           "Qwen's; a Unigram or WordPiece tokenizer does not fit)",
           escape_control_chars(type).c_str());
  SD_CHECK(model.contains("vocab") && model["vocab"].is_object() && !model["vocab"].empty(),
           "the BPE model has no vocabulary (model.vocab)");
  SD_CHECK(model.contains("merges") && model["merges"].is_array(),
           "the BPE model has no merge list (model.merges)");
  SD_CHECK(json_string(model, "continuing_subword_prefix").empty() &&
               json_string(model, "end_of_word_suffix").empty(),
           "the BPE model marks word pieces (continuing_subword_prefix / end_of_word_suffix); "
           "only GPT-2-style byte-level BPE is supported");
  SD_CHECK(!json_bool(model, "byte_fallback", false),
           "the BPE model uses byte_fallback (a SentencePiece-style BPE); only GPT-2-style "
           "byte-level BPE is supported");

  BpeTokenizer t;
  for (const auto& [text, id] : model["vocab"].items()) {
    SD_CHECK(id.is_number_integer() && id.get<int64_t>() >= 0 && id.get<int64_t>() < kMaxTokenId,
             "vocabulary entry '%s' has no valid id", escape_control_chars(text).c_str());
    t.set_token(id.get<int>(), text, /*added=*/false);
  }
  const json& merges = model["merges"];
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const json& m = merges[rank];
    if (m.is_string()) {
      // "left right": byte symbols never contain a space (it is written "Ġ").
      const std::string s = m.get<std::string>();
      const size_t space = s.find(' ');
      SD_CHECK(space != std::string::npos && s.find(' ', space + 1) == std::string::npos,
               "merge %zu ('%s') is not two tokens separated by one space", rank,
               escape_control_chars(s).c_str());
      t.add_merge(rank, std::string_view(s).substr(0, space),
                  std::string_view(s).substr(space + 1));
    } else {
      SD_CHECK(m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string(),
               "merge %zu is neither \"left right\" nor [\"left\", \"right\"]", rank);
      t.add_merge(rank, m[0].get<std::string>(), m[1].get<std::string>());
    }
  }
  if (const std::string unk = json_string(model, "unk_token"); !unk.empty()) {
    const auto it = t.vocab_.find(unk);
    if (it != t.vocab_.end()) t.unk_id_ = it->second;
  }
  t.ignore_merges_ = json_bool(model, "ignore_merges", false);

  // The normalizer: none, or NFC (alone or in a Sequence). Others would change the ids.
  if (data.contains("normalizer") && data["normalizer"].is_object()) {
    const json& norm = data["normalizer"];
    std::vector<const json*> parts = {&norm};
    if (json_string(norm, "type") == "Sequence") {
      parts.clear();
      if (norm.contains("normalizers") && norm["normalizers"].is_array())
        for (const json& n : norm["normalizers"]) parts.push_back(&n);
    }
    for (const json* n : parts) {
      const std::string kind = n->is_object() ? json_string(*n, "type") : std::string();
      SD_CHECK(kind == "NFC", "normalizer \"%s\" is not supported (only NFC, as Qwen's file has)",
               escape_control_chars(kind).c_str());
      t.nfc_ = true;
    }
  }

  // The pre-tokenizer: Split steps and one ByteLevel step, alone or in a Sequence.
  SD_CHECK(data.contains("pre_tokenizer") && data["pre_tokenizer"].is_object(),
           "no pre_tokenizer: a byte-level BPE file has a ByteLevel pre-tokenizer");
  std::vector<const json*> steps = {&data["pre_tokenizer"]};
  if (json_string(data["pre_tokenizer"], "type") == "Sequence") {
    steps.clear();
    const json& pre = data["pre_tokenizer"];
    if (pre.contains("pretokenizers") && pre["pretokenizers"].is_array())
      for (const json& p : pre["pretokenizers"]) steps.push_back(&p);
  }
  bool byte_level = false;
  for (const json* step : steps) {
    const std::string kind = step->is_object() ? json_string(*step, "type") : std::string();
    if (kind == "ByteLevel") {
      byte_level = true;
      if (json_bool(*step, "use_regex", true)) t.add_split(kGpt2Regex, false);
      if (json_bool(*step, "add_prefix_space", true)) {
        // The space goes in front of each piece before the regex cuts it.
        if (json_bool(*step, "use_regex", true))
          t.stages_.back().add_prefix_space = true;
        else
          t.stages_.push_back({nullptr, true});
      }
    } else if (kind == "Split") {
      const std::string behavior = json_string(*step, "behavior");
      SD_CHECK(behavior == "Isolated",
               "Split behavior \"%s\" is not supported (only Isolated, as byte-level BPE files "
               "use)",
               escape_control_chars(behavior).c_str());
      SD_CHECK(!json_bool(*step, "invert", false), "inverted Split is not supported");
      const json* pattern = step->contains("pattern") ? &(*step)["pattern"] : nullptr;
      SD_CHECK(
          pattern && pattern->is_object() &&
              (json_string(*pattern, "Regex").size() || json_string(*pattern, "String").size()),
          "Split has no pattern (expected {\"Regex\": ...} or {\"String\": ...})");
      const std::string regex = json_string(*pattern, "Regex");
      if (!regex.empty())
        t.add_split(regex, false);
      else
        t.add_split(json_string(*pattern, "String"), true);
    } else {
      fail(
          "pre-tokenizer \"%s\" is not supported (expected Split and ByteLevel, as byte-level "
          "BPE files have)",
          escape_control_chars(kind).c_str());
    }
  }
  SD_CHECK(byte_level, "no ByteLevel pre-tokenizer: the vocabulary is not byte-level BPE");

  if (data.contains("added_tokens") && data["added_tokens"].is_array()) {
    for (const json& a : data["added_tokens"]) {
      SD_CHECK(a.is_object() && a.contains("id") && a["id"].is_number_integer() &&
                   a["id"].get<int64_t>() >= 0 && a["id"].get<int64_t>() < kMaxTokenId &&
                   !json_string(a, "content").empty(),
               "an added token has no valid id or content");
      // single_word is not honoured: none of the byte-level families sets it.
      t.add_added_token({json_string(a, "content"), a["id"].get<int>(),
                         json_bool(a, "lstrip", false), json_bool(a, "rstrip", false)});
    }
  }
  t.finish();
  return t;
}

BpeTokenizer BpeTokenizer::from_gguf_metadata(const BpeGgufVocab& vocab) {
  SD_CHECK(vocab.model == "gpt2",
           "GGUF tokenizer.ggml.model is \"%s\"; this tokenizer reads byte-level BPE "
           "vocabularies (\"gpt2\": Qwen, Llama 3, Mistral tekken)",
           escape_control_chars(vocab.model).c_str());
  const GgufPreset* preset = nullptr;
  for (const GgufPreset& p : kGgufPresets)
    if (vocab.pre == p.name) preset = &p;
  if (!preset) {
    std::string known;
    for (const GgufPreset& p : kGgufPresets)
      known += std::string(known.empty() ? "" : ", ") + p.name;
    fail(
        "GGUF tokenizer.ggml.pre \"%s\" is unknown: its pre-tokenizer regex is not in the "
        "file, and this engine knows %s; use the model's tokenizer.json instead",
        escape_control_chars(vocab.pre).c_str(), known.c_str());
  }
  SD_CHECK(!vocab.tokens.empty(), "GGUF tokenizer.ggml.tokens is empty");
  SD_CHECK(static_cast<int64_t>(vocab.tokens.size()) < kMaxTokenId,
           "GGUF tokenizer.ggml.tokens has %zu entries, more than a vocabulary has",
           vocab.tokens.size());
  SD_CHECK(vocab.token_types.empty() || vocab.token_types.size() == vocab.tokens.size(),
           "GGUF tokenizer.ggml.token_type has %zu entries for %zu tokens",
           vocab.token_types.size(), vocab.tokens.size());

  BpeTokenizer t;
  for (size_t i = 0; i < vocab.tokens.size(); ++i) {
    const int32_t type = vocab.token_types.empty() ? 1 : vocab.token_types[i];
    const int id = static_cast<int>(i);
    if ((type == kGgufTokenControl || type == kGgufTokenUserDefined) && !vocab.tokens[i].empty())
      t.add_added_token({vocab.tokens[i], id, false, false});
    else
      t.set_token(id, vocab.tokens[i], /*added=*/false);
  }
  for (size_t rank = 0; rank < vocab.merges.size(); ++rank) {
    const std::string& s = vocab.merges[rank];
    const size_t space = s.find(' ');
    SD_CHECK(space != std::string::npos && s.find(' ', space + 1) == std::string::npos,
             "GGUF merge %zu ('%s') is not two tokens separated by one space", rank,
             escape_control_chars(s).c_str());
    t.add_merge(rank, std::string_view(s).substr(0, space), std::string_view(s).substr(space + 1));
  }
  t.add_split(preset->regex, false);
  t.nfc_ = preset->nfc;
  t.ignore_merges_ = preset->ignore_merges;
  t.finish();
  return t;
}

void BpeTokenizer::set_token(int id, const std::string& text, bool added) {
  const size_t i = static_cast<size_t>(id);
  if (i >= tokens_.size()) {
    tokens_.resize(i + 1);
    is_added_.resize(i + 1, 0);
  }
  // An added token may repeat a vocabulary entry (GPT-2's <|endoftext|>): both keep the id.
  if (added || tokens_[i].empty()) tokens_[i] = text;
  if (added)
    is_added_[i] = 1;
  else
    vocab_.emplace(text, id);
}

void BpeTokenizer::add_merge(size_t rank, std::string_view left, std::string_view right) {
  auto id_of = [&](std::string_view part) {
    const auto it = vocab_.find(std::string(part));
    SD_CHECK(it != vocab_.end(), "merge %zu ('%s %s') names '%s', which is not in the vocabulary",
             rank, escape_control_chars(left).c_str(), escape_control_chars(right).c_str(),
             escape_control_chars(part).c_str());
    return it->second;
  };
  const int l = id_of(left);
  const int r = id_of(right);
  std::string joined(left);
  joined += right;
  const int result = id_of(joined);
  SD_CHECK(rank < INT32_MAX, "more than 2^31 merges");
  // A repeated pair keeps its first (lowest) rank.
  merges_.emplace((static_cast<uint64_t>(l) << 32) | static_cast<uint32_t>(r),
                  Merge{static_cast<int>(rank), result});
}

void BpeTokenizer::add_added_token(AddedToken token) {
  set_token(token.id, token.content, /*added=*/true);
  added_ids_[token.content] = token.id;
  added_.push_back(std::move(token));
}

void BpeTokenizer::add_split(const std::string& pattern, bool literal) {
  int error = 0;
  PCRE2_SIZE offset = 0;
  // MATCH_INVALID_UTF: invalid UTF-8 is never matched instead of failing the whole match.
  const uint32_t options =
      PCRE2_UTF | PCRE2_MATCH_INVALID_UTF | (literal ? PCRE2_LITERAL : PCRE2_UCP);
  const std::string compiled = literal ? pattern : to_pcre2_pattern(pattern);
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(compiled.data()), compiled.size(),
                                   options, &error, &offset, nullptr);
  if (!code) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(error, message, sizeof(message));
    fail("pre-tokenizer regex does not compile (PCRE2: %s, at offset %zu): %s",
         reinterpret_cast<const char*>(message), static_cast<size_t>(offset),
         escape_control_chars(pattern).c_str());
  }
  // The JIT makes matching several times faster; where it is unavailable the interpreter
  // gives the same matches.
  pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);
  auto regex = std::make_shared<Regex>();
  regex->code = code;
  regex->pattern = pattern;
  stages_.push_back({std::move(regex), false});
}

void BpeTokenizer::finish() {
  const ByteLevelAlphabet& alphabet = byte_level_alphabet();
  for (int b = 0; b < 256; ++b) {
    const auto it = vocab_.find(alphabet.symbol[b]);
    byte_id_[b] = it == vocab_.end() ? -1 : it->second;
  }
  for (auto& list : added_by_first_byte_) list.clear();
  for (size_t i = 0; i < added_.size(); ++i)
    added_by_first_byte_[static_cast<unsigned char>(added_[i].content[0])].push_back(
        static_cast<int>(i));
  for (auto& list : added_by_first_byte_)
    std::stable_sort(list.begin(), list.end(), [&](int a, int b) {
      return added_[a].content.size() > added_[b].content.size();
    });
}

std::vector<std::string> BpeTokenizer::pre_tokenize(std::string_view utf8) const {
  std::vector<std::string> pieces;
  if (utf8.empty()) return pieces;
  pieces.push_back(nfc_ ? nfc(utf8) : std::string(utf8));
  std::vector<std::string> next;
  for (const Stage& stage : stages_) {
    next.clear();
    std::unique_ptr<pcre2_match_data, decltype(&pcre2_match_data_free)> match(
        stage.regex ? pcre2_match_data_create_from_pattern(stage.regex->code, nullptr) : nullptr,
        &pcre2_match_data_free);
    SD_CHECK(!stage.regex || match, "[bpe] out of memory for regex match data");
    for (std::string& piece : pieces) {
      if (stage.add_prefix_space && piece[0] != ' ') piece.insert(piece.begin(), ' ');
      if (!stage.regex) {
        next.push_back(std::move(piece));
        continue;
      }
      // "Isolated" split: every match is a word, and so is the text between matches.
      const auto* subject = reinterpret_cast<PCRE2_SPTR>(piece.data());
      const size_t n = piece.size();
      size_t pos = 0;
      size_t last = 0;
      while (pos < n) {
        const int rc = pcre2_match(stage.regex->code, subject, n, pos, 0, match.get(), nullptr);
        if (rc == PCRE2_ERROR_NOMATCH) break;
        if (rc < 0) {
          PCRE2_UCHAR message[256];
          pcre2_get_error_message(rc, message, sizeof(message));
          fail("[bpe] pre-tokenizer regex failed on the prompt (PCRE2: %s): %s",
               reinterpret_cast<const char*>(message),
               escape_control_chars(stage.regex->pattern).c_str());
        }
        const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(match.get());
        const size_t start = ovector[0];
        const size_t end = ovector[1];
        if (end == start) {  // an empty match makes no word: step over one character
          pos = start + std::min(utf8_length(static_cast<unsigned char>(piece[start])), n - start);
          continue;
        }
        if (start > last) next.push_back(piece.substr(last, start - last));
        next.push_back(piece.substr(start, end - start));
        last = pos = end;
      }
      if (last < n) next.push_back(piece.substr(last));
    }
    pieces.swap(next);
  }
  return pieces;
}

std::vector<int> BpeTokenizer::encode(const std::string& utf8) const {
  SD_CHECK(utf8.size() < INT32_MAX, "[bpe] a prompt of %zu bytes is too long", utf8.size());
  std::vector<int> ids;
  const size_t n = utf8.size();
  size_t gap_start = 0;
  for (size_t pos = 0; pos < n;) {
    // The longest added token starting here (lists are sorted longest first).
    const AddedToken* found = nullptr;
    for (int i : added_by_first_byte_[static_cast<unsigned char>(utf8[pos])]) {
      const std::string& c = added_[static_cast<size_t>(i)].content;
      if (utf8.compare(pos, c.size(), c) == 0) {
        found = &added_[static_cast<size_t>(i)];
        break;
      }
    }
    if (!found) {
      ++pos;
      continue;
    }
    size_t start = pos;
    size_t end = pos + found->content.size();
    // lstrip/rstrip: the token takes the (ASCII) whitespace beside it along.
    auto is_space = [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; };
    if (found->lstrip)
      while (start > gap_start && is_space(utf8[start - 1])) --start;
    if (found->rstrip)
      while (end < n && is_space(utf8[end])) ++end;
    encode_text(std::string_view(utf8).substr(gap_start, start - gap_start), ids);
    ids.push_back(found->id);
    gap_start = pos = end;
  }
  encode_text(std::string_view(utf8).substr(gap_start), ids);
  return ids;
}

void BpeTokenizer::encode_text(std::string_view text, std::vector<int>& ids) const {
  if (text.empty()) return;
  for (const std::string& word : pre_tokenize(text)) encode_word(word, ids);
}

void BpeTokenizer::encode_word(std::string_view word, std::vector<int>& ids) const {
  if (word.size() > kMaxCachedWordBytes) {
    merge_word(word, ids);
    return;
  }
  const std::string key(word);
  {
    std::lock_guard<std::mutex> lock(cache_->mutex);
    const auto it = cache_->ids.find(key);
    if (it != cache_->ids.end()) {
      ids.insert(ids.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  std::vector<int> word_ids;
  merge_word(word, word_ids);
  ids.insert(ids.end(), word_ids.begin(), word_ids.end());
  std::lock_guard<std::mutex> lock(cache_->mutex);
  if (cache_->ids.size() >= kMaxCachedWords) cache_->ids.clear();
  cache_->ids.emplace(key, std::move(word_ids));
}

void BpeTokenizer::merge_word(std::string_view word, std::vector<int>& ids) const {
  if (ignore_merges_) {  // a word that is a token is taken whole (Llama 3)
    const auto it = vocab_.find(to_byte_symbols(word));
    if (it != vocab_.end()) {
      ids.push_back(it->second);
      return;
    }
  }
  // Symbols in a linked list over byte positions; a merged pair lives on at its left
  // position. Candidate pairs wait in a heap ordered by (rank, position) and are dropped
  // when popped if either side changed since: O(n log n) per word.
  constexpr int kGone = -2;
  const int n = static_cast<int>(word.size());
  std::vector<int> id(static_cast<size_t>(n));
  std::vector<int> prev(static_cast<size_t>(n));
  std::vector<int> next(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) {
    id[i] = byte_id_[static_cast<unsigned char>(word[static_cast<size_t>(i)])];
    prev[i] = i - 1;
    next[i] = i + 1;
  }
  struct Candidate {
    int rank, left, right, left_id, right_id, result;
  };
  auto later = [](const Candidate& a, const Candidate& b) {
    return a.rank != b.rank ? a.rank > b.rank : a.left > b.left;
  };
  std::priority_queue<Candidate, std::vector<Candidate>, decltype(later)> queue(later);
  auto consider = [&](int left) {
    const int right = next[left];
    if (right >= n || id[left] < 0 || id[right] < 0) return;
    const auto it =
        merges_.find((static_cast<uint64_t>(id[left]) << 32) | static_cast<uint32_t>(id[right]));
    if (it != merges_.end())
      queue.push({it->second.rank, left, right, id[left], id[right], it->second.result});
  };
  for (int i = 0; i + 1 < n; ++i) consider(i);
  while (!queue.empty()) {
    const Candidate c = queue.top();
    queue.pop();
    if (id[c.left] != c.left_id || id[c.right] != c.right_id || next[c.left] != c.right) continue;
    id[c.left] = c.result;
    id[c.right] = kGone;
    next[c.left] = next[c.right];
    if (next[c.right] < n) prev[next[c.right]] = c.left;
    if (prev[c.left] >= 0) consider(prev[c.left]);
    consider(c.left);
  }
  // A byte the vocabulary lacks becomes the unknown token, or nothing, as in the reference.
  for (int i = 0; i < n; i = next[i]) {
    if (id[i] >= 0)
      ids.push_back(id[i]);
    else if (unk_id_ >= 0)
      ids.push_back(unk_id_);
  }
}

std::string BpeTokenizer::decode(const std::vector<int>& ids) const {
  const ByteLevelAlphabet& alphabet = byte_level_alphabet();
  std::string out;
  for (int id : ids) {
    SD_CHECK(id >= 0 && id < static_cast<int>(tokens_.size()),
             "[bpe] token id %d is outside the vocabulary (0..%zu)", id, tokens_.size() - 1);
    const std::string& text = tokens_[static_cast<size_t>(id)];
    if (is_added_[static_cast<size_t>(id)]) {
      out += text;
      continue;
    }
    for (size_t i = 0; i < text.size();) {
      const auto lead = static_cast<unsigned char>(text[i]);
      const size_t len = std::min(utf8_length(lead), text.size() - i);
      uint32_t cp = lead;
      if (len == 2) cp = ((lead & 0x1Fu) << 6) | (static_cast<unsigned char>(text[i + 1]) & 0x3Fu);
      // Characters outside the byte table (none in a byte-level vocabulary) stay as written.
      if ((len == 1 || len == 2) && cp < alphabet.byte_of.size() && alphabet.byte_of[cp] >= 0)
        out += static_cast<char>(alphabet.byte_of[cp]);
      else
        out.append(text, i, len);
      i += len;
    }
  }
  return out;
}

int BpeTokenizer::token_id(std::string_view token) const {
  const std::string key(token);
  if (const auto it = added_ids_.find(key); it != added_ids_.end()) return it->second;
  if (const auto it = vocab_.find(key); it != vocab_.end()) return it->second;
  return -1;
}

const std::string& BpeTokenizer::token_text(int id) const {
  static const std::string kNone;
  return id >= 0 && id < static_cast<int>(tokens_.size()) ? tokens_[static_cast<size_t>(id)]
                                                          : kNone;
}

}  // namespace sd::models
