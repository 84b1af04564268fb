#include "api/image_info.h"

#include <cctype>
#include <cstdlib>
#include <nlohmann/json.hpp>

#include "io/image_metadata.h"
#include "io/image_parameters.h"
#include "tensor/error.h"

namespace sd::api {

namespace {

using Json = nlohmann::ordered_json;

constexpr size_t kBriefLength = 240;  // stable-diffusion.cpp's cut for --metadata-brief

Json number_json(const std::string& text) {
  char* end = nullptr;
  if (!text.empty() && text[0] == '-') {
    const long long v = std::strtoll(text.c_str(), &end, 10);
    if (end && *end == '\0') return v;
  } else {
    const unsigned long long v = std::strtoull(text.c_str(), &end, 10);
    if (end && *end == '\0') return v;
  }
  return text;
}

Json value_json(const io::MetadataValue& v) {
  if (v.is_group()) {
    Json group = Json::object();
    for (const auto& child : v.children) group[child.key] = value_json(child);
    return group;
  }
  return v.is_number ? number_json(v.text) : Json(v.text);
}

Json parameters_json(const io::ImageMetadata& m) {
  const io::GenerationParameters p = io::parse_generation_parameters(m.parameters);
  Json settings = Json::object();
  for (const auto& [key, value] : p.settings) {
    // stable-diffusion.cpp's "SDCPP" setting is a JSON document: keep it structured.
    Json parsed = key == "SDCPP" ? Json::parse(value, nullptr, false) : Json();
    settings[key] = parsed.is_object() ? parsed : Json(value);
  }
  return Json{{"source", m.parameters_source},
              {"text", m.parameters},
              {"prompt", p.prompt},
              {"negative_prompt", p.negative_prompt},
              {"settings", std::move(settings)}};
}

std::string report_json(const ImageInfoOptions& o, const io::ImageMetadata& m) {
  Json report{{"file", o.image}, {"format", m.format}};
  if (m.width > 0 && m.height > 0) {
    report["width"] = m.width;
    report["height"] = m.height;
  }
  if (!m.parameters.empty()) report["parameters"] = parameters_json(m);
  Json entries = Json::array();
  for (const auto& e : m.entries) {
    if (e.structural && !o.all) continue;
    Json entry{{"type", e.kind}, {"name", e.name}, {"offset", e.offset}, {"length", e.length}};
    if (!e.fields.empty()) {
      Json data = Json::object();
      for (const auto& f : e.fields) data[f.key] = value_json(f);
      entry["data"] = std::move(data);
    }
    if (!e.error.empty()) entry["error"] = e.error;
    if (o.raw && !e.raw_preview.empty()) entry["raw_hex_preview"] = e.raw_preview;
    entries.push_back(std::move(entry));
  }
  report["entries"] = std::move(entries);
  if (!m.warning.empty()) report["warning"] = m.warning;
  // Text from the file that is not UTF-8 shows as U+FFFD instead of failing the report.
  return report.dump(2, ' ', false, Json::error_handler_t::replace) + "\n";
}

class TextReport {
 public:
  explicit TextReport(bool brief) : brief_(brief) {}

  // "key: value", continuation lines indented under the key. Keys and values come from the
  // file, so control characters are shown escaped, never sent to the terminal.
  void line(int indent, const std::string& key, const std::string& value) {
    std::string text = value;
    if (brief_ && text.size() > kBriefLength) text = text.substr(0, kBriefLength) + "...";
    text = escape_control_chars(text, /*keep_newlines=*/true);
    const std::string pad(static_cast<size_t>(indent), ' ');
    out_ += pad + escape_control_chars(key) + ":";
    if (!text.empty()) out_ += " ";
    for (char c : text) {
      out_ += c;
      if (c == '\n') out_ += pad + "  ";
    }
    out_ += "\n";
  }
  void value(int indent, const io::MetadataValue& v) {
    if (!v.is_group()) return line(indent, v.key, v.text);
    line(indent, v.key, "");
    for (const auto& child : v.children) value(indent + 2, child);
  }
  // Text of the report's own; `untrusted` parts of it go through `shown`.
  void text(const std::string& s) { out_ += s; }
  static std::string shown(const std::string& untrusted) { return escape_control_chars(untrusted); }
  std::string take() { return std::move(out_); }

 private:
  bool brief_;
  std::string out_;
};

std::string report_text(const ImageInfoOptions& o, const io::ImageMetadata& m) {
  TextReport r(o.brief);
  r.text("File: " + TextReport::shown(o.image) + "\n");
  std::string format = m.format;
  if (m.width > 0 && m.height > 0) {
    format += " (" + std::to_string(m.width) + " x " + std::to_string(m.height) + ")";
  }
  r.text("Format: " + TextReport::shown(format) + "\n");
  if (!m.warning.empty()) r.text("Warning: " + TextReport::shown(m.warning) + "\n");
  r.text("\n");

  if (!m.parameters.empty()) {
    const io::GenerationParameters p = io::parse_generation_parameters(m.parameters);
    r.text("Generation parameters (" + TextReport::shown(m.parameters_source) + "):\n");
    r.line(2, "Prompt", p.prompt);
    if (!p.negative_prompt.empty()) r.line(2, "Negative prompt", p.negative_prompt);
    for (const auto& [key, value] : p.settings) r.line(2, key, value);
    r.text("\n");
  }

  bool any = false;
  for (const auto& e : m.entries) {
    if (e.structural && !o.all) continue;
    any = true;
    r.text((e.kind == "chunk" ? "Chunk: " : "Segment: ") + TextReport::shown(e.name) + " (offset " +
           std::to_string(e.offset) + ", " + std::to_string(e.length) + " bytes)\n");
    for (const auto& f : e.fields) r.value(2, f);
    if (!e.error.empty()) r.line(2, "error", e.error);
    if (o.raw && !e.raw_preview.empty()) r.line(2, "raw_hex_preview", e.raw_preview);
    r.text("\n");
  }
  if (!any) r.text("No metadata entries found.\n");
  return r.take();
}

}  // namespace

MetadataFormat parse_metadata_format(std::string_view name) {
  std::string lower(name);
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (lower == "text") return MetadataFormat::Text;
  if (lower == "json") return MetadataFormat::Json;
  fail("unknown metadata format '%.*s'; valid formats: text, json", static_cast<int>(name.size()),
       name.data());
}

std::string describe_image_metadata(const ImageInfoOptions& options) {
  SD_CHECK(!options.image.empty(), "[metadata] metadata mode needs an image: --image FILE");
  const io::ImageMetadata m = io::read_image_metadata(options.image, options.raw);
  return options.format == MetadataFormat::Json ? report_json(options, m) : report_text(options, m);
}

}  // namespace sd::api
