#include "models/tekken_vocab.h"

#include <algorithm>
#include <tuple>
#include <unordered_map>

#include <nlohmann/json.hpp>

#include "models/byte_level.h"
#include "tensor/base64.h"
#include "tensor/error.h"

namespace sd::models {

namespace {

using nlohmann::json;

int64_t config_int(const json& config, const char* key) {
  SD_CHECK(
      config.contains(key) && config[key].is_number_integer() && config[key].get<int64_t>() >= 0,
      "tekken.json: config.%s is missing or not a whole number", key);
  return config[key].get<int64_t>();
}

}  // namespace

bool is_tekken_json(const json& data) {
  return data.is_object() && data.contains("config") && data.contains("vocab") &&
         data["vocab"].is_array() && !data.contains("model");
}

BpeGgufVocab tekken_vocab(const json& data) {
  SD_CHECK(data.is_object() && data.contains("config") && data["config"].is_object() &&
               data.contains("vocab") && data["vocab"].is_array(),
           "tekken.json: not a tekken tokenizer (no \"config\" and \"vocab\")");
  const json& config = data["config"];
  const int64_t specials = config_int(config, "default_num_special_tokens");
  const int64_t total = config_int(config, "default_vocab_size");
  SD_CHECK(specials < total && total < (int64_t{1} << 24),
           "tekken.json: %lld special tokens and a vocabulary of %lld do not fit",
           static_cast<long long>(specials), static_cast<long long>(total));

  BpeGgufVocab v;
  v.model = "gpt2";
  v.pre = "tekken";
  v.tokens.assign(static_cast<size_t>(specials), "");
  v.token_types.assign(static_cast<size_t>(specials), 3);  // control
  for (int64_t i = 0; i < specials; ++i) v.tokens[i] = "<SPECIAL_" + std::to_string(i) + ">";
  if (data.contains("special_tokens") && data["special_tokens"].is_array()) {
    for (const json& s : data["special_tokens"]) {
      SD_CHECK(s.is_object() && s.contains("rank") && s["rank"].is_number_integer() &&
                   s.contains("token_str") && s["token_str"].is_string(),
               "tekken.json: a special token without rank and token_str");
      const int64_t rank = s["rank"].get<int64_t>();
      SD_CHECK(rank >= 0 && rank < specials,
               "tekken.json: special token rank %lld is outside 0-%lld",
               static_cast<long long>(rank), static_cast<long long>(specials - 1));
      v.tokens[static_cast<size_t>(rank)] = s["token_str"].get<std::string>();
    }
  }

  // The vocabulary's bytes by rank, as GPT-2's byte symbols.
  const ByteLevelAlphabet& alphabet = byte_level_alphabet();
  const int64_t ranks = std::min<int64_t>(total - specials, data["vocab"].size());
  std::vector<std::string> bytes_of(static_cast<size_t>(ranks));
  std::vector<bool> seen(static_cast<size_t>(ranks), false);
  for (const json& t : data["vocab"]) {
    SD_CHECK(t.is_object() && t.contains("rank") && t["rank"].is_number_integer() &&
                 t.contains("token_bytes") && t["token_bytes"].is_string(),
             "tekken.json: a vocabulary entry without rank and token_bytes");
    const int64_t rank = t["rank"].get<int64_t>();
    if (rank < 0 || rank >= ranks) continue;  // past the vocabulary the model uses
    const std::optional<std::string> bytes = base64_decode(t["token_bytes"].get<std::string>());
    SD_CHECK(bytes && !bytes->empty(), "tekken.json: token %lld's bytes are not base64",
             static_cast<long long>(rank));
    SD_CHECK(!seen[rank], "tekken.json: rank %lld appears twice", static_cast<long long>(rank));
    seen[rank] = true;
    bytes_of[static_cast<size_t>(rank)] = *bytes;
  }
  SD_CHECK(std::all_of(seen.begin(), seen.end(), [](bool s) { return s; }),
           "tekken.json: the vocabulary's ranks have gaps");
  std::unordered_map<std::string, int64_t> rank_of;
  rank_of.reserve(bytes_of.size());
  for (size_t r = 0; r < bytes_of.size(); ++r)
    rank_of.emplace(bytes_of[r], static_cast<int64_t>(r));
  auto symbols = [&](const std::string& b) {
    std::string s;
    for (unsigned char c : b) s += alphabet.symbol[c];
    return s;
  };
  for (const std::string& b : bytes_of) {
    v.tokens.push_back(symbols(b));
    v.token_types.push_back(1);
  }

  // Merges from ranks: (merged rank, left rank, right rank) for every split into tokens.
  std::vector<std::tuple<int64_t, int64_t, int64_t>> merges;
  for (size_t r = 0; r < bytes_of.size(); ++r) {
    const std::string& b = bytes_of[r];
    for (size_t cut = 1; cut < b.size(); ++cut) {
      auto left = rank_of.find(b.substr(0, cut));
      if (left == rank_of.end()) continue;
      auto right = rank_of.find(b.substr(cut));
      if (right == rank_of.end()) continue;
      merges.emplace_back(static_cast<int64_t>(r), left->second, right->second);
    }
  }
  std::sort(merges.begin(), merges.end());
  v.merges.reserve(merges.size());
  for (const auto& [merged, left, right] : merges)
    v.merges.push_back(symbols(bytes_of[left]) + " " + symbols(bytes_of[right]));
  return v;
}

}  // namespace sd::models
