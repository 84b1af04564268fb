// Which device each module computes on (--backend) and where its weights live
// (--params-backend): the assignment grammar of the design, as sd.cpp spells it.
//
//   cuda0                          every module
//   te=cpu,vae=cuda0,diffusion=RPC0 per module; `all=`, `default=` or `*=` set the default
//   auto | default | ""            the default device (the first GPU, else the CPU)
//   gpu                            the first GPU
//   disk                           --params-backend only: read from the file per phase
//
// A module's own entry wins over the default whatever their order; a later entry for the
// same key replaces an earlier one. Module names are case-insensitive, ignore '-' and '_'
// and have aliases (model|unet|dit for the diffusion net, clip|text|t5 for the text
// encoders, ...).
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace sd {

enum class Module {
  Diffusion,
  TextEncoder,
  ClipVision,
  Vae,
  ControlNet,
  PhotoMaker,
  Upscaler,
  Detector,
};

// Every module, in the order messages list them.
const std::vector<Module>& all_modules();
// The module's short name as the grammar prints it: "diffusion", "te", "vae", ...
const char* module_name(Module m);
// The module a user's name means (any alias, any case, '-' and '_' ignored).
std::optional<Module> parse_module(std::string_view name);
// "diffusion (model, unet, dit), te (clip, text, ...), ..." for error messages.
std::string module_names_help();

// One parsed --backend or --params-backend value: device names as the user wrote them
// (trimmed), resolved against the devices later.
struct Assignment {
  std::string default_name;              // "" = the default device
  std::map<Module, std::string> module;  // per-module overrides

  // The name that applies to `m`: its own entry, else the default.
  const std::string& get(Module m) const;
  bool empty() const { return default_name.empty() && module.empty(); }
};

// Parses `spec`; `flag` ("--backend") names the option in errors. Throws sd::Error for an
// unknown module or an entry without a name (`te=`), listing the valid modules.
Assignment parse_assignment(std::string_view spec, const char* flag);

// True for the names that mean "the default device": "", "auto", "default".
bool is_default_device_name(std::string_view name);
// True for "disk" (any case).
bool is_disk_name(std::string_view name);

}  // namespace sd
