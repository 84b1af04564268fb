#include "sampling/step_cache.h"

#include <cmath>
#include <functional>
#include <map>
#include <set>

#include "sampling/cache_dit.h"
#include "sampling/easycache.h"
#include "sampling/ucache.h"
#include "tensor/error.h"
#include "tensor/text.h"

namespace sd::sampling {

namespace {

struct ModeName {
  CacheMode mode;
  const char* name;
};
constexpr ModeName kModes[] = {
    {CacheMode::None, "disabled"},      {CacheMode::UCache, "ucache"},
    {CacheMode::Spectrum, "spectrum"},  {CacheMode::EasyCache, "easycache"},
    {CacheMode::DbCache, "dbcache"},    {CacheMode::TaylorSeer, "taylorseer"},
    {CacheMode::CacheDit, "cache-dit"},
};

float parse_float(const std::string& key, const std::string& value) {
  const std::optional<float> v = parse_finite_float(value);
  SD_CHECK(v, "--cache-option %s=%s: '%s' is not a number", key.c_str(), value.c_str(),
           value.c_str());
  return *v;
}

int parse_int(const std::string& key, const std::string& value) {
  const std::optional<long> v = parse_whole_number(value);
  SD_CHECK(v && *v >= -1000000 && *v <= 1000000, "--cache-option %s=%s: '%s' is not a whole number",
           key.c_str(), value.c_str(), value.c_str());
  return static_cast<int>(*v);
}

bool parse_switch(const std::string& key, const std::string& value) {
  // The reference reads these as numbers, any non-zero meaning on.
  return parse_float(key, value) != 0.0f;
}

using Setter = std::function<void(CacheOptions&, const std::string& key, const std::string&)>;

const std::map<std::string, Setter>& keys_of(CacheMode mode) {
  static const std::map<std::string, Setter> ucache = {
      {"threshold",
       [](CacheOptions& o, auto& k, auto& v) { o.ucache.threshold = parse_float(k, v); }},
      {"start", [](CacheOptions& o, auto& k, auto& v) { o.ucache.start = parse_float(k, v); }},
      {"end", [](CacheOptions& o, auto& k, auto& v) { o.ucache.end = parse_float(k, v); }},
      {"decay", [](CacheOptions& o, auto& k, auto& v) { o.ucache.decay = parse_float(k, v); }},
      {"relative",
       [](CacheOptions& o, auto& k, auto& v) { o.ucache.relative = parse_switch(k, v); }},
      {"reset", [](CacheOptions& o, auto& k, auto& v) { o.ucache.reset = parse_switch(k, v); }},
  };
  static const std::map<std::string, Setter> spectrum = {
      {"w", [](CacheOptions& o, auto& k, auto& v) { o.spectrum.w = parse_float(k, v); }},
      {"m", [](CacheOptions& o, auto& k, auto& v) { o.spectrum.m = parse_int(k, v); }},
      {"lam", [](CacheOptions& o, auto& k, auto& v) { o.spectrum.lam = parse_float(k, v); }},
      {"window", [](CacheOptions& o, auto& k, auto& v) { o.spectrum.window = parse_int(k, v); }},
      {"flex", [](CacheOptions& o, auto& k, auto& v) { o.spectrum.flex = parse_float(k, v); }},
      {"warmup", [](CacheOptions& o, auto& k, auto& v) { o.spectrum.warmup = parse_int(k, v); }},
      {"stop", [](CacheOptions& o, auto& k, auto& v) { o.spectrum.stop = parse_float(k, v); }},
  };
  static const std::map<std::string, Setter> easycache = {
      {"threshold",
       [](CacheOptions& o, auto& k, auto& v) { o.easycache.threshold = parse_float(k, v); }},
      {"start", [](CacheOptions& o, auto& k, auto& v) { o.easycache.start = parse_float(k, v); }},
      {"end", [](CacheOptions& o, auto& k, auto& v) { o.easycache.end = parse_float(k, v); }},
  };
  static const std::map<std::string, Setter> blocks = {
      {"threshold",
       [](CacheOptions& o, auto& k, auto& v) { o.blocks.threshold = parse_float(k, v); }},
      {"Fn", [](CacheOptions& o, auto& k, auto& v) { o.blocks.front_blocks = parse_int(k, v); }},
      {"fn", [](CacheOptions& o, auto& k, auto& v) { o.blocks.front_blocks = parse_int(k, v); }},
      {"Bn", [](CacheOptions& o, auto& k, auto& v) { o.blocks.back_blocks = parse_int(k, v); }},
      {"bn", [](CacheOptions& o, auto& k, auto& v) { o.blocks.back_blocks = parse_int(k, v); }},
      {"warmup", [](CacheOptions& o, auto& k, auto& v) { o.blocks.warmup = parse_int(k, v); }},
  };
  static const std::map<std::string, Setter> none;
  switch (mode) {
    case CacheMode::UCache:
      return ucache;
    case CacheMode::Spectrum:
      return spectrum;
    case CacheMode::EasyCache:
      return easycache;
    case CacheMode::DbCache:
    case CacheMode::TaylorSeer:
    case CacheMode::CacheDit:
      return blocks;
    case CacheMode::None:
      break;
  }
  return none;
}

std::string key_list(CacheMode mode) {
  std::string out;
  for (const auto& [key, setter] : keys_of(mode)) out += (out.empty() ? "" : ", ") + key;
  return out.empty() ? "none" : out;
}

}  // namespace

CacheMode parse_cache_mode(const std::string& name) {
  for (const ModeName& m : kModes)
    if (name == m.name) return m.mode;
  std::string names;
  for (const ModeName& m : kModes) names += (names.empty() ? "" : ", ") + std::string(m.name);
  fail("unknown cache mode '%s'; valid: %s", name.c_str(), names.c_str());
}

const char* cache_mode_name(CacheMode mode) {
  for (const ModeName& m : kModes)
    if (mode == m.mode) return m.name;
  return "?";
}

bool cache_mode_fits(CacheMode mode, bool unet) {
  switch (mode) {
    case CacheMode::None:
    case CacheMode::Spectrum:
      return true;
    case CacheMode::UCache:
      return unet;
    case CacheMode::EasyCache:
    case CacheMode::DbCache:
    case CacheMode::TaylorSeer:
    case CacheMode::CacheDit:
      return !unet;
  }
  return false;
}

std::string cache_modes_for(bool unet) {
  std::string names;
  for (const ModeName& m : kModes)
    if (m.mode != CacheMode::None && cache_mode_fits(m.mode, unet))
      names += (names.empty() ? "" : ", ") + std::string(m.name);
  return names;
}

void parse_cache_options(CacheMode mode, const std::string& text, CacheOptions& options) {
  std::set<std::string> given;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find(',', start);
    if (end == std::string::npos) end = text.size();
    const std::string item = text.substr(start, end - start);
    start = end + 1;
    const size_t eq = item.find('=');
    SD_CHECK(eq != std::string::npos, "--cache-option '%s' is not key=value", item.c_str());
    const std::string key = item.substr(0, eq), value = item.substr(eq + 1);
    const auto& keys = keys_of(mode);
    auto it = keys.find(key);
    SD_CHECK(it != keys.end(), "--cache-option '%s': %s has no option '%s'; its options: %s",
             item.c_str(), cache_mode_name(mode), key.c_str(), key_list(mode).c_str());
    SD_CHECK(given.insert(key).second, "--cache-option: '%s' is given twice", key.c_str());
    it->second(options, key, value);
  }
  check_cache_options(options);
}

