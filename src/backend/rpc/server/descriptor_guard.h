// Keeping sd-rpc-server reachable when file descriptors run out. A flood of plain TCP
// connections can use up the process's descriptors; gRPC 1.51's listener then fails
// accept() with EMFILE and never polls its socket again, so the server would stay alive
// and unreachable. The server raises its limit at start, and watches gRPC's log for a
// failed accept so that it can restart its listener once descriptors are free.
#pragma once

#include <cstddef>
#include <cstdint>

namespace sd::rpc {

struct DescriptorLimit {
  uint64_t before = 0, after = 0;
};

// Raises the soft limit on open descriptors to the hard limit.
DescriptorLimit raise_descriptor_limit();

// Descriptors this process has open now, and the most it may open.
size_t open_descriptors();
size_t descriptor_limit();

// Routes gRPC's own log lines to stderr (control characters escaped) and counts its failed
// accepts. Installed once per process; later calls do nothing.
void watch_grpc_accept_failures();
// Failed accepts gRPC reported since the watch was installed.
uint64_t grpc_accept_failures();

}  // namespace sd::rpc
