#include "backend/rpc/client/connection.h"

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

#include "backend/rpc/protocol.h"
#include "backend/rpc/remote.grpc.pb.h"
#include "tensor/error.h"

namespace sd::rpc {

namespace {

std::string read_text_file(const char* path, const char* what) {
  std::ifstream in(path, std::ios::binary);
  SD_CHECK(in, "cannot read %s '%s' (from %s)", what, path,
           std::strcmp(what, "token file") == 0 ? "SD_RPC_TOKEN_FILE" : "SD_RPC_CA");
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string trimmed(std::string s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
  size_t i = 0;
  while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
  return s.substr(i);
}

std::chrono::system_clock::time_point after(double seconds) {
  return std::chrono::system_clock::now() +
         std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000));
}

// Seconds a transfer of `size` bytes may take: the call bound plus 10 MB/s.
double transfer_timeout(const ClientOptions& o, size_t size) {
  return o.call_timeout_s + static_cast<double>(size) / 10e6;
}

}  // namespace

ClientOptions client_options_from_environment() {
  ClientOptions o;
  if (const char* t = std::getenv("SD_RPC_TOKEN")) o.token = t;
  if (const char* f = std::getenv("SD_RPC_TOKEN_FILE"); f && *f)
    o.token = trimmed(read_text_file(f, "token file"));
  if (const char* ca = std::getenv("SD_RPC_CA"); ca && *ca)
    o.ca_pem = read_text_file(ca, "CA certificate file");
  if (const char* t = std::getenv("SD_RPC_TIMEOUT"); t && *t) {
    char* end = nullptr;
    const double s = std::strtod(t, &end);
    SD_CHECK(end && *end == '\0' && s > 0,
             "SD_RPC_TIMEOUT='%s' is not a positive number of seconds", t);
    o.compute_timeout_s = s;
  }
  return o;
}

struct Connection::Channel {
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<wire::Remote::Stub> stub;
  // The session's lifeline stream, open as long as the session lives, and the thread that
  // notices when it ends (the server stopped, restarted or dropped us).
  std::unique_ptr<grpc::ClientContext> session_ctx;
  std::unique_ptr<grpc::ClientReaderWriter<wire::Hello, wire::Welcome>> session;
  std::thread watcher;

  void watch(std::atomic<bool>& lost) {
    watcher = std::thread([this, &lost] {
      wire::Welcome ignored;
      while (session->Read(&ignored)) {
      }
      session->Finish();
      lost = true;
    });
  }
  void close_session() {
    if (session_ctx) session_ctx->TryCancel();
    if (watcher.joinable()) watcher.join();
    session.reset();
    session_ctx.reset();
  }
};

Connection::Connection(std::string endpoint, ClientOptions options)
    : endpoint_(std::move(endpoint)),
      options_(std::move(options)),
      channel_(std::make_unique<Channel>()) {
  std::string target = endpoint_;
  const bool tls = target.rfind("tls://", 0) == 0;
  if (tls) target = target.substr(6);
  const size_t colon = target.rfind(':');
  const std::string port = colon == std::string::npos ? "" : target.substr(colon + 1);
  SD_CHECK(colon != std::string::npos && colon > 0 && !port.empty() &&
               port.find_first_not_of("0123456789") == std::string::npos &&
               std::atoi(port.c_str()) > 0 && std::atoi(port.c_str()) < 65536,
           "--rpc-servers: '%s' is not host:port (e.g. 192.168.1.5:%d, or tls://host:port)",
           endpoint_.c_str(), kDefaultPort);
  std::shared_ptr<grpc::ChannelCredentials> creds = grpc::InsecureChannelCredentials();
  if (tls) {
    grpc::SslCredentialsOptions ssl;
    ssl.pem_root_certs = options_.ca_pem;
    creds = grpc::SslCredentials(ssl);
  }
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_HTTP2_STREAM_LOOKAHEAD_BYTES, kFlowWindowBytes);
  args.SetInt(GRPC_ARG_HTTP2_MAX_FRAME_SIZE, 1 << 20);
  args.SetMaxReceiveMessageSize(kMaxMessageBytes);
  args.SetMaxSendMessageSize(kMaxMessageBytes);
  // Keep-alive pings find a dead or unreachable host even while a long compute call
  // waits; the timeout is generous because a client busy on its own CPU answers late.
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, options_.keepalive_s * 1000);
  args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, options_.keepalive_timeout_s * 1000);
  args.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  args.SetInt(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
  // A restarted server is found again quickly.
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 500);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 2000);
  channel_->channel = grpc::CreateCustomChannel(target, creds, args);
  channel_->stub = wire::Remote::NewStub(channel_->channel);
  open_session();
}

