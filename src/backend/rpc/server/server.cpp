#include "backend/rpc/server/server.h"

#include <arpa/inet.h>
#include <grpcpp/grpcpp.h>
#include <xxhash.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <list>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <thread>

#include "backend/registry.h"
#include "backend/rpc/graph_wire.h"
#include "backend/rpc/protocol.h"
#include "backend/rpc/remote.grpc.pb.h"
#include "backend/rpc/server/descriptor_guard.h"
#include "backend/rpc/server/weight_cache.h"
#include "tensor/error.h"

namespace sd::rpc {

namespace {

using grpc::ServerContext;
using grpc::Status;
using grpc::StatusCode;

// A device as served: its local Device, the bytes all sessions hold on it, and the limit.
struct ServedDevice {
  Device* device;
  std::atomic<size_t> used{0};
  size_t limit;
};

// One client's state. Calls of one session are serialized by its mutex, except that a
// compute runs without it: meanwhile other calls may use the buffers its graph does not
// (a client uploads the next segment's weights while one computes), and wait for those
// it does. Sessions run side by side.
struct Session {
  std::string id, peer;
  std::mutex mutex;
  std::condition_variable idle;  // a compute ended
  bool computing = false;
  std::set<uint64_t> computing_buffers;  // the running compute's graph's buffers
  struct Held {
    std::unique_ptr<Buffer> buffer;
    uint32_t device;
    // Set while the whole buffer holds one verified weight with this hash: such a buffer
    // goes to the weight cache when freed. Any other write clears it.
    std::optional<ContentHash> weight;
  };
  std::map<uint64_t, Held> buffers;
  uint64_t next_buffer = 1;
  std::list<std::pair<uint64_t, std::unique_ptr<ReceivedGraph>>> graphs;  // front: newest
  std::map<uint32_t, std::unique_ptr<Backend>> backends;
  size_t bytes_held = 0;
  // For the log when the session ends.
  size_t peak_held = 0;
  uint64_t bytes_received = 0, computes = 0, weights_from_cache = 0;
};

// A tensor standing for a byte range of a buffer, for Buffer::set/get.
Tensor range_tensor(Buffer& b, uint64_t offset) {
  Tensor t;
  t.buffer = &b;
  t.data = static_cast<uint8_t*>(b.base()) + offset;
  return t;
}

// Messages quote what the client sent (tensor names, op lists); a bounded one always fits
// gRPC's metadata limit, so the client gets the error rather than a dropped connection.
constexpr size_t kMaxErrorMessage = 1024;

Status error(StatusCode code, const std::string& message) {
  if (message.size() <= kMaxErrorMessage) return Status(code, message);
  return Status(code, message.substr(0, kMaxErrorMessage) + "...");
}

// Runs a handler body, turning engine errors and allocation failures into statuses: no
// request may take the server down.
template <typename F>
Status guarded(const char* call, F&& body) {
  try {
    return body();
  } catch (const sd::Error& e) {
    return error(StatusCode::INVALID_ARGUMENT, e.what());
  } catch (const std::bad_alloc&) {
    return error(StatusCode::RESOURCE_EXHAUSTED, format("%s: the server ran out of memory", call));
  } catch (const std::exception& e) {
    return error(StatusCode::INTERNAL, format("%s: %s", call, e.what()));
  }
}

std::string metadata(const ServerContext* ctx, const char* key) {
  auto it = ctx->client_metadata().find(key);
  return it == ctx->client_metadata().end() ? std::string()
                                            : std::string(it->second.data(), it->second.size());
}

// A client-supplied text made safe for one log line: printable ASCII, at most 80 chars.
std::string printable(const std::string& text) {
  std::string out;
  for (char c : text.substr(0, 80)) out += c >= 32 && c < 127 ? c : '?';
  return out;
}

// Compares in time that does not depend on where the first difference is.
}  // namespace

class RemoteService final : public wire::Remote::Service {
 public:
  explicit RemoteService(const ServerOptions& options)
      : options_(options), cache_(options.cache_memory, options.cache_dir) {
    for (Device* d : options.devices) {
      auto sd = std::make_unique<ServedDevice>();
      sd->device = d;
      // Without --mem, clients together may hold 90% of the device: allocations are only
      // reserved until touched, so a cap is what keeps a client from getting the server
      // killed for memory.
      sd->limit = options.memory_limit ? options.memory_limit : d->memory().total / 10 * 9;
      devices_.push_back(std::move(sd));
    }
  }

