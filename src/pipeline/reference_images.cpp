#include "pipeline/reference_images.h"

#include <algorithm>
#include <cctype>
#include <cmath>

#include "tensor/error.h"
#include "tensor/text.h"

namespace sd::pipeline {

namespace {

// sd.cpp's strict booleans: 1/true/yes/on and 0/false/no/off, any case.
bool to_bool(const std::string& key, const std::string& value) {
  const std::string v = ascii_lower(value);
  if (v == "1" || v == "true" || v == "yes" || v == "on") return true;
  if (v == "0" || v == "false" || v == "no" || v == "off") return false;
  fail("--ref-image-args %s=%s: '%s' is not a boolean (use 1/0, true/false, on/off)", key.c_str(),
       value.c_str(), value.c_str());
}

}  // namespace

ReferenceImageOptions parse_reference_image_args(const std::string& text,
                                                 std::vector<std::string>* ignored) {
  ReferenceImageOptions o;
  size_t start = 0;
  for (size_t pos = 0; pos <= text.size(); ++pos) {
    if (pos != text.size() && text[pos] != ',') continue;
    const std::string item = trim(text.substr(start, pos - start));
    start = pos + 1;
    if (item.empty()) continue;
    const size_t eq = item.find('=');
    SD_CHECK(eq != std::string::npos, "--ref-image-args '%s' is not key=value", item.c_str());
    const std::string key = trim(item.substr(0, eq)), value = trim(item.substr(eq + 1));
    if (key == "ref_index_mode") {
      if (value == "fixed")
        o.index_mode = models::RefIndexMode::Fixed;
      else if (value == "increase")
        o.index_mode = models::RefIndexMode::Increase;
      else if (value == "decrease")
        o.index_mode = models::RefIndexMode::Decrease;
      else
        fail("--ref-image-args ref_index_mode=%s: use fixed, increase or decrease", value.c_str());
    } else if (key == "resize_before_vae") {
      o.resize_before_vae = to_bool(key, value);
    } else if (key == "pass_to_dit") {
      o.pass_to_dit = to_bool(key, value);
    } else if (key == "pass_to_vlm") {
      o.pass_to_vlm = to_bool(key, value);
    } else if (key == "vae_input_max_pixels") {
      const std::optional<long> v = parse_whole_number(value);
      SD_CHECK(v && *v <= (1L << 30),
               "--ref-image-args vae_input_max_pixels=%s: not a whole number", value.c_str());
      o.vae_input_max_pixels = static_cast<int>(*v);
    } else if (key == "preset" && (value == "flux_kontext" || value == "flux2" || value == "qwen" ||
                                   value == "default")) {
      // The models' own, which the options start from.
    } else if (ignored) {
      ignored->push_back(key == "preset" ? item : key);
    }
  }
  return o;
}

std::pair<int, int> reference_vae_size(int ref_w, int ref_h, int out_w, int out_h, int max_pixels,
                                       int multiple) {
  const int64_t target = max_pixels > 0 ? max_pixels : 1024 * 1024;
  const int64_t pixels = std::min<int64_t>(target, static_cast<int64_t>(out_w) * out_h);
  // sd.cpp compatibility: pixels * w / h is an integer division before the square root.
  double w = std::sqrt(static_cast<double>(pixels * ref_w / ref_h));
  double h = w * ref_h / ref_w;
  w = std::round(w / multiple) * multiple;
  h = std::round(h / multiple) * multiple;
  SD_CHECK(w >= multiple && h >= multiple,
           "a %dx%d reference image is too narrow to resize for the VAE (a side rounds to 0 at "
           "%lld pixels); crop it closer to square",
           ref_w, ref_h, static_cast<long long>(pixels));
  return {static_cast<int>(w), static_cast<int>(h)};
}

}  // namespace sd::pipeline