Connection::~Connection() {
  channel_->close_session();
}

void Connection::open_session() {
  channel_->close_session();
  // Connect, failing at once when a fresh attempt is refused rather than retrying until
  // the deadline. A failure left from before (the server was down) is waited out: the
  // channel tries again within its 2 s backoff.
  const auto deadline = after(options_.call_timeout_s);
  bool attempted = false;
  for (grpc_connectivity_state state = channel_->channel->GetState(true);
       state != GRPC_CHANNEL_READY; state = channel_->channel->GetState(true)) {
    SD_CHECK(state != GRPC_CHANNEL_TRANSIENT_FAILURE || !attempted,
             "[RPC %s] cannot connect: nothing answers there; is sd-rpc-server running and "
             "the port open?",
             endpoint_.c_str());
    SD_CHECK(channel_->channel->WaitForStateChange(state, deadline),
             "[RPC %s] cannot connect within %.0f s: is sd-rpc-server running there and the "
             "port open?",
             endpoint_.c_str(), options_.call_timeout_s);
    attempted = attempted || state != GRPC_CHANNEL_TRANSIENT_FAILURE;
  }
  auto ctx = std::make_unique<grpc::ClientContext>();
  if (!options_.token.empty()) ctx->AddMetadata(kTokenKey, options_.token);
  auto stream = channel_->stub->Session(ctx.get());
  wire::Hello hello;
  *hello.mutable_manifest() = local_manifest();
  hello.set_client("sd client");
  // The hello is bounded: a server that accepts the connection but never answers is
  // given up on after the call timeout.
  std::mutex m;
  std::condition_variable cv;
  bool answered = false;
  grpc::ClientContext* raw = ctx.get();
  std::thread watchdog([&] {
    std::unique_lock lock(m);
    if (!cv.wait_for(
            lock, std::chrono::milliseconds(static_cast<int64_t>(options_.call_timeout_s * 1000)),
            [&] { return answered; }))
      raw->TryCancel();
  });
  const bool ok = stream->Write(hello) && stream->Read(&welcome_);
  {
    std::lock_guard lock(m);
    answered = true;
  }
  cv.notify_one();
  watchdog.join();
  if (!ok) {
    const grpc::Status s = stream->Finish();
    fail("hello", s.ok() ? grpc::StatusCode::UNAVAILABLE : s.error_code(),
         s.ok() ? "the server closed the connection" : s.error_message());
  }
  const std::string mismatch = manifest_mismatch(welcome_.manifest(), "server");
  if (!mismatch.empty() || welcome_.devices_size() == 0) {
    ctx->TryCancel();
    stream->Finish();
    if (!mismatch.empty()) fail("hello", grpc::StatusCode::FAILED_PRECONDITION, mismatch);
    sd::fail("[RPC %s] the server offers no device", endpoint_.c_str());
  }
  channel_->session_ctx = std::move(ctx);
  channel_->session = std::move(stream);
  session_lost_ = false;
  channel_->watch(session_lost_);
  std::lock_guard lock(mutex_);
  queued_.clear();
  queued_bytes_ = 0;
  outputs_.clear();
  known_graphs_.clear();
  ++generation_;
}