  size_t cached_bytes() const { return cache_.memory_bytes(); }

  size_t session_count() const {
    std::lock_guard lock(sessions_mutex_);
    return sessions_.size();
  }

  Status Session(ServerContext* ctx,
                 grpc::ServerReaderWriter<wire::Welcome, wire::Hello>* stream) override {
    if (Status s = authenticate(ctx); !s.ok()) {
      log("refused %s: %s", ctx->peer().c_str(), s.error_message().c_str());
      return s;
    }
    wire::Hello hello;
    if (!stream->Read(&hello)) return error(StatusCode::CANCELLED, "no hello");
    const std::string mismatch = manifest_mismatch(hello.manifest(), "client");
    if (!mismatch.empty()) {
      log("refused %s (%s): %s", ctx->peer().c_str(), printable(hello.client()).c_str(),
          mismatch.c_str());
      return error(StatusCode::FAILED_PRECONDITION,
                   "sd-rpc-server refused the client: " + mismatch);
    }
    auto session = std::make_shared<rpc::Session>();
    session->id = new_session_id();
    session->peer = ctx->peer();
    {
      std::lock_guard lock(sessions_mutex_);
      if (options_.max_sessions > 0 &&
          sessions_.size() >= static_cast<size_t>(options_.max_sessions)) {
        log("refused %s: %zu clients connected (--max-sessions)", ctx->peer().c_str(),
            sessions_.size());
        return error(StatusCode::RESOURCE_EXHAUSTED,
                     format("sd-rpc-server is serving its most clients at once (%d, "
                            "--max-sessions); try again when one disconnects",
                            options_.max_sessions));
      }
      sessions_[session->id] = session;
    }
    log("session %.8s opened by %s (%s)", session->id.c_str(), session->peer.c_str(),
        printable(hello.client()).c_str());
    wire::Welcome welcome;
    welcome.set_session(session->id);
    welcome.set_server("sd-rpc-server");
    *welcome.mutable_manifest() = local_manifest();
    for (const auto& d : devices_) {
      wire::DeviceInfo* info = welcome.add_devices();
      info->set_name(d->device->name());
      info->set_description(d->device->description());
      const DeviceMemory m = memory_of(*d);
      info->set_free(m.free);
      info->set_total(m.total);
      info->set_alignment(d->device->buffer_type().alignment());
      info->set_max_alloc(
          std::min<size_t>(d->device->buffer_type().max_size(), d->limit ? d->limit : SIZE_MAX));
    }
    stream->Write(welcome);
    // The session lives as long as this stream: a closed or dead client ends the read.
    while (stream->Read(&hello)) {
    }
    close_session(session);
    return Status::OK;
  }

  Status Memory(ServerContext* ctx, const wire::DeviceRef* req, wire::MemoryReply* rep) override {
    return call(ctx, "memory", [&](rpc::Session&) {
      const ServedDevice& d = device(req->device());
      const DeviceMemory m = memory_of(d);
      rep->set_free(m.free);
      rep->set_total(m.total);
      return Status::OK;
    });
  }

