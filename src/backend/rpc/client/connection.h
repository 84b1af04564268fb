// One client's link to one sd-rpc-server: a gRPC channel with keep-alives, the session
// (opened by a versioned hello, alive while its stream is open), and the calls the RPC
// device makes. Thread-safe: weights are uploaded from several threads at once.
//
// Two things keep a sampling step to one round trip: small writes (a step's inputs) are
// queued and ride with the next compute call, and the compute reply carries the graph's
// outputs, which later reads are served from.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/rpc/remote.pb.h"

namespace sd::rpc {

struct ClientOptions {
  std::string token;   // sent with every call when not empty
  std::string ca_pem;  // trusted roots for tls:// servers; empty: the system's
  // Bound on a call that moves no bulk data, and on opening a session.
  double call_timeout_s = 30;
  // Bound on one compute call (a whole UNet step or VAE decode on the server).
  double compute_timeout_s = 600;
  // Pings every keepalive_s seconds while connected; a server that does not answer one
  // within keepalive_timeout_s is dead (a killed server process is noticed at once).
  int keepalive_s = 10;
  int keepalive_timeout_s = 20;
};

// From SD_RPC_TOKEN, SD_RPC_TOKEN_FILE, SD_RPC_CA and SD_RPC_TIMEOUT (seconds per
// compute call). Throws when a named file cannot be read.
ClientOptions client_options_from_environment();

// Bytes moved, for logs, tests and benchmarks.
struct TrafficStats {
  uint64_t weight_bytes_sent = 0;    // weights streamed because the server lacked them
  uint64_t weight_bytes_cached = 0;  // weights the server filled from its cache
  uint64_t bytes_sent = 0;           // every tensor byte sent (weights included)
  uint64_t bytes_received = 0;
  uint64_t compute_calls = 0;
  uint64_t graphs_sent = 0;  // compute calls that carried their whole graph
};

class Connection {
 public:
  // `endpoint` is host:port, [v6]:port, or tls://host:port. Opens a session; throws
  // sd::Error naming the server when it is unreachable, refuses us or speaks another
  // protocol version.
  Connection(std::string endpoint, ClientOptions options);
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  const std::string& endpoint() const { return endpoint_; }
  const wire::Welcome& welcome() const { return welcome_; }
  // Changes when the session is replaced after the server went away: buffers of an
  // older session are gone.
  uint64_t session_generation() const { return generation_; }
  // A call failed in a way that may have ended the session; the next allocation opens a
  // new one.
  bool session_lost() const { return session_lost_; }

  DeviceMemory memory(uint32_t device);
  uint64_t alloc(uint32_t device, size_t size);
  // Never throws: a buffer of a lost session or an unreachable server is simply gone.
  void free(uint64_t buffer) noexcept;
  void clear(uint64_t buffer, uint8_t value);
  // `cacheable`: whole weights, sent by content hash through the server's cache.
  void write(uint64_t buffer, uint64_t offset, const void* data, size_t size, bool cacheable);
  void read(uint64_t buffer, uint64_t offset, void* data, size_t size);
  // Runs nodes [first, end) of a described graph; `reads` are read back with the reply
  // (the outputs). Other calls (uploads of weights for later nodes) may run meanwhile.
  void compute(uint32_t device, uint64_t graph_hash, const wire::GraphDesc& graph,
               const std::vector<wire::Range>& reads, size_t first, size_t end);

  TrafficStats stats() const;

 private:
  struct Channel;
  void open_session();
  // Throws the error for a failed call, naming the server, the call and what to do.
  [[noreturn]] void fail(const char* call, int grpc_code, const std::string& message);
  void flush_writes();
  void stream_write(uint64_t buffer, uint64_t offset, const void* data, size_t size,
                    const wire::Hash128* hash);
  bool read_from_outputs(uint64_t buffer, uint64_t offset, void* data, size_t size);

  std::string endpoint_;
  ClientOptions options_;
  std::unique_ptr<Channel> channel_;
  wire::Welcome welcome_;
  std::atomic<uint64_t> generation_{0};
  std::atomic<bool> session_lost_{false};

  mutable std::mutex mutex_;  // guards everything below
  std::vector<wire::InlineWrite> queued_;
  size_t queued_bytes_ = 0;
  std::vector<std::pair<wire::Range, std::string>> outputs_;  // the last compute's reads
  std::set<uint64_t> known_graphs_;                           // graphs the session holds
  TrafficStats stats_;
};

}  // namespace sd::rpc
