// CPU seconds this process has used (all threads, user and system): beside wall time, it
// shows how busy the threads kept the cores.
#pragma once

#include <ctime>

namespace sd {

inline double process_cpu_seconds() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

}  // namespace sd