  Status Alloc(ServerContext* ctx, const wire::AllocRequest* req, wire::AllocReply* rep) override {
    return call(ctx, "alloc", [&](rpc::Session& s) {
      ServedDevice& d = device(req->device());
      const size_t size = req->size();
      SD_CHECK(size > 0, "[RPC] a buffer of 0 bytes was asked for");
      // Cached weights live within the limit too: the least recently used give way.
      if (d.limit) {
        const size_t cached = cache_.device_bytes(req->device());
        if (d.used.load() + cached + size > d.limit)
          cache_.evict(req->device(), d.used.load() + cached + size - d.limit);
      }
      if (d.limit && (size > d.limit || d.used.load() + size > d.limit)) {
        return error(StatusCode::RESOURCE_EXHAUSTED,
                     format("%s on the server: %s asked for, %s of its --mem limit %s in use; "
                            "start sd-rpc-server with a larger --mem or place fewer modules "
                            "there",
                            d.device->name().c_str(), human_bytes(size).c_str(),
                            human_bytes(d.used.load()).c_str(), human_bytes(d.limit).c_str()));
      }
      std::unique_ptr<Buffer> b = d.device->buffer_type().allocate(size);
      d.used += size;
      s.bytes_held += size;
      s.peak_held = std::max(s.peak_held, s.bytes_held);
      const uint64_t id = s.next_buffer++;
      s.buffers[id] = {std::move(b), req->device(), std::nullopt};
      rep->set_buffer(id);
      return Status::OK;
    });
  }

  Status Free(ServerContext* ctx, const wire::BufferRef* req, wire::Empty*) override {
    return call(ctx, "free", [&](rpc::Session& s) {
      free_buffer(s, req->buffer());
      return Status::OK;
    });
  }

  Status Clear(ServerContext* ctx, const wire::ClearRequest* req, wire::Empty*) override {
    return call(ctx, "clear", [&](rpc::Session& s) {
      SD_CHECK(req->value() < 256, "[RPC] clear value %u is not a byte", req->value());
      wait_for_buffer(s, req->buffer());
      buffer(s, req->buffer()).clear(static_cast<uint8_t>(req->value()));
      s.buffers[req->buffer()].weight.reset();
      return Status::OK;
    });
  }

  Status Write(ServerContext* ctx, grpc::ServerReader<wire::WriteChunk>* reader,
               wire::Empty*) override {
    return call(ctx, "write", [&](rpc::Session& s) {
      wire::WriteChunk chunk;
      SD_CHECK(reader->Read(&chunk) && chunk.has_range(),
               "[RPC] a write must start with its range");
      const wire::Range range = chunk.range();
      Buffer& b = checked_range(s, range);
      // From the first byte on the buffer no longer holds its verified weight, even if the
      // write fails halfway.
      rpc::Session::Held& held = s.buffers[range.buffer()];
      held.weight.reset();
      const bool cache = chunk.has_hash();
      const ContentHash expected = from_wire(chunk.hash());
      XXH3_state_t* state = cache ? XXH3_createState() : nullptr;
      std::unique_ptr<XXH3_state_t, decltype(&XXH3_freeState)> guard(state, XXH3_freeState);
      if (state) XXH3_128bits_reset(state);
      uint64_t done = 0;
      do {
        const std::string& data = chunk.data();
        SD_CHECK(data.size() <= range.size() - done,
                 "[RPC] write sent more than the %llu bytes it announced",
                 static_cast<unsigned long long>(range.size()));
        Tensor t = range_tensor(b, range.offset() + done);
        if (!data.empty()) b.set(t, data.data(), 0, data.size());
        if (state) XXH3_128bits_update(state, data.data(), data.size());
        done += data.size();
      } while (reader->Read(&chunk));
      SD_CHECK(done == range.size(), "[RPC] write announced %llu bytes but sent %llu",
               static_cast<unsigned long long>(range.size()),
               static_cast<unsigned long long>(done));
      if (state) {
        const XXH128_hash_t h = XXH3_128bits_digest(state);
        if (!(ContentHash{h.high64, h.low64} == expected))
          return error(StatusCode::DATA_LOSS,
                       "the weight bytes arrived damaged (their xxh3-128 does not match the "
                       "hash sent with them); the write was not cached");
        if (range.offset() == 0 && range.size() == b.size()) held.weight = expected;
        cache_.store(expected, b, range.offset(), range.size());
      }
      s.bytes_received += done;
      return Status::OK;
    });
  }

