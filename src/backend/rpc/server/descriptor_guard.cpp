#include "backend/rpc/server/descriptor_guard.h"

#include <dirent.h>
#include <grpc/support/log.h>
#include <sys/resource.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <string>

#include "tensor/error.h"

namespace sd::rpc {

namespace {

std::atomic<uint64_t> g_accept_failures{0};

void on_grpc_log(gpr_log_func_args* args) {
  const char* message = args->message ? args->message : "";
  // tcp_server_posix: "Failed accept4: Too many open files" (EMFILE, ENFILE, ...).
  if (std::strncmp(message, "Failed accept", 13) == 0) g_accept_failures.fetch_add(1);
  const char* file = args->file ? args->file : "?";
  if (const char* slash = std::strrchr(file, '/')) file = slash + 1;
  std::fprintf(stderr, "[grpc %s:%d] %s\n", file, args->line,
               escape_control_chars(message).c_str());
}

}  // namespace

DescriptorLimit raise_descriptor_limit() {
  rlimit r{};
  if (getrlimit(RLIMIT_NOFILE, &r) != 0) return {};
  DescriptorLimit d{r.rlim_cur, r.rlim_cur};
  if (r.rlim_cur < r.rlim_max) {
    r.rlim_cur = r.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &r) == 0) d.after = r.rlim_cur;
  }
  return d;
}

size_t open_descriptors() {
  DIR* dir = opendir("/proc/self/fd");
  if (!dir) return descriptor_limit();  // no descriptor left even for this: all in use
  size_t n = 0;
  while (const dirent* e = readdir(dir)) n += e->d_name[0] != '.';
  closedir(dir);
  return n > 0 ? n - 1 : 0;  // the directory's own descriptor
}

size_t descriptor_limit() {
  rlimit r{};
  return getrlimit(RLIMIT_NOFILE, &r) == 0 ? static_cast<size_t>(r.rlim_cur) : 1024;
}

void watch_grpc_accept_failures() {
  static std::once_flag once;
  std::call_once(once, [] { gpr_set_log_function(on_grpc_log); });
}

uint64_t grpc_accept_failures() {
  return g_accept_failures.load();
}

}  // namespace sd::rpc