void Connection::fail(const char* call, int code, const std::string& message) {
  const auto c = static_cast<grpc::StatusCode>(code);
  if (c == grpc::StatusCode::UNAVAILABLE || c == grpc::StatusCode::FAILED_PRECONDITION ||
      c == grpc::StatusCode::DEADLINE_EXCEEDED || c == grpc::StatusCode::CANCELLED)
    session_lost_ = true;
  switch (c) {
    case grpc::StatusCode::UNAVAILABLE:
      throw Error(
          format("[RPC %s] %s failed: the server is unreachable or stopped (%s); check "
                 "that sd-rpc-server is running there",
                 endpoint_.c_str(), call, message.c_str()));
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      throw Error(
          format("[RPC %s] %s failed: no answer in time; the server is stalled or "
                 "the network is down (raise SD_RPC_TIMEOUT for very slow servers)",
                 endpoint_.c_str(), call));
    case grpc::StatusCode::UNAUTHENTICATED:
    case grpc::StatusCode::FAILED_PRECONDITION:
      throw Error(format("[RPC %s] %s", endpoint_.c_str(), message.c_str()));
    default:
      throw Error(format("[RPC %s] %s failed: %s", endpoint_.c_str(), call, message.c_str()));
  }
}

namespace {

// A call's context: session, token and deadline.
std::unique_ptr<grpc::ClientContext> call_context(const wire::Welcome& welcome,
                                                  const ClientOptions& o, double timeout_s) {
  auto ctx = std::make_unique<grpc::ClientContext>();
  ctx->AddMetadata(kSessionKey, welcome.session());
  if (!o.token.empty()) ctx->AddMetadata(kTokenKey, o.token);
  ctx->set_deadline(after(timeout_s));
  return ctx;
}

wire::Range make_range(uint64_t buffer, uint64_t offset, uint64_t size) {
  wire::Range r;
  r.set_buffer(buffer);
  r.set_offset(offset);
  r.set_size(size);
  return r;
}

}  // namespace

DeviceMemory Connection::memory(uint32_t device) {
  if (session_lost_) open_session();
  auto ctx = call_context(welcome_, options_, options_.call_timeout_s);
  wire::DeviceRef req;
  req.set_device(device);
  wire::MemoryReply rep;
  grpc::Status s = channel_->stub->Memory(ctx.get(), req, &rep);
  if (!s.ok()) fail("memory query", s.error_code(), s.error_message());
  return {rep.free(), rep.total()};
}

uint64_t Connection::alloc(uint32_t device, size_t size) {
  if (session_lost_) open_session();
  auto ctx = call_context(welcome_, options_, options_.call_timeout_s);
  wire::AllocRequest req;
  req.set_device(device);
  req.set_size(size);
  wire::AllocReply rep;
  grpc::Status s = channel_->stub->Alloc(ctx.get(), req, &rep);
  if (!s.ok()) fail("allocation", s.error_code(), s.error_message());
  return rep.buffer();
}

void Connection::free(uint64_t buffer) noexcept {
  try {
    {
      std::lock_guard lock(mutex_);
      std::erase_if(queued_, [&](const wire::InlineWrite& w) {
        return w.range().buffer() == buffer && (queued_bytes_ -= w.data().size(), true);
      });
      outputs_.clear();
    }
    if (session_lost_) return;
    auto ctx = call_context(welcome_, options_, options_.call_timeout_s);
    wire::BufferRef req;
    req.set_buffer(buffer);
    wire::Empty rep;
    grpc::Status s = channel_->stub->Free(ctx.get(), req, &rep);
    if (!s.ok() && s.error_code() == grpc::StatusCode::UNAVAILABLE) session_lost_ = true;
  } catch (...) {
  }
}