  Status WriteCached(ServerContext* ctx, const wire::CachedWrite* req,
                     wire::CachedReply* rep) override {
    return call(ctx, "cached write", [&](rpc::Session& s) {
      Buffer& b = checked_range(s, req->range());
      rpc::Session::Held& held = s.buffers[req->range().buffer()];
      const ContentHash hash = from_wire(req->hash());
      const bool whole = req->range().offset() == 0 && req->range().size() == b.size();
      held.weight.reset();
      bool hit = false;
      if (whole) {
        // The cached buffer itself takes this one's place: nothing is copied.
        if (std::unique_ptr<Buffer> cached = cache_.take(hash, b.size(), held.device)) {
          forget_uses(s, req->range().buffer());
          held.buffer = std::move(cached);
          hit = true;
        }
      }
      if (!hit) hit = cache_.load(hash, *held.buffer, req->range().offset(), req->range().size());
      if (hit && whole) held.weight = hash;
      if (hit) s.weights_from_cache += req->range().size();
      rep->set_hit(hit);
      return Status::OK;
    });
  }

  Status Read(ServerContext* ctx, const wire::ReadRequest* req,
              grpc::ServerWriter<wire::Chunk>* writer) override {
    return call(ctx, "read", [&](rpc::Session& s) {
      Buffer& b = checked_range(s, req->range());
      wire::Chunk chunk;
      for (uint64_t done = 0; done < req->range().size();) {
        const size_t n = std::min<uint64_t>(kChunkBytes, req->range().size() - done);
        chunk.mutable_data()->resize(n);
        Tensor t = range_tensor(b, req->range().offset() + done);
        b.get(t, chunk.mutable_data()->data(), 0, n);
        if (!writer->Write(chunk)) return error(StatusCode::CANCELLED, "the client went away");
        done += n;
      }
      return Status::OK;
    });
  }

  Status Compute(ServerContext* ctx, const wire::ComputeRequest* req,
                 wire::ComputeReply* rep) override {
    return call(ctx, "compute", [&](rpc::Session& s) {
      wait_for_compute(s);
      ServedDevice& d = device(req->device());
      for (const wire::InlineWrite& w : req->writes()) {
        Buffer& b = checked_range(s, w.range());
        SD_CHECK(w.data().size() == w.range().size(),
                 "[RPC] an inline write announced %llu bytes but carries %zu",
                 static_cast<unsigned long long>(w.range().size()), w.data().size());
        Tensor t = range_tensor(b, w.range().offset());
        b.set(t, w.data().data(), 0, w.data().size());
        s.buffers[w.range().buffer()].weight.reset();
      }
      ReceivedGraph* graph = find_graph(s, req->graph_hash(), req->device());
      if (!graph && req->graph().tensors_size() == 0)
        return error(StatusCode::NOT_FOUND, "unknown graph; send it whole");
      if (!graph || req->graph().tensors_size() > 0) {
        auto received = receive_graph(req->graph(), [&](uint64_t id) -> Buffer* {
          auto it = s.buffers.find(id);
          return it == s.buffers.end() || it->second.device != req->device()
                     ? nullptr
                     : it->second.buffer.get();
        });
        graph = remember_graph(s, req->graph_hash(), std::move(received));
      }
      for (uint64_t id : graph->written) s.buffers[id].weight.reset();
      auto& backend = s.backends[req->device()];
      if (!backend) backend = d.device->create_backend(BackendOptions{options_.threads});
      check_supported(*d.device, graph->graph);
      const bool timed = options_.compute_timeout > 0;
      const auto deadline =
          timed ? std::chrono::steady_clock::now() + std::chrono::seconds(options_.compute_timeout)
                : std::chrono::steady_clock::time_point::max();
      backend->set_deadline(deadline);
      const size_t nodes = graph->graph.nodes.size();
      const size_t first = req->first_node();
      const size_t end = req->end_node() == 0 ? nodes : req->end_node();
      SD_CHECK(first <= end && end <= nodes,
               "[RPC] compute names nodes %zu..%zu of a graph of %zu nodes", first, end, nodes);
      try {
        // Without the session's lock: other calls may use the buffers this graph does not.
        s.computing = true;
        s.computing_buffers = graph->buffers;
        struct Reacquire {
          rpc::Session& s;
          std::unique_lock<std::mutex>& lock;
          ~Reacquire() {
            lock.lock();
            s.computing = false;
            s.computing_buffers.clear();
            s.idle.notify_all();
          }
        } reacquire{s, *held_};
        held_->unlock();
        backend->compute_nodes(graph->graph, first, end);
        backend->synchronize();
      } catch (const sd::Error&) {
        if (!timed || std::chrono::steady_clock::now() < deadline) throw;
        return error(StatusCode::RESOURCE_EXHAUSTED,
                     format("the compute call ran past the server's limit of %d s and was "
                            "stopped; start sd-rpc-server with a larger --compute-timeout "
                            "(0: none) or compute smaller graphs there",
                            options_.compute_timeout));
      }
      ++s.computes;
      size_t reply_bytes = 0;
      for (const wire::Range& r : req->reads()) {
        Buffer& b = checked_range(s, r);
        reply_bytes += r.size();
        SD_CHECK(reply_bytes <= kMaxMessageBytes / 2,
                 "[RPC] a compute call may read back at most %d bytes", kMaxMessageBytes / 2);
        std::string* out = rep->add_reads();
        out->resize(r.size());
        Tensor t = range_tensor(b, r.offset());
        b.get(t, out->data(), 0, r.size());
      }
      return Status::OK;
    });
  }

