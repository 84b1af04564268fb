// The generation-parameters text images carry (the AUTOMATIC1111 layout that
// stable-diffusion.cpp also writes):
//   <prompt, possibly several lines>
//   Negative prompt: <negative prompt, possibly several lines>
//   Steps: 20, CFG scale: 7.000000, Seed: 42, Size: 512x512, ..., SDCPP: {"schema": ...}
// split into its prompt, negative prompt and "Key: value" settings.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace sd::io {

struct GenerationParameters {
  std::string prompt;
  std::string negative_prompt;
  // In file order. Values keep their text: "7.000000", "[1, 2]", a JSON object for SDCPP.
  std::vector<std::pair<std::string, std::string>> settings;

  // The value of setting `key`, or "" when absent.
  std::string setting(const std::string& key) const;
};

// The last line is the settings line when it holds at least three "Key: value" items (or
// starts with "Steps: "); otherwise the whole text is prompt. Items are separated by
// commas outside brackets, braces and quotes, so "Skip layers: [7, 8, 9]" and a JSON value
// stay whole. Never throws.
GenerationParameters parse_generation_parameters(const std::string& text);

}  // namespace sd::io
