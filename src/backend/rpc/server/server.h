// sd-rpc-server's engine: serves this machine's devices to remote clients over gRPC.
// Each client gets a session with its own buffers, graphs and backends; the session and
// all it holds are freed when the client disconnects. Every request is checked before it
// touches memory, so a misbehaving client gets an error and the others carry on.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/rpc/access.h"

namespace sd::rpc {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 50052;              // 0: any free port (see Server::port())
  std::vector<Device*> devices;  // served in this order; empty: every local device
  int threads = 0;               // compute threads per session; 0: all cores
  size_t memory_limit = 0;       // bytes of buffers per device over all sessions; 0: 90% of it
  size_t cache_memory = size_t{4} << 30;  // also within memory_limit per device
  int max_sessions = 8;       // clients served at once; each holds a thread while connected
  int compute_timeout = 600;  // seconds one compute call may run; 0: no limit
  std::string cache_dir;      // empty: weights are cached in memory only
  std::string token;          // empty: no token asked for
  std::string tls_cert_pem, tls_key_pem;  // both empty: plaintext
  bool insecure = false;                  // allow a non-loopback bind without a token
  bool verbose = false;  // log every failed request, refusals and cache misses included
  std::function<void(const std::string&)> log;  // one line per event
};

class Server {
 public:
  // Checks the options (a non-loopback bind needs a token or `insecure`), binds and starts
  // serving. Throws sd::Error naming the problem and the fix.
  explicit Server(ServerOptions options);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  int port() const;
  // Blocks until shutdown() is called from another thread or a signal handler's thread.
  // Throws sd::Error when the listener died and could not be restarted (descriptors
  // exhausted for good), so that the process exits non-zero and a supervisor restarts it.
  void wait();
  void shutdown();
  // Sessions open now (for tests and the log).
  size_t session_count() const;
  // Bytes of weight buffers the in-memory cache holds (for tests and the log).
  size_t cached_bytes() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace sd::rpc