 private:
  template <typename... A>
  void log(const char* fmt, A... args) {
    if (options_.log) options_.log(format(fmt, args...));
  }

  Status authenticate(const ServerContext* ctx) const {
    if (options_.token.empty()) return Status::OK;
    if (same_secret(metadata(ctx, kTokenKey), options_.token)) return Status::OK;
    return error(StatusCode::UNAUTHENTICATED,
                 "sd-rpc-server refused the connection: wrong or missing token; give the "
                 "server's token in SD_RPC_TOKEN (or a file in SD_RPC_TOKEN_FILE)");
  }

  // Authenticates, finds the session and runs `body` under the session's lock.
  // Failures inside a session are always logged, except a weight-cache miss (NOT_FOUND,
  // an expected answer); with --verbose every failed request is, refusals and misses too.
  template <typename F>
  Status call(ServerContext* ctx, const char* name, F&& body) {
    if (Status s = authenticate(ctx); !s.ok()) {
      if (options_.verbose)
        log("refused %s from %s: %s", name, ctx->peer().c_str(), s.error_message().c_str());
      return s;
    }
    std::shared_ptr<rpc::Session> session;
    {
      std::lock_guard lock(sessions_mutex_);
      auto it = sessions_.find(metadata(ctx, kSessionKey));
      if (it != sessions_.end()) session = it->second;
    }
    if (!session) {
      if (options_.verbose) log("refused %s from %s: unknown session", name, ctx->peer().c_str());
      return error(StatusCode::FAILED_PRECONDITION,
                   "unknown session: the server restarted or closed it; connect again");
    }
    std::unique_lock lock(session->mutex);
    held_ = &lock;
    Status status = guarded(name, [&] { return body(*session); });
    held_ = nullptr;
    if (!status.ok() && (options_.verbose || status.error_code() != StatusCode::NOT_FOUND))
      log("session %.8s: %s failed: %s", session->id.c_str(), name, status.error_message().c_str());
    return status;
  }

  ServedDevice& device(uint32_t index) {
    SD_CHECK(index < devices_.size(), "[RPC] device %u does not exist; the server has %zu", index,
             devices_.size());
    return *devices_[index];
  }

  DeviceMemory memory_of(const ServedDevice& d) const {
    DeviceMemory m = d.device->memory();
    if (d.limit) {
      m.total = std::min(m.total, d.limit);
      m.free = std::min(m.free, d.limit - std::min(d.limit, d.used.load()));
    }
    return m;
  }

  Buffer& buffer(rpc::Session& s, uint64_t id) {
    auto it = s.buffers.find(id);
    SD_CHECK(it != s.buffers.end(),
             "[RPC] buffer %llu does not exist in this session (freed or never allocated)",
             static_cast<unsigned long long>(id));
    return *it->second.buffer;
  }

