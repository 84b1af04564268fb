#include "pipeline/model_args.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>

#include "tensor/error.h"

namespace sd::pipeline {

namespace {

std::string trim(const std::string& s) {
  const size_t b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t\r\n") - b + 1);
}

bool parse_bool(const std::string& key, std::string value) {
  std::transform(value.begin(), value.end(), value.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (value == "1" || value == "true" || value == "yes" || value == "on") return true;
  if (value == "0" || value == "false" || value == "no" || value == "off") return false;
  fail("--model-args %s=%s: expected true or false", key.c_str(), value.c_str());
}

int parse_count(const std::string& key, const std::string& value) {
  char* end = nullptr;
  const long v = std::strtol(value.c_str(), &end, 10);
  SD_CHECK(!value.empty() && *end == '\0' && v >= 0 && v <= 1000000,
           "--model-args %s=%s: expected a count of tokens (0 or more)", key.c_str(),
           value.c_str());
  return static_cast<int>(v);
}

}  // namespace

ModelArgs parse_model_args(const std::string& text) {
  ModelArgs out;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t end = std::min(text.find_first_of(",;", start), text.size());
    const std::string pair = trim(text.substr(start, end - start));
    start = end + 1;
    if (pair.empty()) continue;
    const size_t eq = pair.find('=');
    SD_CHECK(eq != std::string::npos, "--model-args '%s': expected key=value", pair.c_str());
    const std::string key = trim(pair.substr(0, eq)), value = trim(pair.substr(eq + 1));
    if (key == "chroma_use_dit_mask")
      out.chroma.dit_mask = parse_bool(key, value);
    else if (key == "chroma_use_t5_mask")
      out.chroma.t5_mask = parse_bool(key, value);
    else if (key == "chroma_t5_mask_pad")
      out.chroma.t5_mask_pad = parse_count(key, value);
    else if (key == "qwen_image_zero_cond_t")
      out.qwen_image_zero_cond_t = parse_bool(key, value);
    else
      out.unused.push_back(key);
  }
  return out;
}

}  // namespace sd::pipeline
