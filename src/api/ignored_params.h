// Request fields this build accepts (so sd.cpp command lines and bindings keep working)
// but does not use yet: each is named by its sd-cli flag and warned about once per
// process, so a user is not left to wonder why --slg-scale changed nothing. A field
// leaves this list when the feature lands.
#pragma once

#include <string>
#include <vector>

#include "stable-diffusion.h"

namespace sd::api {

// The flags whose values differ from sd_img_gen_params_init's defaults, each with what
// it would do, in a fixed order.
struct IgnoredFlag {
  const char* flag;
  const char* what;
};
std::vector<IgnoredFlag> ignored_flags(const sd_img_gen_params_t& p);

// Logs "<flag> (<what>) is not used by this build yet; ignored" at SD_LOG_WARN for each
// ignored flag not warned about before in this process.
void warn_ignored_flags(const sd_img_gen_params_t& p);

}  // namespace sd::api