void Connection::clear(uint64_t buffer, uint8_t value) {
  {
    std::lock_guard lock(mutex_);
    flush_writes();
    outputs_.clear();
  }
  auto ctx = call_context(welcome_, options_, options_.call_timeout_s);
  wire::ClearRequest req;
  req.set_buffer(buffer);
  req.set_value(value);
  wire::Empty rep;
  grpc::Status s = channel_->stub->Clear(ctx.get(), req, &rep);
  if (!s.ok()) fail("clear", s.error_code(), s.error_message());
}

void Connection::stream_write(uint64_t buffer, uint64_t offset, const void* data, size_t size,
                              const wire::Hash128* hash) {
  auto ctx = call_context(welcome_, options_, transfer_timeout(options_, size));
  wire::Empty rep;
  auto writer = channel_->stub->Write(ctx.get(), &rep);
  wire::WriteChunk chunk;
  *chunk.mutable_range() = make_range(buffer, offset, size);
  if (hash) *chunk.mutable_hash() = *hash;
  const auto* bytes = static_cast<const uint8_t*>(data);
  size_t done = 0;
  do {
    const size_t n = std::min(kChunkBytes, size - done);
    chunk.set_data(bytes + done, n);
    if (!writer->Write(chunk)) break;  // the status says why
    chunk.clear_range();
    chunk.clear_hash();
    done += n;
  } while (done < size);
  writer->WritesDone();
  grpc::Status s = writer->Finish();
  if (!s.ok()) fail("upload", s.error_code(), s.error_message());
}

void Connection::flush_writes() {
  std::vector<wire::InlineWrite> queued;
  queued.swap(queued_);
  queued_bytes_ = 0;
  for (const wire::InlineWrite& w : queued) {
    stream_write(w.range().buffer(), w.range().offset(), w.data().data(), w.data().size(), nullptr);
    stats_.bytes_sent += w.data().size();
  }
}

void Connection::write(uint64_t buffer, uint64_t offset, const void* data, size_t size,
                       bool cacheable) {
  if (!cacheable && size <= kInlineWriteBytes) {
    std::lock_guard lock(mutex_);
    outputs_.clear();
    wire::InlineWrite w;
    *w.mutable_range() = make_range(buffer, offset, size);
    w.set_data(data, size);
    queued_.push_back(std::move(w));
    queued_bytes_ += size;
    // Many small writes with no compute after them go out in one batch.
    if (queued_bytes_ > 8 * kInlineWriteBytes) flush_writes();
    return;
  }
  {
    std::lock_guard lock(mutex_);
    flush_writes();
    outputs_.clear();
  }
  if (!cacheable) {
    stream_write(buffer, offset, data, size, nullptr);
    std::lock_guard lock(mutex_);
    stats_.bytes_sent += size;
    return;
  }
  // Weights: the server may have these bytes already (an earlier run, a disk reload).
  const wire::Hash128 hash = to_wire(content_hash(data, size));
  auto ctx = call_context(welcome_, options_, options_.call_timeout_s);
  wire::CachedWrite req;
  *req.mutable_range() = make_range(buffer, offset, size);
  *req.mutable_hash() = hash;
  wire::CachedReply rep;
  grpc::Status s = channel_->stub->WriteCached(ctx.get(), req, &rep);
  if (!s.ok()) fail("cached upload", s.error_code(), s.error_message());
  if (!rep.hit()) stream_write(buffer, offset, data, size, &hash);
  std::lock_guard lock(mutex_);
  (rep.hit() ? stats_.weight_bytes_cached : stats_.weight_bytes_sent) += size;
  if (!rep.hit()) stats_.bytes_sent += size;
}

bool Connection::read_from_outputs(uint64_t buffer, uint64_t offset, void* data, size_t size) {
  for (const auto& [r, bytes] : outputs_) {
    if (r.buffer() == buffer && offset >= r.offset() && offset - r.offset() <= r.size() &&
        size <= r.size() - (offset - r.offset())) {
      std::memcpy(data, bytes.data() + (offset - r.offset()), size);
      return true;
    }
  }
  return false;
}

