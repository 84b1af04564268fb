// libstable-diffusion-omp: makes libgomp's idle threads sleep rather than spin in a program
// that loads libstable-diffusion.so and did not choose (no OMP_WAIT_POLICY or
// GOMP_SPINCOUNT in its environment), as sd-cli and sd-server do for themselves.
//
// libgomp reads its environment once, in its own initializer, and libstable-diffusion.so
// depends on it, so its initializer runs first. This object is its own library, marked
// "initialize first" (ld -z initfirst): loaded with libstable-diffusion.so (dlopen, as
// bindings do), its initializer runs before libgomp's and adds OMP_WAIT_POLICY=passive;
// libstable-diffusion.so's own initializer, which runs after libgomp's, takes it out of the
// environment again (restore_environment.cpp), so the program's environment is as it was.
// A program linked against the library at build time starts with its environment set up by
// the C library after this runs, so there it changes nothing: set OMP_WAIT_POLICY yourself.
#include <stdlib.h>

static int defaulted = 0;

__attribute__((constructor)) static void default_to_passive_waiting(void) {
  if (getenv("OMP_WAIT_POLICY") != NULL || getenv("GOMP_SPINCOUNT") != NULL) return;
  defaulted = setenv("OMP_WAIT_POLICY", "passive", 0) == 0;
}

// Whether OMP_WAIT_POLICY was added here (and is to be taken out once libgomp has read it).
__attribute__((visibility("default"))) int sd_omp_wait_policy_defaulted(void) {
  return defaulted;
}
