#include "models/tekken_vocab.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "models/byte_level.h"
#include "tensor/base64.h"
#include "tensor/error.h"
#include "test_support.h"

namespace sd::models {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// A tekken.json as Mistral writes it: specials first, then ranked token bytes.
json tekken_file(const std::vector<std::string>& specials, const std::vector<std::string>& tokens,
                 int64_t vocab_size = -1) {
  json vocab = json::array(), special = json::array();
  for (size_t r = 0; r < specials.size(); ++r)
    special.push_back({{"rank", r}, {"token_str", specials[r]}, {"is_control", true}});
  for (size_t r = 0; r < tokens.size(); ++r)
    vocab.push_back(
        {{"rank", r}, {"token_bytes", base64_encode(tokens[r])}, {"token_str", nullptr}});
  return {{"config",
           {{"pattern", "unused: the engine's tekken regex applies"},
            {"num_vocab_tokens", tokens.size()},
            {"default_vocab_size",
             vocab_size >= 0 ? vocab_size : static_cast<int64_t>(specials.size() + tokens.size())},
            {"default_num_special_tokens", specials.size()},
            {"version", "v7"}}},
          {"vocab", vocab},
          {"special_tokens", special}};
}

std::vector<std::string> byte_tokens() {
  std::vector<std::string> t;
  for (int b = 0; b < 256; ++b) t.emplace_back(1, static_cast<char>(b));
  return t;
}

TEST(TekkenVocab, MergesFollowTheRanksAndSpecialsComeFirst) {
  std::vector<std::string> tokens = byte_tokens();
  tokens.push_back("ll");   // rank 256: merged before "al"
  tokens.push_back("al");   // 257
  tokens.push_back("all");  // 258: from "a"+"ll" or "al"+"l"
  const json file = tekken_file({"<unk>", "<s>", "</s>"}, tokens);
  ASSERT_TRUE(is_tekken_json(file));
  const BpeTokenizer t = BpeTokenizer::from_json(file.dump());
  EXPECT_EQ(t.vocab_size(), 3 + 259);
  // "all": l+l first (lower rank), then a+ll; the special token is cut out first.
  EXPECT_EQ(t.encode("all</s>"), (std::vector<int>{3 + 258, 2}));
  EXPECT_EQ(t.encode("al"), (std::vector<int>{3 + 257}));
  EXPECT_EQ(t.decode(t.encode("<s> all well")), "<s> all well");
  EXPECT_EQ(t.token_id("</s>"), 2);
  EXPECT_EQ(t.pre_tokenize("aB"), (std::vector<std::string>{"a", "B"}));
  // The vocabulary is cut at default_vocab_size.
  const BpeTokenizer cut = BpeTokenizer::from_json(tekken_file({"<unk>"}, tokens, 1 + 257).dump());
  EXPECT_EQ(cut.vocab_size(), 258);
  EXPECT_EQ(cut.encode("all"), (std::vector<int>{1 + 'a', 1 + 256}));
}

TEST(TekkenVocab, MalformedFilesAreRefusedWithAMessage) {
  auto expect_error = [](const json& file, const std::string& words) {
    try {
      BpeTokenizer::from_json(file.dump());
      ADD_FAILURE() << "accepted: " << words;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
    }
  };
  json file = tekken_file({"<unk>"}, byte_tokens());
  json bad = file;
  bad["config"].erase("default_num_special_tokens");
  expect_error(bad, "config.default_num_special_tokens");
  bad = file;
  bad["vocab"][5]["token_bytes"] = "***";
  expect_error(bad, "token 5's bytes are not base64");
  bad = file;
  bad["vocab"][7]["rank"] = 6;
  expect_error(bad, "rank 6 appears twice");
  bad = file;
  bad["special_tokens"][0]["rank"] = 9;
  expect_error(bad, "special token rank 9 is outside");
}

// Qwen's vocabulary came from tiktoken ranks, like tekken's: written as a tekken.json (ids as
// ranks, no specials), it must give exactly the ids of its own merge list, both under the
// tekken regex, for text in many scripts.
TEST(TekkenVocab, RanksGiveTheMergesOfARealVocabulary) {
  const std::string shared = test::shared_dir();
  const std::string path = shared.empty() ? "" : shared + "/data/qwen/tokenizer.json";
  if (path.empty() || !fs::exists(path))
    GTEST_SKIP() << "Qwen tokenizer not in the shared folder (../shared/data/qwen/tokenizer.json)";
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  const json qwen = json::parse(text.str());
  const ByteLevelAlphabet& alphabet = byte_level_alphabet();
  std::vector<std::string> symbols;  // by id
  for (const auto& [s, id] : qwen["model"]["vocab"].items()) {
    if (id.get<size_t>() >= symbols.size()) symbols.resize(id.get<size_t>() + 1);
    symbols[id.get<size_t>()] = s;
  }
  std::vector<std::string> tokens;
  for (const std::string& s : symbols) {
    std::string bytes;
    for (size_t i = 0; i < s.size();) {  // each symbol is one code point below U+0144
      const unsigned char c = s[i];
      const uint32_t cp = c < 0x80 ? c : ((c & 0x1F) << 6) | (s[i + 1] & 0x3F);
      i += c < 0x80 ? 1 : 2;
      bytes += static_cast<char>(alphabet.byte_of[cp]);
    }
    tokens.push_back(bytes);
  }
  const BpeTokenizer from_ranks = BpeTokenizer::from_json(tekken_file({}, tokens).dump());

  BpeGgufVocab own;
  own.model = "gpt2";
  own.pre = "tekken";
  own.tokens = symbols;
  for (const json& m : qwen["model"]["merges"])
    own.merges.push_back(m.is_string() ? m.get<std::string>()
                                       : m[0].get<std::string>() + " " + m[1].get<std::string>());
  const BpeTokenizer from_merges = BpeTokenizer::from_gguf_metadata(own);
  for (const std::string& prompt :
       {std::string("A cinematic photo of a red fox in the snow, 35mm, golden hour"),
        std::string("Ein Fuchs im Schnee; un renard dans la neige; лиса в снегу"),
        std::string(
            "雪の中の赤い狐、映画のような写真 🦊❄️ 눈 속의 여우"),
        std::string("def f(x):\n    return x ** 2  # 12345678 3.14159\n\n\tdone"),
        std::string("   multiple   spaces\r\nand CamelCaseWordsHere, UPPER lower MiXeD!!!"),
        std::string("Ünïcödé ñ ç ß ø å — “quotes” ‘single’ …")})
    EXPECT_EQ(from_ranks.encode(prompt), from_merges.encode(prompt)) << prompt;
}

TEST(TekkenVocab, AMistralTekkenFileIsFoundBesideTheModel) {
  const fs::path dir = fs::temp_directory_path() / "tekken_vocab_test_find";
  fs::remove_all(dir);
  fs::create_directories(dir);
  const char* old_cache = std::getenv("XDG_CACHE_HOME");
  const std::string saved_cache = old_cache ? old_cache : "";
  setenv("XDG_CACHE_HOME", (dir / "cache").c_str(), 1);
  unsetenv("SD_MISTRAL_TOKENIZER");
  { std::ofstream(dir / "tekken.json") << "{}"; }
  const std::string llm = (dir / "mistral.safetensors").string();
  EXPECT_EQ(find_bpe_tokenizer(kMistralVocab, "", "", llm), (dir / "tekken.json").string());
  // A Hugging Face tokenizer.json in the same folder comes first.
  { std::ofstream(dir / "tokenizer.json") << "{}"; }
  EXPECT_EQ(find_bpe_tokenizer(kMistralVocab, "", "", llm), (dir / "tokenizer.json").string());
  fs::create_directories(dir / "cache" / "sd-engine" / "mistral");
  { std::ofstream(dir / "cache" / "sd-engine" / "mistral" / "tekken.json") << "{}"; }
  EXPECT_EQ(find_bpe_tokenizer(kMistralVocab, "", "", ""),
            (dir / "cache" / "sd-engine" / "mistral" / "tekken.json").string());
  if (saved_cache.empty())
    unsetenv("XDG_CACHE_HOME");
  else
    setenv("XDG_CACHE_HOME", saved_cache.c_str(), 1);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace sd::models