void check_cache_options(const CacheOptions& o) {
  if (o.mode == CacheMode::UCache) {
    const UCacheOptions& u = o.ucache;
    SD_CHECK(u.threshold >= 0.0f, "ucache threshold must not be negative, got %g", u.threshold);
    SD_CHECK(u.start >= 0.0f && u.start < 1.0f && u.end > 0.0f && u.end <= 1.0f && u.start < u.end,
             "ucache start and end must satisfy 0 <= start < end <= 1, got %g and %g", u.start,
             u.end);
    SD_CHECK(u.decay >= 0.0f && u.decay <= 1.0f, "ucache decay must be in [0, 1], got %g", u.decay);
  }
  if (o.mode == CacheMode::EasyCache) {
    const EasyCacheOptions& e = o.easycache;
    SD_CHECK(e.threshold >= 0.0f, "easycache threshold must not be negative, got %g", e.threshold);
    SD_CHECK(e.start >= 0.0f && e.start < 1.0f && e.end > 0.0f && e.end <= 1.0f && e.start < e.end,
             "easycache start and end must satisfy 0 <= start < end <= 1, got %g and %g", e.start,
             e.end);
  }
  if (o.mode == CacheMode::DbCache || o.mode == CacheMode::TaylorSeer ||
      o.mode == CacheMode::CacheDit) {
    const BlockCacheOptions& b = o.blocks;
    const char* name = cache_mode_name(o.mode);
    SD_CHECK(b.threshold >= 0.0f, "%s threshold must not be negative, got %g", name, b.threshold);
    SD_CHECK(b.front_blocks >= 0 && b.back_blocks >= 0,
             "%s Fn and Bn (blocks always computed) must not be negative, got %d and %d", name,
             b.front_blocks, b.back_blocks);
    SD_CHECK(b.warmup >= 0, "%s warmup must not be negative, got %d", name, b.warmup);
  }
  if (o.mode == CacheMode::Spectrum) {
    const SpectrumOptions& s = o.spectrum;
    SD_CHECK(s.w >= 0.0f && s.w <= 1.0f, "spectrum w must be in [0, 1], got %g", s.w);
    SD_CHECK(s.m >= 0 && s.m <= 16, "spectrum m (the Chebyshev degree) must be 0 to 16, got %d",
             s.m);
    SD_CHECK(s.lam >= 0.0f, "spectrum lam must not be negative, got %g", s.lam);
    SD_CHECK(s.window >= 1, "spectrum window must be at least 1, got %d", s.window);
    SD_CHECK(s.flex >= 0.0f, "spectrum flex must not be negative, got %g", s.flex);
    SD_CHECK(s.warmup >= 0, "spectrum warmup must not be negative, got %d", s.warmup);
    SD_CHECK(s.stop > 0.0f && s.stop <= 1.0f, "spectrum stop must be in (0, 1], got %g", s.stop);
  }
}

std::unique_ptr<OutputCache> make_output_cache(const CacheOptions& options,
                                               const std::vector<float>& sigmas,
                                               const DiscreteSchedule& schedule) {
  switch (options.mode) {
    case CacheMode::UCache:
      return std::make_unique<UCache>(options.ucache, sigmas);
    case CacheMode::EasyCache:
      return std::make_unique<EasyCache>(options.easycache, schedule);
    case CacheMode::DbCache:
    case CacheMode::TaylorSeer:
    case CacheMode::CacheDit:
      return std::make_unique<CacheDit>(options.blocks, sigmas);
    case CacheMode::None:
    case CacheMode::Spectrum:
      break;
  }
  return nullptr;
}

}  // namespace sd::sampling
