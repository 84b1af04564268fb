#include "io/image_parameters.h"

#include <cctype>

#include "tensor/text.h"

namespace sd::io {

std::string GenerationParameters::setting(const std::string& key) const {
  for (const auto& [k, v] : settings) {
    if (k == key) return v;
  }
  return "";
}

namespace {

// Splits at commas outside (), [], {} and "..." (with backslash escapes).
std::vector<std::string> split_items(const std::string& line) {
  std::vector<std::string> items;
  std::string current;
  int depth = 0;
  bool quoted = false;
  for (size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quoted) {
      current += c;
      if (c == '\\' && i + 1 < line.size()) {
        current += line[++i];
      } else if (c == '"') {
        quoted = false;
      }
      continue;
    }
    if (c == '"') quoted = true;
    if (c == '[' || c == '{' || c == '(') ++depth;
    if ((c == ']' || c == '}' || c == ')') && depth > 0) --depth;
    if (c == ',' && depth == 0) {
      items.push_back(current);
      current.clear();
    } else {
      current += c;
    }
  }
  items.push_back(current);
  return items;
}

// A key as A1111 writes them: a word character, then words, spaces, '-' and '/'.
bool is_key(const std::string& key) {
  if (key.empty() || !(std::isalnum(static_cast<unsigned char>(key[0])) || key[0] == '_')) {
    return false;
  }
  for (char c : key) {
    const auto u = static_cast<unsigned char>(c);
    if (!(std::isalnum(u) || c == '_' || c == ' ' || c == '-' || c == '/' || u >= 0x80)) {
      return false;
    }
  }
  return true;
}

// "Key: value" items of a settings line; an item without a key continues the previous
// value (a comma inside an unbracketed value).
std::vector<std::pair<std::string, std::string>> parse_settings(const std::string& line) {
  std::vector<std::pair<std::string, std::string>> settings;
  for (const std::string& raw : split_items(line)) {
    const std::string item = trim(raw);
    if (item.empty()) continue;
    const size_t colon = item.find(':');
    const std::string key = colon == std::string::npos ? "" : trim(item.substr(0, colon));
    if (colon != std::string::npos && is_key(key)) {
      settings.emplace_back(key, trim(item.substr(colon + 1)));
    } else if (!settings.empty()) {
      settings.back().second += ", " + item;
    } else {
      return {};
    }
  }
  return settings;
}

std::string join_lines(const std::vector<std::string>& lines) {
  std::string out;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (i) out += '\n';
    out += lines[i];
  }
  return out;
}

}  // namespace

GenerationParameters parse_generation_parameters(const std::string& text) {
  GenerationParameters p;
  std::vector<std::string> lines;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(start, end - start);
    if (!line.empty() && line.back() == '\r') line.pop_back();
    lines.push_back(std::move(line));
    start = end + 1;
  }
  while (lines.size() > 1 && trim(lines.back()).empty()) lines.pop_back();

  if (!lines.empty()) {
    const std::string last = trim(lines.back());
    auto settings = parse_settings(last);
    if (settings.size() >= 3 || (!settings.empty() && last.rfind("Steps: ", 0) == 0)) {
      p.settings = std::move(settings);
      lines.pop_back();
    }
  }
  static const std::string kNegative = "Negative prompt:";
  std::vector<std::string> prompt_lines, negative_lines;
  for (const std::string& line : lines) {
    if (negative_lines.empty() && line.rfind(kNegative, 0) == 0) {
      negative_lines.push_back(line.substr(kNegative.size()));
    } else {
      (negative_lines.empty() ? prompt_lines : negative_lines).push_back(line);
    }
  }
  p.prompt = join_lines(prompt_lines);
  p.negative_prompt = join_lines(negative_lines);
  p.prompt = trim(p.prompt);
  p.negative_prompt = trim(p.negative_prompt);
  return p;
}

}  // namespace sd::io
