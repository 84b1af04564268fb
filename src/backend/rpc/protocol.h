// What both ends of the RPC link agree on: the protocol version, the manifest that proves
// they number ops and dtypes the same way, the metadata keys, limits and the content hash
// that keys the server's weight cache.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "backend/rpc/remote.pb.h"

namespace sd::rpc {

// Raised whenever the wire format or a call's meaning changes.
// 2: GroupNorm params[2] fuses an activation; 3: compute runs a range of nodes.
constexpr uint32_t kProtocolVersion = 3;
constexpr const char* kLayout = "ne4-nb4-le";
constexpr int kDefaultPort = 50052;

// Tensor bytes travel in chunks of this size; messages stay far below gRPC's limits.
constexpr size_t kChunkBytes = size_t{1} << 20;
// Largest message either side accepts: a chunk, or a compute request with inline inputs
// and its graph (a UNet graph is about 1 MB).
constexpr int kMaxMessageBytes = 64 << 20;
// HTTP/2 flow-control window both sides open from the start.
constexpr int kFlowWindowBytes = 16 << 20;
// Writes this small are queued and ride along with the next compute call.
constexpr size_t kInlineWriteBytes = size_t{1} << 20;
// Weights at least this big go through the weight cache.
constexpr size_t kCachedWriteMinBytes = size_t{64} << 10;
// Graph limits the server enforces.
constexpr int kMaxGraphTensors = 1 << 18;
constexpr int kMaxGraphsPerSession = 16;
// Tensors of the graphs a session keeps, together (the newest is kept whatever its size).
constexpr size_t kMaxKeptGraphTensors = size_t{1} << 18;

constexpr const char* kSessionKey = "sd-session";
constexpr const char* kTokenKey = "sd-token";

wire::Manifest local_manifest();
// Empty when `peer` matches this build; otherwise what differs, naming both sides.
std::string manifest_mismatch(const wire::Manifest& peer, const char* peer_role);

// xxh3-128 of a byte range: the weight cache's key.
struct ContentHash {
  uint64_t high = 0;
  uint64_t low = 0;
  bool operator==(const ContentHash&) const = default;
  std::string hex() const;
};
ContentHash content_hash(const void* data, size_t size);
inline wire::Hash128 to_wire(const ContentHash& h) {
  wire::Hash128 w;
  w.set_high(h.high);
  w.set_low(h.low);
  return w;
}
inline ContentHash from_wire(const wire::Hash128& w) {
  return {w.high(), w.low()};
}

// "1.72 GB", "340 KB" for logs.
std::string human_bytes(uint64_t bytes);

}  // namespace sd::rpc
