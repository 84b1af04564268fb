// OpenMP threads that run out of work sleep rather than spin, unless the user chose.
//
// libgomp's default keeps a waiting thread spinning (about 300000 iterations) at every
// barrier and between parallel regions. On a machine shared with other work, a thread
// preempted inside a parallel region leaves the others spinning until it runs again:
// an ESRGAN upscale on 2 threads of a loaded 2-core machine spent 85% of its CPU time
// spinning in libgomp, at 9x the CPU time and 25x the wall time of the same run with
// sleeping threads. Sleeping costs a futex wake per parallel region, microseconds against
// convolutions of milliseconds. OMP_WAIT_POLICY=active (or a GOMP_SPINCOUNT) in the
// environment keeps spinning, for a machine the program has to itself.
//
// libgomp reads its environment once, in its library constructor, before main; and the C
// library sets up the environment that setenv changes only after the executable's
// preinit_array has run. So the program, first thing in its preinit_array, runs itself
// again with OMP_WAIT_POLICY=passive added to the environment it was given; if that
// fails (no /proc), it carries on with libgomp's default. Each program of tools/ compiles
// this file in (an object of a static library would not be linked).
#include <alloca.h>
#include <unistd.h>

#include <cstring>

namespace {

bool names(const char* entry, const char* name) {
  const size_t n = std::strlen(name);
  return std::strncmp(entry, name, n) == 0 && entry[n] == '=';
}

void default_omp_wait_policy(int, char** argv, char** envp) {
  size_t count = 0;
  for (; envp[count]; ++count)
    if (names(envp[count], "OMP_WAIT_POLICY") || names(envp[count], "GOMP_SPINCOUNT")) return;
  // Before the C library's own setup: no malloc, no setenv.
  auto** env = static_cast<char**>(alloca((count + 2) * sizeof(char*)));
  std::memcpy(env, envp, count * sizeof(char*));
  static char policy[] = "OMP_WAIT_POLICY=passive";
  env[count] = policy;
  env[count + 1] = nullptr;
  execve("/proc/self/exe", argv, env);  // returns only when it failed
}

__attribute__((section(".preinit_array"),
               used)) void (*const kDefaultOmpWaitPolicy)(int, char**,
                                                          char**) = default_omp_wait_policy;

}  // namespace
