#include "sampling/guidance_extras.h"

#include <algorithm>
#include <cctype>
#include <cmath>

#include "tensor/error.h"
#include "tensor/text.h"

namespace sd::sampling {

namespace {

float to_float(const std::string& key, const std::string& value) {
  const std::optional<float> v = parse_finite_float(value);
  SD_CHECK(v, "--extra-sample-args %s=%s: '%s' is not a number", key.c_str(), value.c_str(),
           value.c_str());
  return *v;
}

float sum_of_products(const std::vector<float>& a, const std::vector<float>& b) {
  float sum = 0.0f;
  for (size_t i = 0; i < a.size(); ++i) sum += a[i] * b[i];
  return sum;
}

}  // namespace

std::vector<float> parse_guidance_schedule(const std::string& spec) {
  std::vector<float> schedule;
  size_t start = 0;
  while (start < spec.size()) {
    size_t end = spec.find('+', start);
    if (end == std::string::npos) end = spec.size();
    const std::string segment = spec.substr(start, end - start);
    start = end + 1;
    const size_t x = segment.find('x');
    SD_CHECK(x != std::string::npos,
             "guidance_schedule segment '%s' is not <scale>x<count> (e.g. 7x5+3.5x15)",
             segment.c_str());
    const float scale = to_float("guidance_schedule", segment.substr(0, x));
    const std::optional<long> count = parse_whole_number(segment.substr(x + 1));
    SD_CHECK(count && *count > 0 && *count <= 100000,
             "guidance_schedule segment '%s': the count must be a positive whole number",
             segment.c_str());
    schedule.insert(schedule.end(), static_cast<size_t>(*count), scale);
  }
  return schedule;
}

GuidanceExtras parse_guidance_extras(const std::string& text) {
  GuidanceExtras extras;
  size_t start = 0;
  for (size_t pos = 0; pos <= text.size(); ++pos) {
    if (pos != text.size() && text[pos] != ',' && text[pos] != ';') continue;
    const std::string token = trim(text.substr(start, pos - start));
    start = pos + 1;
    if (token.empty()) continue;
    const size_t eq = token.find('=');
    SD_CHECK(eq != std::string::npos, "--extra-sample-args '%s' is not key=value", token.c_str());
    const std::string key = trim(token.substr(0, eq)), value = trim(token.substr(eq + 1));
    SD_CHECK(!key.empty(), "--extra-sample-args '%s' has no key before its '='", token.c_str());
    SD_CHECK(value.find('=') == std::string::npos,
             "--extra-sample-args '%s' has more than one '='; separate key=value pairs with ','",
             token.c_str());
    if (key == "apg_eta") {
      extras.apg.eta = to_float(key, value);
    } else if (key == "apg_momentum") {
      extras.apg.momentum = to_float(key, value);
    } else if (key == "apg_norm_threshold") {
      extras.apg.norm_threshold = to_float(key, value);
    } else if (key == "apg_norm_threshold_smoothing") {
      extras.apg.norm_threshold_smoothing = to_float(key, value);
    } else if (key == "guidance_schedule") {
      extras.schedule = parse_guidance_schedule(value);
    } else {
      extras.unknown.push_back(key);
    }
  }
  return extras;
}

namespace {

// The direction guidance pushes along. With an image-unconditional output it is the one
// that makes cond + (scale - 1) * delta the three-way CFG result (or, at scale 1, the image
// term alone).
std::vector<float> guidance_direction(const std::vector<float>& cond,
                                      const std::vector<float>* uncond,
                                      const std::vector<float>* img_uncond, float scale,
                                      float img_scale) {
  std::vector<float> delta(cond.size());
  for (size_t i = 0; i < cond.size(); ++i) {
    if (!img_uncond) {
      delta[i] = cond[i] - (*uncond)[i];
    } else if (!uncond) {
      delta[i] = cond[i] - (*img_uncond)[i];
    } else if (scale == 1.0f) {
      delta[i] = (*uncond)[i] - (*img_uncond)[i];
    } else {
      delta[i] =
          cond[i] + ((*uncond)[i] * (img_scale - scale) + (*img_uncond)[i] * (1.0f - img_scale)) /
                        (scale - 1.0f);
    }
  }
  return delta;
}

}  // namespace

std::vector<float> AdaptiveProjectedGuidance::guide(const std::vector<float>& cond,
                                                    const std::vector<float>* uncond,
                                                    const std::vector<float>* img_uncond,
                                                    float scale, float img_scale) {
  SD_CHECK(uncond || img_uncond, "[apg] needs an unconditional output");
  std::vector<float> delta = guidance_direction(cond, uncond, img_uncond, scale, img_scale);
  if (options_.momentum != 0.0f) {
    if (momentum_.size() != delta.size()) momentum_.assign(delta.size(), 0.0f);
    for (size_t i = 0; i < delta.size(); ++i) delta[i] += options_.momentum * momentum_[i];
    momentum_ = delta;
  }
  if (options_.norm_threshold > 0.0f) {
    // The norm per element, scaled to SDXL's 1024x1024 latent as the reference measures it.
    const float standard = 2 * 1024 / 8;
    const float norm = std::sqrt(sum_of_products(delta, delta)) * standard /
                       std::sqrt(static_cast<float>(delta.size()));
    float factor = 1.0f;
    if (norm > 0.0f) {
      const float x = options_.norm_threshold / norm;
      const float s = options_.norm_threshold_smoothing;
      factor = s <= 0.0f ? std::min(1.0f, x) : x / std::pow(1.0f + std::pow(x, 1.0f / s), s);
    }
    for (float& d : delta) d *= factor;
  }
  if (options_.eta != 1.0f) {
    // Scale the part of the direction parallel to the conditional output by eta.
    const float cond_norm_sq = sum_of_products(cond, cond);
    if (cond_norm_sq != 0.0f) {
      const float projection = sum_of_products(cond, delta) / cond_norm_sq;
      for (size_t i = 0; i < delta.size(); ++i)
        delta[i] += (options_.eta - 1.0f) * (projection * cond[i]);
    }
  }
  std::vector<float> out(cond.size());
  if (!uncond) {  // CFG against the image-unconditional output alone
    for (size_t i = 0; i < cond.size(); ++i) out[i] = (*img_uncond)[i] + scale * delta[i];
    return out;
  }
  // At scale 1 only the image term guides (none without image guidance: cond itself).
  const float step = scale != 1.0f ? scale - 1.0f : img_uncond ? img_scale - 1.0f : 0.0f;
  for (size_t i = 0; i < cond.size(); ++i) out[i] = cond[i] + step * delta[i];
  return out;
}

}  // namespace sd::sampling