  // Inside a call: waits until the running compute (if any) no longer uses buffer `id`.
  static void wait_for_buffer(rpc::Session& s, uint64_t id) {
    s.idle.wait(*held_, [&] { return !s.computing_buffers.count(id); });
  }
  static void wait_for_compute(rpc::Session& s) {
    s.idle.wait(*held_, [&] { return !s.computing; });
  }

  Buffer& checked_range(rpc::Session& s, const wire::Range& r) {
    wait_for_buffer(s, r.buffer());
    Buffer& b = buffer(s, r.buffer());
    SD_CHECK(r.offset() <= b.size() && r.size() <= b.size() - r.offset(),
             "[RPC] bytes [%llu, +%llu) are outside buffer %llu of %zu bytes",
             static_cast<unsigned long long>(r.offset()), static_cast<unsigned long long>(r.size()),
             static_cast<unsigned long long>(r.buffer()), b.size());
    return b;
  }

  void free_buffer(rpc::Session& s, uint64_t id) {
    wait_for_buffer(s, id);
    auto it = s.buffers.find(id);
    SD_CHECK(it != s.buffers.end(), "[RPC] buffer %llu does not exist in this session",
             static_cast<unsigned long long>(id));
    forget_uses(s, id);
    const size_t size = it->second.buffer->size();
    devices_[it->second.device]->used -= size;
    s.bytes_held -= size;
    retire(it->second);
    s.buffers.erase(it);
  }

  // Graphs that use the buffer are forgotten, and backends drop what they derived from its
  // bytes (packed weights), before its memory goes.
  void forget_uses(rpc::Session& s, uint64_t id) {
    wait_for_compute(s);  // the backends' caches may be in use
    s.graphs.remove_if([id](const auto& g) { return g.second->buffers.count(id) > 0; });
    for (auto& [dev, backend] : s.backends) backend->release_caches();
  }

  // A freed buffer that holds one verified weight goes to the cache for the next client.
  void retire(rpc::Session::Held& held) {
    if (held.weight) cache_.give(*held.weight, held.device, std::move(held.buffer));
  }

  // A graph received for another device's buffers counts as unknown: the request's device
  // must never run it.
  ReceivedGraph* find_graph(rpc::Session& s, uint64_t hash, uint32_t device) {
    for (auto it = s.graphs.begin(); it != s.graphs.end(); ++it) {
      if (it->first == hash) {
        for (uint64_t id : it->second->buffers) {
          auto held = s.buffers.find(id);
          if (held == s.buffers.end() || held->second.device != device) return nullptr;
        }
        s.graphs.splice(s.graphs.begin(), s.graphs, it);
        return s.graphs.front().second.get();
      }
    }
    return nullptr;
  }

  ReceivedGraph* remember_graph(rpc::Session& s, uint64_t hash, std::unique_ptr<ReceivedGraph> g) {
    s.graphs.remove_if([hash](const auto& e) { return e.first == hash; });
    s.graphs.emplace_front(hash, std::move(g));
    // Kept graphs are bounded in number and, together, in tensors (one largest graph's
    // worth): 16 of the largest would hold about a gigabyte per session.
    const auto tensors = [](const ReceivedGraph& r) {
      return r.graph.nodes.size() + r.graph.leafs.size();
    };
    size_t kept = 0;
    for (const auto& [h, r] : s.graphs) kept += tensors(*r);
    while (s.graphs.size() > 1 &&
           (s.graphs.size() > kMaxGraphsPerSession || kept > kMaxKeptGraphTensors)) {
      kept -= tensors(*s.graphs.back().second);
      s.graphs.pop_back();
    }
    return s.graphs.front().second.get();
  }

