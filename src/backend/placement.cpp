#include "backend/placement.h"

#include <algorithm>
#include <cctype>

#include "tensor/error.h"
#include "tensor/text.h"

namespace sd {
namespace {

struct ModuleNames {
  Module module;
  const char* name;
  std::vector<const char*> aliases;  // lower case, without '-' and '_'
};

// sd.cpp's module names and aliases, so its users' flags keep working.
const std::vector<ModuleNames>& module_table() {
  static const std::vector<ModuleNames> table = {
      {Module::Diffusion, "diffusion", {"model", "unet", "dit"}},
      {Module::TextEncoder,
       "te",
       {"clip", "text", "textencoder", "textencoders", "conditioner", "cond", "llm", "t5",
        "t5xxl"}},
      {Module::ClipVision, "clipvision", {"vision"}},
      {Module::Vae, "vae", {"firststage", "autoencoder", "tae"}},
      {Module::ControlNet, "controlnet", {"control"}},
      {Module::PhotoMaker, "photomaker", {"photomakerid", "pmid", "photo"}},
      {Module::Upscaler, "upscaler", {"esrgan", "hires"}},
      {Module::Detector, "detector", {"adetailer", "yolo"}},
  };
  return table;
}

}  // namespace

const std::vector<Module>& all_modules() {
  static const std::vector<Module> modules = [] {
    std::vector<Module> v;
    for (const ModuleNames& m : module_table()) v.push_back(m.module);
    return v;
  }();
  return modules;
}

const char* module_name(Module m) {
  for (const ModuleNames& n : module_table())
    if (n.module == m) return n.name;
  return "?";
}

std::optional<Module> parse_module(std::string_view name) {
  std::string key = ascii_lower(trim(name));
  key.erase(std::remove_if(key.begin(), key.end(), [](char c) { return c == '-' || c == '_'; }),
            key.end());
  for (const ModuleNames& n : module_table()) {
    if (key == n.name) return n.module;
    for (const char* alias : n.aliases)
      if (key == alias) return n.module;
  }
  return std::nullopt;
}

std::string module_names_help() {
  std::string s;
  for (const ModuleNames& n : module_table()) {
    if (!s.empty()) s += ", ";
    s += n.name;
    std::string aliases;
    for (const char* a : n.aliases) aliases += (aliases.empty() ? "" : ", ") + std::string(a);
    if (!aliases.empty()) s += " (" + aliases + ")";
  }
  return s;
}

const std::string& Assignment::get(Module m) const {
  auto it = module.find(m);
  return it != module.end() ? it->second : default_name;
}

Assignment parse_assignment(std::string_view spec, const char* flag) {
  Assignment a;
  size_t start = 0;
  while (start <= spec.size()) {
    size_t comma = spec.find(',', start);
    if (comma == std::string_view::npos) comma = spec.size();
    const std::string part = trim(spec.substr(start, comma - start));
    start = comma + 1;
    if (part.empty()) continue;
    const size_t eq = part.find('=');
    if (eq == std::string::npos) {
      a.default_name = part;
      continue;
    }
    const std::string key = trim(std::string_view(part).substr(0, eq));
    const std::string value = trim(std::string_view(part).substr(eq + 1));
    SD_CHECK(!key.empty() && !value.empty(),
             "%s: '%s' needs a module and a device, e.g. te=cpu or *=cpu", flag, part.c_str());
    const std::string key_lower = ascii_lower(key);
    if (key_lower == "all" || key_lower == "default" || key_lower == "*") {
      a.default_name = value;
      continue;
    }
    const std::optional<Module> m = parse_module(key);
    SD_CHECK(m, "%s: unknown module '%s'; modules are %s, or all/default/* for the rest", flag,
             key.c_str(), module_names_help().c_str());
    a.module[*m] = value;
  }
  return a;
}

bool is_default_device_name(std::string_view name) {
  const std::string n = ascii_lower(trim(name));
  return n.empty() || n == "auto" || n == "default";
}

bool is_disk_name(std::string_view name) {
  return ascii_lower(trim(name)) == "disk";
}

}  // namespace sd