void Connection::read(uint64_t buffer, uint64_t offset, void* data, size_t size) {
  {
    std::lock_guard lock(mutex_);
    if (read_from_outputs(buffer, offset, data, size)) return;
    flush_writes();
  }
  auto ctx = call_context(welcome_, options_, transfer_timeout(options_, size));
  wire::ReadRequest req;
  *req.mutable_range() = make_range(buffer, offset, size);
  auto reader = channel_->stub->Read(ctx.get(), req);
  wire::Chunk chunk;
  size_t done = 0;
  bool overflow = false;
  while (reader->Read(&chunk)) {
    if (chunk.data().size() > size - done) {
      overflow = true;
      ctx->TryCancel();
      break;
    }
    std::memcpy(static_cast<uint8_t*>(data) + done, chunk.data().data(), chunk.data().size());
    done += chunk.data().size();
  }
  grpc::Status s = reader->Finish();
  SD_CHECK(!overflow, "[RPC %s] the server sent more bytes than were asked for", endpoint_.c_str());
  if (!s.ok()) fail("download", s.error_code(), s.error_message());
  SD_CHECK(done == size, "[RPC %s] the server sent %zu of %zu bytes", endpoint_.c_str(), done,
           size);
  std::lock_guard lock(mutex_);
  stats_.bytes_received += size;
}

void Connection::compute(uint32_t device, uint64_t graph_hash, const wire::GraphDesc& graph,
                         const std::vector<wire::Range>& reads, size_t first, size_t end) {
  wire::ComputeRequest req;
  req.set_device(device);
  req.set_graph_hash(graph_hash);
  req.set_first_node(static_cast<uint32_t>(first));
  req.set_end_node(static_cast<uint32_t>(end));
  for (const wire::Range& r : reads) *req.add_reads() = r;
  bool with_graph;
  {
    // The queued small writes ride with this call. The lock is not held during the call:
    // another thread may upload the weights of the next nodes meanwhile.
    std::lock_guard lock(mutex_);
    for (wire::InlineWrite& w : queued_) *req.add_writes() = std::move(w);
    stats_.bytes_sent += queued_bytes_;
    queued_.clear();
    queued_bytes_ = 0;
    outputs_.clear();
    with_graph = !known_graphs_.count(graph_hash);
  }
  wire::ComputeReply rep;
  for (;;) {
    if (with_graph) *req.mutable_graph() = graph;
    auto ctx = call_context(welcome_, options_, options_.compute_timeout_s);
    grpc::Status s = channel_->stub->Compute(ctx.get(), req, &rep);
    if (s.error_code() == grpc::StatusCode::NOT_FOUND && !with_graph) {
      // The server dropped the graph (it keeps a few per session): send it whole. The
      // inputs were applied already; applying them again is harmless.
      with_graph = true;
      continue;
    }
    if (!s.ok()) fail("compute", s.error_code(), s.error_message());
    break;
  }
  std::lock_guard lock(mutex_);
  known_graphs_.insert(graph_hash);
  ++stats_.compute_calls;
  if (with_graph) ++stats_.graphs_sent;
  SD_CHECK(rep.reads_size() == static_cast<int>(reads.size()),
           "[RPC %s] the server answered %d of %zu reads", endpoint_.c_str(), rep.reads_size(),
           reads.size());
  for (int i = 0; i < rep.reads_size(); ++i) {
    SD_CHECK(rep.reads(i).size() == reads[i].size(),
             "[RPC %s] the server sent a read of the wrong size", endpoint_.c_str());
    stats_.bytes_received += reads[i].size();
    outputs_.emplace_back(reads[i], std::move(*rep.mutable_reads(i)));
  }
}

TrafficStats Connection::stats() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

}  // namespace sd::rpc
