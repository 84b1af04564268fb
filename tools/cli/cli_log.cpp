#include "cli/cli_log.h"

#include <cstdarg>
#include <cstdio>
#include <string>

namespace sd::cli {

namespace {
bool g_verbose = false;
bool g_color = false;
}  // namespace

void set_log_style(bool verbose, bool color) {
  g_verbose = verbose;
  g_color = color;
}

void print_log(sd_log_level_t level, const char* text) {
  if (!text || (level == SD_LOG_DEBUG && !g_verbose)) return;
  const char* tag = "?????";
  int color = 33;
  switch (level) {
    case SD_LOG_DEBUG:
      tag = "DEBUG", color = 37;
      break;
    case SD_LOG_INFO:
      tag = "INFO", color = 34;
      break;
    case SD_LOG_WARN:
      tag = "WARN", color = 35;
      break;
    case SD_LOG_ERROR:
      tag = "ERROR", color = 31;
      break;
  }
  FILE* out = level == SD_LOG_ERROR ? stderr : stdout;
  if (g_color) {
    std::fprintf(out, "\033[%d;1m[%-5s]\033[0m %s", color, tag, text);
  } else {
    std::fprintf(out, "[%-5s] %s", tag, text);
  }
  std::fflush(out);
}

void log_message(sd_log_level_t level, const char* fmt, ...) {
  va_list args;
  va_start(args, fmt);
  char buffer[4096];
  std::vsnprintf(buffer, sizeof buffer, fmt, args);
  va_end(args);
  std::string text = buffer;
  if (text.empty() || text.back() != '\n') text += '\n';
  print_log(level, text.c_str());
}

}  // namespace sd::cli
