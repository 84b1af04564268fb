// sd-cli's messages and the library's, printed alike: "[INFO ] text" on stdout, errors on
// stderr, debug messages only with -v, tags colored with --color (sd.cpp's format).
#pragma once

#include "stable-diffusion.h"

namespace sd::cli {

void set_log_style(bool verbose, bool color);
void log_message(sd_log_level_t level, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
// For sd_set_log_callback: `text` already ends in '\n'.
void print_log(sd_log_level_t level, const char* text);

}  // namespace sd::cli