  void close_session(const std::shared_ptr<rpc::Session>& session) {
    {
      std::lock_guard lock(sessions_mutex_);
      sessions_.erase(session->id);
    }
    std::unique_lock lock(session->mutex);
    session->idle.wait(lock, [&] { return !session->computing; });
    const size_t n = session->buffers.size(), bytes = session->bytes_held;
    session->graphs.clear();
    session->backends.clear();
    for (auto& [id, held] : session->buffers) {
      devices_[held.device]->used -= held.buffer->size();
      retire(held);
    }
    session->buffers.clear();
    session->bytes_held = 0;
    log("session %.8s closed: %llu computes, %s received, %s of weights from the cache, "
        "%s held at most; freed %zu buffers (%s)",
        session->id.c_str(), static_cast<unsigned long long>(session->computes),
        human_bytes(session->bytes_received).c_str(),
        human_bytes(session->weights_from_cache).c_str(), human_bytes(session->peak_held).c_str(),
        n, human_bytes(bytes).c_str());
  }

  static std::string new_session_id() {
    std::random_device rd;
    return format("%08x%08x%08x%08x", rd(), rd(), rd(), rd());
  }

  // The session lock of the call this thread serves (each call runs on its own thread).
  static thread_local std::unique_lock<std::mutex>* held_;

  const ServerOptions& options_;
  WeightCache cache_;
  std::vector<std::unique_ptr<ServedDevice>> devices_;
  mutable std::mutex sessions_mutex_;
  std::map<std::string, std::shared_ptr<rpc::Session>> sessions_;
};

thread_local std::unique_lock<std::mutex>* RemoteService::held_ = nullptr;

struct Server::Impl {
  ServerOptions options;
  std::unique_ptr<RemoteService> service;
  std::unique_ptr<grpc::Server> server;
  int port = 0;
  std::string address;  // host:port as gRPC takes it

  // The listener's life: `stopping` ends wait(); the guard thread restarts the listener
  // when gRPC's accept loop has died (see descriptor_guard.h).
  std::mutex mutex;
  std::condition_variable changed;
  bool stopping = false;
  std::string failure;  // why the listener could not be restarted; wait() throws it
  std::thread guard;
  std::mutex join_mutex;  // shutdown() may run on a signal thread and in the destructor

  std::unique_ptr<grpc::Server> listen(int on_port, int* bound);
  void guard_listener();
  template <typename... A>
  void log(const char* fmt, A... args) {
    if (options.log) options.log(format(fmt, args...));
  }
};

std::unique_ptr<grpc::Server> Server::Impl::listen(int on_port, int* bound) {
  const ServerOptions& o = options;
  grpc::ServerBuilder builder;
  std::shared_ptr<grpc::ServerCredentials> creds = grpc::InsecureServerCredentials();
  if (!o.tls_cert_pem.empty()) {
    grpc::SslServerCredentialsOptions ssl;
    ssl.pem_key_cert_pairs.push_back({o.tls_key_pem, o.tls_cert_pem});
    creds = grpc::SslServerCredentials(ssl);
  }
  const bool v6 = o.host.find(':') != std::string::npos && o.host.front() != '[';
  address = (v6 ? "[" + o.host + "]" : o.host) + ":" + std::to_string(on_port);
  // A port another server holds is an error, not shared (gRPC's default shares it).
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder.AddListeningPort(address, creds, bound);
  builder.RegisterService(service.get());
  // Weights arrive in bursts on fresh connections: a large window from the start, instead
  // of one grown by probing, keeps the first upload from stalling on flow control.
  builder.AddChannelArgument(GRPC_ARG_HTTP2_STREAM_LOOKAHEAD_BYTES, kFlowWindowBytes);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MAX_FRAME_SIZE, 1 << 20);
  builder.SetMaxReceiveMessageSize(kMaxMessageBytes);
  builder.SetMaxSendMessageSize(kMaxMessageBytes);
  // Dead clients are noticed by keep-alive pings, so their sessions are freed; clients
  // ping every few seconds, which must not count as abuse.
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS, 15000);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 30000);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, 1000);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MAX_PING_STRIKES, 0);
  // Connections hold descriptors: one that has not finished its handshake in 10 s, or
  // that carries no call (a session is one long call) for 5 minutes, is closed.
  builder.AddChannelArgument(GRPC_ARG_SERVER_HANDSHAKE_TIMEOUT_MS, 10000);
  builder.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_IDLE_MS, 5 * 60 * 1000);
  return builder.BuildAndStart();
}

