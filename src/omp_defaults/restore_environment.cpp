// The second half of passive_first.c, linked into libstable-diffusion.so only: libgomp has
// read its environment by the time this library's initializer runs, so the OMP_WAIT_POLICY
// that libstable-diffusion-omp added leaves the program's environment again.
#include <cstdlib>

extern "C" int sd_omp_wait_policy_defaulted(void);

namespace {

__attribute__((constructor)) void restore_environment() {
  if (sd_omp_wait_policy_defaulted()) unsetenv("OMP_WAIT_POLICY");
}

}  // namespace