void Server::Impl::guard_listener() {
  uint64_t seen = grpc_accept_failures();
  std::unique_lock lock(mutex);
  for (;;) {
    changed.wait_for(lock, std::chrono::milliseconds(200));
    if (stopping) return;
    if (grpc_accept_failures() == seen) continue;
    seen = grpc_accept_failures();
    log("accepting a connection failed with %zu of %zu descriptors open; the listener "
        "restarts once a quarter of them are free",
        open_descriptors(), descriptor_limit());
    while (!stopping && open_descriptors() > descriptor_limit() / 4 * 3) {
      changed.wait_for(lock, std::chrono::milliseconds(200));
    }
    if (stopping) return;
    // Clients connected now lose their sessions; they were as stuck as new ones.
    server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
    server.reset();
    int bound = 0;
    server = listen(port, &bound);
    seen = grpc_accept_failures();
    if (!server || bound != port) {
      failure = format(
          "sd-rpc-server could not listen on %s again after running out of file "
          "descriptors; raise the limit (ulimit -n) and restart it",
          address.c_str());
      stopping = true;
      changed.notify_all();
      return;
    }
    log("listening again on %s", address.c_str());
  }
}

Server::Server(ServerOptions options) : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  m.options = std::move(options);
  ServerOptions& o = m.options;
  SD_CHECK(is_loopback_host(o.host) || !o.token.empty() || o.insecure,
           "sd-rpc-server would listen on %s without a token, so anyone who can reach it could "
           "use this machine; give a token with --token-file (or SD_RPC_TOKEN), or pass "
           "--insecure on a trusted network",
           o.host.c_str());
  SD_CHECK(o.port >= 0 && o.port <= 65535, "port %d is out of range (1-65535)", o.port);
  SD_CHECK(o.tls_cert_pem.empty() == o.tls_key_pem.empty(),
           "TLS needs both a certificate (--tls-cert) and its key (--tls-key)");
  // By default every local device but software ones (lavapipe): those compute on the same
  // cores as the CPU served beside them. -d names any device.
  if (o.devices.empty())
    for (const auto& d : DeviceRegistry::instance().devices())
      if (d->kind() != DeviceKind::Remote && d->kind() != DeviceKind::Software)
        o.devices.push_back(d.get());
  SD_CHECK(!o.devices.empty(), "sd-rpc-server has no device to serve");

  watch_grpc_accept_failures();
  m.service = std::make_unique<RemoteService>(m.options);
  m.server = m.listen(o.port, &m.port);
  SD_CHECK(m.server && m.port > 0,
           "sd-rpc-server could not listen on %s: the address is in use or not on this "
           "machine; pick another --host/--port",
           m.address.c_str());
  m.address = m.address.substr(0, m.address.rfind(':') + 1) + std::to_string(m.port);
  m.guard = std::thread([&m] { m.guard_listener(); });
  if (o.log) {
    std::string names;
    for (Device* d : o.devices) names += (names.empty() ? "" : ", ") + d->name();
    o.log(format("listening on %s:%d (%s%s), serving %s", o.host.c_str(), m.port,
                 o.tls_cert_pem.empty() ? "plaintext" : "TLS",
                 o.token.empty() ? "" : ", token required", names.c_str()));
  }
}

Server::~Server() {
  shutdown();
}

int Server::port() const {
  return impl_->port;
}

void Server::wait() {
  std::unique_lock lock(impl_->mutex);
  impl_->changed.wait(lock, [&] { return impl_->stopping; });
  if (!impl_->failure.empty()) fail("%s", impl_->failure.c_str());
}

void Server::shutdown() {
  Impl& m = *impl_;
  {
    std::lock_guard lock(m.mutex);
    if (!m.stopping) {
      m.stopping = true;
      if (m.server) m.server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
    }
    m.changed.notify_all();
  }
  std::lock_guard join_lock(m.join_mutex);
  if (m.guard.joinable() && m.guard.get_id() != std::this_thread::get_id()) m.guard.join();
}

size_t Server::session_count() const {
  return impl_->service->session_count();
}

size_t Server::cached_bytes() const {
  return impl_->service->cached_bytes();
}

}  // namespace sd::rpc
