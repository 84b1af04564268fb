// sd-rpc-server's engine against hostile clients: raw wire messages with bad sizes, bad
// buffer ids, ranges out of bounds, malformed and mutated graphs. Each must get an error
// status that says what is wrong, and afterwards the server must still serve a
// well-behaved client. The last test sends thousands of random single-field mutations of
// a valid graph.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <limits>
#include <map>
#include <optional>
#include <random>
#include <thread>

#include "backend/registry.h"
#include "backend/rpc/client/connection.h"
#include "backend/rpc/graph_wire.h"
#include "backend/rpc/protocol.h"
#include "backend/rpc/remote.grpc.pb.h"
#include "backend/rpc/server/server.h"
#include "tensor/context.h"
#include "tensor/error.h"
#include "tensor/ops/attention.h"
#include "tensor/ops/cast.h"
#include "tensor/ops/concat.h"
#include "tensor/ops/conv2d.h"
#include "tensor/ops/elementwise.h"
#include "tensor/ops/generate.h"
#include "tensor/ops/get_rows.h"
#include "tensor/ops/matmul.h"
#include "tensor/ops/norm.h"
#include "tensor/ops/pad.h"
#include "tensor/ops/reduce.h"
#include "tensor/ops/softmax.h"
#include "tensor/ops/unary.h"
#include "tensor/ops/upscale.h"
#include "tensor/ops/view.h"
#include "tensor/quant/quant.h"
#include "test_support.h"

namespace sd::rpc {
namespace {

using grpc::StatusCode;
constexpr uint64_t kU64Max = std::numeric_limits<uint64_t>::max();

Device& cpu() {
  return DeviceRegistry::instance().get("CPU");
}

std::unique_ptr<Server> start_server(size_t memory_limit = 0, std::vector<Device*> devices = {}) {
  ServerOptions o;
  o.port = 0;
  o.threads = 2;
  o.memory_limit = memory_limit;
  o.devices = devices.empty() ? std::vector<Device*>{&cpu()} : std::move(devices);
  return std::make_unique<Server>(o);
}

std::string endpoint(const Server& s) {
  return "127.0.0.1:" + std::to_string(s.port());
}

wire::Range range(uint64_t buffer, uint64_t offset, uint64_t size) {
  wire::Range r;
  r.set_buffer(buffer);
  r.set_offset(offset);
  r.set_size(size);
  return r;
}

std::string describe(const grpc::Status& s) {
  return "status " + std::to_string(s.error_code()) + ": " + s.error_message();
}

// The call failed with `code` and a message that contains `words`.
void expect_refused(const grpc::Status& s, StatusCode code, const std::string& words) {
  EXPECT_EQ(s.error_code(), code) << describe(s);
  EXPECT_NE(s.error_message().find(words), std::string::npos)
      << "the message should mention '" << words << "': " << describe(s);
}

// A client speaking the wire protocol directly through the generated stub, so it can send
// whatever it likes. Its session lives as long as the object.
class RawClient {
 public:
  explicit RawClient(const std::string& address, const wire::Hello* hello = nullptr)
      : stub_(wire::Remote::NewStub(
            grpc::CreateChannel(address, grpc::InsecureChannelCredentials()))) {
    wire::Hello h;
    *h.mutable_manifest() = local_manifest();
    h.set_client("hostile test client");
    session_ctx_.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(600));
    session_ = stub_->Session(&session_ctx_);
    if (session_->Write(hello ? *hello : h) && session_->Read(&welcome_)) return;
    hello_status_ = session_->Finish();
    session_.reset();
  }
  ~RawClient() { close(); }

  // The session's end, as when the client goes away.
  void close() {
    if (!session_) return;
    session_->WritesDone();
    session_ctx_.TryCancel();
    session_->Finish();
    session_.reset();
  }

  bool in_session() const { return session_ != nullptr; }
  const grpc::Status& hello_status() const { return hello_status_; }
  const std::string& session() const { return welcome_.session(); }
  // Calls carry this session id; "" sends none.
  void use_session(std::string id) { session_override_ = std::move(id); }

  grpc::Status memory(uint32_t device) {
    auto ctx = context();
    wire::DeviceRef req;
    req.set_device(device);
    wire::MemoryReply rep;
    return stub_->Memory(ctx.get(), req, &rep);
  }
  grpc::Status alloc(uint32_t device, uint64_t size, uint64_t* id = nullptr) {
    auto ctx = context();
    wire::AllocRequest req;
    req.set_device(device);
    req.set_size(size);
    wire::AllocReply rep;
    grpc::Status s = stub_->Alloc(ctx.get(), req, &rep);
    if (id) *id = rep.buffer();
    return s;
  }
  uint64_t alloc_ok(uint64_t size) {
    uint64_t id = 0;
    grpc::Status s = alloc(0, size, &id);
    EXPECT_TRUE(s.ok()) << describe(s);
    return id;
  }
  grpc::Status free(uint64_t id) {
    auto ctx = context();
    wire::BufferRef req;
    req.set_buffer(id);
    wire::Empty rep;
    return stub_->Free(ctx.get(), req, &rep);
  }
  grpc::Status clear(uint64_t id, uint32_t value) {
    auto ctx = context();
    wire::ClearRequest req;
    req.set_buffer(id);
    req.set_value(value);
    wire::Empty rep;
    return stub_->Clear(ctx.get(), req, &rep);
  }
  // Sends `chunks` in order; the first carries `r` (and `hash`) unless `with_range` is false.
  grpc::Status write(const wire::Range& r, const std::vector<std::string>& chunks,
                     const wire::Hash128* hash = nullptr, bool with_range = true) {
    auto ctx = context();
    wire::Empty rep;
    auto writer = stub_->Write(ctx.get(), &rep);
    for (size_t i = 0; i < std::max<size_t>(chunks.size(), with_range ? 1 : 0); ++i) {
      wire::WriteChunk c;
      if (i == 0 && with_range) {
        *c.mutable_range() = r;
        if (hash) *c.mutable_hash() = *hash;
      }
      if (i < chunks.size()) c.set_data(chunks[i]);
      if (!writer->Write(c)) break;
    }
    writer->WritesDone();
    return writer->Finish();
  }
  grpc::Status write_cached(const wire::Range& r, const wire::Hash128& hash, bool* hit) {
    auto ctx = context();
    wire::CachedWrite req;
    *req.mutable_range() = r;
    *req.mutable_hash() = hash;
    wire::CachedReply rep;
    grpc::Status s = stub_->WriteCached(ctx.get(), req, &rep);
    *hit = rep.hit();
    return s;
  }
  grpc::Status read(const wire::Range& r, std::string* out) {
    auto ctx = context();
    wire::ReadRequest req;
    *req.mutable_range() = r;
    auto reader = stub_->Read(ctx.get(), req);
    wire::Chunk c;
    out->clear();
    while (reader->Read(&c)) out->append(c.data());
    return reader->Finish();
  }
  grpc::Status compute(const wire::ComputeRequest& req, wire::ComputeReply* rep = nullptr) {
    auto ctx = context();
    wire::ComputeReply ignored;
    return stub_->Compute(ctx.get(), req, rep ? rep : &ignored);
  }

 private:
  std::unique_ptr<grpc::ClientContext> context() {
    auto ctx = std::make_unique<grpc::ClientContext>();
    const std::string id = session_override_ ? *session_override_ : session();
    if (!id.empty()) ctx->AddMetadata(kSessionKey, id);
    // A hang in the server becomes a failed call, not a stuck test.
    ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
    return ctx;
  }

  std::unique_ptr<wire::Remote::Stub> stub_;
  grpc::ClientContext session_ctx_;
  std::unique_ptr<grpc::ClientReaderWriter<wire::Hello, wire::Welcome>> session_;
  wire::Welcome welcome_;
  grpc::Status hello_status_;
  std::optional<std::string> session_override_;
};

// A graph's memory laid out twice alike: in local host buffers, so the local CPU computes
// the expected result, and in server buffers, so describe_graph can name remote memory.
// Leafs with kFlagParam go to group 0, other leafs to group 1, computed nodes to group 2.
class MirroredGraph {
 public:
  static constexpr int kGroups = 3;

  // `build` makes the graph's outputs in `ctx`.
  explicit MirroredGraph(const std::function<std::vector<Tensor*>(Context&)>& build) {
    outputs_ = build(ctx_);
    graph_ = Graph::build(outputs_);
    std::array<size_t, kGroups> sizes{};
    std::vector<std::pair<Tensor*, int>> owners;
    for (Tensor* t : graph_.leafs) owners.emplace_back(t, t->has_flag(kFlagParam) ? 0 : 1);
    for (Tensor* t : graph_.nodes)
      if (!t->view_src) owners.emplace_back(t, 2);
    std::vector<size_t> offsets;
    for (auto& [t, group] : owners) {
      offsets.push_back(sizes[group]);
      sizes[group] += (t->nbytes() + 63) / 64 * 64;
    }
    for (int g = 0; g < kGroups; ++g)
      host_[g] = cpu().buffer_type().allocate(std::max<size_t>(sizes[g], 64));
    for (size_t i = 0; i < owners.size(); ++i)
      bind_tensor(*owners[i].first, *host_[owners[i].second], offsets[i]);
    for (Tensor* t : graph_.nodes) {
      if (!t->view_src) continue;
      t->buffer = t->view_src->buffer;
      t->data = static_cast<uint8_t*>(t->view_src->data) + t->view_offset;
    }
    // Deterministic leaf data: small floats, valid row ids for i32 leafs.
    uint32_t seed = 10;
    for (Tensor* t : graph_.leafs) {
      if (t->type == DType::I32) {
        std::vector<int32_t> ids(static_cast<size_t>(t->nelements()));
        for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>(i % 3);
        tensor_set(*t, ids.data());
      } else {
        std::vector<float> v = test::random_values(t->nelements(), seed++);
        if (t->type == DType::F32) {
          tensor_set(*t, v.data());
        } else {
          std::vector<uint8_t> bytes(t->nbytes());
          quantize_row(t->type, v.data(), bytes.data(), t->nelements());
          tensor_set(*t, bytes.data());
        }
      }
    }
    auto backend = cpu().create_backend(BackendOptions{2});
    backend->compute(graph_);
    backend->synchronize();
    for (Tensor* t : outputs_) {
      std::string bytes(t->nbytes(), '\0');
      tensor_get(*t, bytes.data());
      expected_.push_back(std::move(bytes));
    }
  }

  // Allocates the server buffers (once) and uploads the leafs' bytes.
  void upload(RawClient& client) {
    for (int g = 0; g < kGroups; ++g) {
      if (!remote_[g]) remote_[g] = client.alloc_ok(host_[g]->size());
      const std::string bytes(static_cast<const char*>(host_[g]->base()), host_[g]->size());
      grpc::Status s = client.write(range(remote_[g], 0, bytes.size()), {bytes});
      ASSERT_TRUE(s.ok()) << describe(s);
    }
  }

  wire::GraphDesc desc() const {
    return describe_graph(graph_, [&](const Tensor& t) -> std::pair<uint64_t, uint64_t> {
      for (int g = 0; g < kGroups; ++g) {
        if (t.buffer == host_[g].get())
          return {remote_[g], static_cast<const uint8_t*>(t.data) -
                                  static_cast<const uint8_t*>(host_[g]->base())};
      }
      throw Error("tensor outside the mirrored buffers");
    });
  }

  // A compute request for the whole graph that reads back every output.
  wire::ComputeRequest request(uint64_t hash) const {
    wire::ComputeRequest req;
    req.set_graph_hash(hash);
    *req.mutable_graph() = desc();
    for (const Tensor* t : outputs_) *req.add_reads() = output_range(*t);
    return req;
  }

  wire::Range output_range(const Tensor& t) const {
    return range(
        remote_[2],
        static_cast<const uint8_t*>(t.data) - static_cast<const uint8_t*>(host_[2]->base()),
        t.nbytes());
  }

  uint64_t remote(int group) const { return remote_[group]; }
  size_t size(int group) const { return host_[group]->size(); }
  std::string bytes(int group) const {
    return std::string(static_cast<const char*>(host_[group]->base()), host_[group]->size());
  }
  const std::vector<std::string>& expected() const { return expected_; }

 private:
  Context ctx_;
  Graph graph_;
  std::vector<Tensor*> outputs_;
  std::array<std::unique_ptr<Buffer>, kGroups> host_;
  std::array<uint64_t, kGroups> remote_{};
  std::vector<std::string> expected_;
};

// y = x + b: the well-behaved client's graph.
std::vector<Tensor*> small_graph(Context& ctx) {
  Tensor* x = ctx.new_tensor(DType::F32, {4, 2}, "x");
  Tensor* b = ctx.new_tensor(DType::F32, {4}, "b");
  x->flags |= kFlagInput;
  b->flags |= kFlagParam;
  return {add(ctx, x, b)};
}

// Many ops, small shapes: each mutation of it reaches a different builder and kernel.
std::vector<Tensor*> rich_graph(Context& ctx) {
  auto param = [&](DType type, std::initializer_list<int64_t> ne, const char* name) {
    Tensor* t = ctx.new_tensor(type, ne, name);
    t->flags |= kFlagParam;
    return t;
  };
  auto input = [&](DType type, std::initializer_list<int64_t> ne, const char* name) {
    Tensor* t = ctx.new_tensor(type, ne, name);
    t->flags |= kFlagInput;
    return t;
  };
  Tensor* w = param(DType::F32, {16, 8}, "w");
  Tensor* b = param(DType::F32, {8}, "b");
  Tensor* table = param(DType::F16, {8, 6}, "table");
  Tensor* kernel = param(DType::F16, {3, 3, 2, 4}, "kernel");
  Tensor* x = input(DType::F32, {16, 3}, "x");
  Tensor* ids = input(DType::I32, {4}, "ids");
  Tensor* image = input(DType::F32, {6, 6, 2, 1}, "image");
  Tensor* t = input(DType::F32, {2}, "t");
  Tensor* q = input(DType::F32, {4, 3, 2, 1}, "q");
  Tensor* kv = input(DType::F32, {4, 5, 2, 1}, "kv");
  // Block-type weights: the server must rebuild leafs whose shape is whole blocks.
  Tensor* w8 = param(DType::Q8_0, {32, 4}, "w8");
  Tensor* wk = param(DType::Q4_K, {256, 2}, "wk");
  Tensor* x32 = input(DType::F32, {32, 2}, "x32");
  Tensor* x256 = input(DType::F32, {256, 1}, "x256");

  Tensor* h = unary(ctx, add(ctx, matmul(ctx, w, x), b), UnaryOp::Gelu);  // [8, 3]
  Tensor* ht = cont(ctx, permute(ctx, h, {1, 0, 2, 3}));                  // [3, 8]
  Tensor* sm = softmax(ctx, reshape(ctx, ht, {6, 4}), nullptr, 0.5f);
  Tensor* rows = get_rows(ctx, table, ids);  // [8, 4]
  Tensor* joined = concat(ctx, h, rows, 1);  // [8, 7]
  Tensor* normed = layer_norm(ctx, joined, 1e-5f);
  Tensor* padded = pad(ctx, normed, {1, 0, 0, 1, 0, 0, 0, 0}, 0.25f);
  Tensor* squashed = clamp(ctx, scale(ctx, padded, 2.0f, 0.5f), -1.0f, 1.0f);
  Tensor* col = mean(ctx, cont(ctx, slice(ctx, squashed, 1, 2, 5)), 0);
  Tensor* conv = conv2d(ctx, image, kernel, nullptr, 1, 1, 1, 1, 1, 1);  // [6, 6, 4, 1]
  Tensor* up = upscale(ctx, group_norm(ctx, conv, 2, 1e-5f), 12, 12, UpscaleMode::Nearest);
  Tensor* total = sum(ctx, up, 0);
  Tensor* emb = timestep_embedding(ctx, t, 8);  // [8, 2]
  Tensor* ramp = arange(ctx, 0.0f, 8.0f, 1.0f);
  Tensor* mixed = div(ctx, sub(ctx, mul(ctx, emb, ramp), ramp), scale(ctx, ramp, 1.0f, 2.0f));
  Tensor* att = attention(ctx, q, kv, kv, nullptr, 0.5f);
  Tensor* half = cast(ctx, rms_norm(ctx, att, 1e-6f), DType::F16);
  Tensor* quantized = add(ctx, matmul(ctx, w8, x32), sum(ctx, matmul(ctx, wk, x256), 0));
  Tensor* smooth = upscale(ctx, cast(ctx, quantized, DType::BF16), 5, 3, UpscaleMode::Bilinear);
  return {sm, col, total, mixed, half, smooth};
}

// A separate, polite client: allocates, writes, reads back and computes a small graph.
void expect_serves_a_well_behaved_client(const std::string& address) {
  ClientOptions o;
  o.call_timeout_s = 10;
  o.compute_timeout_s = 10;
  o.keepalive_s = 1;
  Connection c(address, o);
  const uint64_t id = c.alloc(0, 256);
  std::vector<uint8_t> bytes(256), back(256);
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<uint8_t>(i * 7);
  c.write(id, 0, bytes.data(), bytes.size(), false);
  c.read(id, 0, back.data(), back.size());
  EXPECT_EQ(back, bytes);
  c.free(id);

  RawClient raw(address);
  ASSERT_TRUE(raw.in_session()) << describe(raw.hello_status());
  MirroredGraph g(small_graph);
  g.upload(raw);
  wire::ComputeReply rep;
  grpc::Status s = raw.compute(g.request(1), &rep);
  ASSERT_TRUE(s.ok()) << describe(s);
  ASSERT_EQ(rep.reads_size(), 1);
  EXPECT_EQ(rep.reads(0), g.expected()[0]);
}

class HostileClient : public ::testing::Test {
 protected:
  void SetUp() override {
    server_ = start_server();
    client_ = std::make_unique<RawClient>(address());
    ASSERT_TRUE(client_->in_session()) << describe(client_->hello_status());
  }
  void TearDown() override {
    if (!HasFatalFailure()) expect_serves_a_well_behaved_client(address());
    client_.reset();
    server_.reset();
  }
  std::string address() const { return endpoint(*server_); }

  std::unique_ptr<Server> server_;
  std::unique_ptr<RawClient> client_;
};

TEST_F(HostileClient, CallsWithoutAKnownSessionAreRefused) {
  RawClient& c = *client_;
  for (const char* id : {"", "not-a-session", "00000000000000000000000000000000"}) {
    c.use_session(id);
    expect_refused(c.alloc(0, 64), StatusCode::FAILED_PRECONDITION, "unknown session");
    expect_refused(c.memory(0), StatusCode::FAILED_PRECONDITION, "unknown session");
    expect_refused(c.free(1), StatusCode::FAILED_PRECONDITION, "unknown session");
    expect_refused(c.clear(1, 0), StatusCode::FAILED_PRECONDITION, "unknown session");
    expect_refused(c.write(range(1, 0, 4), {"abcd"}), StatusCode::FAILED_PRECONDITION,
                   "unknown session");
    std::string out;
    expect_refused(c.read(range(1, 0, 4), &out), StatusCode::FAILED_PRECONDITION,
                   "unknown session");
    expect_refused(c.compute(wire::ComputeRequest()), StatusCode::FAILED_PRECONDITION,
                   "unknown session");
  }
  // A session that ended is as unknown as one that never was.
  RawClient other(address());
  const std::string ended = other.session();
  other.close();
  for (int i = 0; i < 100 && server_->session_count() > 1; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  c.use_session(ended);
  expect_refused(c.alloc(0, 64), StatusCode::FAILED_PRECONDITION, "unknown session");
}

TEST_F(HostileClient, AHelloFromAnotherReleaseIsRefusedNamingBothSides) {
  wire::Hello hello;
  *hello.mutable_manifest() = local_manifest();
  hello.mutable_manifest()->set_protocol(kProtocolVersion + 7);
  RawClient future(address(), &hello);
  EXPECT_FALSE(future.in_session());
  expect_refused(future.hello_status(), StatusCode::FAILED_PRECONDITION,
                 format("speaks RPC protocol %u, the client speaks %u", kProtocolVersion,
                        kProtocolVersion + 7));

  *hello.mutable_manifest() = local_manifest();
  hello.mutable_manifest()->mutable_ops()->SwapElements(1, 2);  // View and Reshape swapped
  RawClient renumbered(address(), &hello);
  EXPECT_FALSE(renumbered.in_session());
  expect_refused(renumbered.hello_status(), StatusCode::FAILED_PRECONDITION, "op sets differ");
  EXPECT_NE(renumbered.hello_status().error_message().find("[none,view,reshape"), std::string::npos)
      << describe(renumbered.hello_status());
  EXPECT_NE(renumbered.hello_status().error_message().find("[none,reshape,view"), std::string::npos)
      << describe(renumbered.hello_status());

  *hello.mutable_manifest() = local_manifest();
  hello.mutable_manifest()->mutable_dtypes()->RemoveLast();
  RawClient fewer_dtypes(address(), &hello);
  expect_refused(fewer_dtypes.hello_status(), StatusCode::FAILED_PRECONDITION, "dtype sets differ");

  RawClient empty(address(), &wire::Hello::default_instance());
  expect_refused(empty.hello_status(), StatusCode::FAILED_PRECONDITION, "protocol");
  EXPECT_EQ(server_->session_count(), 1u);  // only the fixture's client
}

TEST_F(HostileClient, AllocationsOfNothingTooMuchOrNowhereAreRefused) {
  RawClient& c = *client_;
  expect_refused(c.alloc(0, 0), StatusCode::INVALID_ARGUMENT, "0 bytes");
  // Sizes no machine has must be refused before anything is reserved.
  for (uint64_t size : {uint64_t{1} << 62, kU64Max, kU64Max - 63, uint64_t{1} << 48}) {
    grpc::Status s = c.alloc(0, size);
    EXPECT_FALSE(s.ok()) << size;
    EXPECT_NE(s.error_message().find("asked for"), std::string::npos) << describe(s);
  }
  expect_refused(c.alloc(1, 64), StatusCode::INVALID_ARGUMENT, "device 1 does not exist");
  expect_refused(c.alloc(UINT32_MAX, 64), StatusCode::INVALID_ARGUMENT, "does not exist");
  expect_refused(c.memory(3), StatusCode::INVALID_ARGUMENT, "device 3 does not exist");
  EXPECT_TRUE(c.memory(0).ok());
}

TEST(HostileClientMemoryLimit, AllocationsPastTheLimitAreRefusedAndFreeingMakesRoom) {
  auto server = start_server(size_t{1} << 20);
  RawClient c(endpoint(*server));
  expect_refused(c.alloc(0, (size_t{1} << 20) + 1), StatusCode::RESOURCE_EXHAUSTED, "limit");
  expect_refused(c.alloc(0, uint64_t{1} << 62), StatusCode::RESOURCE_EXHAUSTED, "limit");
  expect_refused(c.alloc(0, kU64Max), StatusCode::RESOURCE_EXHAUSTED, "limit");
  const uint64_t a = c.alloc_ok(600 << 10);
  // The limit spans sessions: another client cannot take what this one holds.
  RawClient other(endpoint(*server));
  expect_refused(other.alloc(0, 600 << 10), StatusCode::RESOURCE_EXHAUSTED, "limit");
  EXPECT_TRUE(c.free(a).ok());
  EXPECT_TRUE(other.alloc(0, 600 << 10).ok());
  expect_serves_a_well_behaved_client(endpoint(*server));
}

TEST_F(HostileClient, TransfersWithUnknownBuffersOrRangesOutsideThemAreRefused) {
  RawClient& c = *client_;
  const uint64_t id = c.alloc_ok(64);
  const uint64_t freed = c.alloc_ok(64);
  ASSERT_TRUE(c.free(freed).ok());
  std::string out;
  for (uint64_t bad : {uint64_t{0}, freed, id + 100, kU64Max}) {
    expect_refused(c.write(range(bad, 0, 4), {"abcd"}), StatusCode::INVALID_ARGUMENT,
                   "does not exist");
    expect_refused(c.read(range(bad, 0, 4), &out), StatusCode::INVALID_ARGUMENT, "does not exist");
    expect_refused(c.clear(bad, 1), StatusCode::INVALID_ARGUMENT, "does not exist");
    expect_refused(c.free(bad), StatusCode::INVALID_ARGUMENT, "does not exist");
    bool hit = true;
    expect_refused(c.write_cached(range(bad, 0, 4), wire::Hash128(), &hit),
                   StatusCode::INVALID_ARGUMENT, "does not exist");
  }
  // Ranges past the end, including ones whose end wraps around 2^64.
  const std::vector<wire::Range> outside = {
      range(id, 0, 65),      range(id, 60, 8),           range(id, 65, 0),
      range(id, 64, 1),      range(id, kU64Max - 7, 16), range(id, 8, kU64Max),
      range(id, kU64Max, 1), range(id, 1, kU64Max),      range(id, uint64_t{1} << 63, 0)};
  for (const wire::Range& r : outside) {
    const std::string at = r.DebugString();
    expect_refused(c.write(r, {std::string(std::min<uint64_t>(r.size(), 64), 'x')}),
                   StatusCode::INVALID_ARGUMENT, "outside buffer");
    expect_refused(c.read(r, &out), StatusCode::INVALID_ARGUMENT, "outside buffer");
    EXPECT_TRUE(out.empty()) << at;
    bool hit = true;
    expect_refused(c.write_cached(r, wire::Hash128(), &hit), StatusCode::INVALID_ARGUMENT,
                   "outside buffer");
  }
  // An empty range at the very end is in bounds.
  EXPECT_TRUE(c.read(range(id, 64, 0), &out).ok());

  // Writes whose bytes disagree with their header.
  expect_refused(c.write(range(id, 0, 8), {std::string(16, 'x')}), StatusCode::INVALID_ARGUMENT,
                 "more than the 8 bytes");
  expect_refused(c.write(range(id, 0, 8), {"abcd", "efgh", "i"}), StatusCode::INVALID_ARGUMENT,
                 "more than the 8 bytes");
  expect_refused(c.write(range(id, 0, 16), {std::string(8, 'x')}), StatusCode::INVALID_ARGUMENT,
                 "announced 16 bytes but sent 8");
  expect_refused(c.write(range(id, 0, 16), {}), StatusCode::INVALID_ARGUMENT,
                 "announced 16 bytes but sent 0");
  expect_refused(c.write(range(id, 0, 4), {"abcd"}, nullptr, false), StatusCode::INVALID_ARGUMENT,
                 "must start with its range");
  expect_refused(c.write(range(id, 0, 4), {}, nullptr, false), StatusCode::INVALID_ARGUMENT,
                 "must start with its range");
  const std::string bytes(64, 'w');
  wire::Hash128 wrong = to_wire(content_hash(bytes.data(), bytes.size()));
  wrong.set_low(wrong.low() ^ 1);
  expect_refused(c.write(range(id, 0, 64), {bytes}, &wrong), StatusCode::DATA_LOSS, "damaged");

  for (uint32_t value : {256u, 1000u, UINT32_MAX})
    expect_refused(c.clear(id, value), StatusCode::INVALID_ARGUMENT, "not a byte");
  expect_refused(c.free(freed), StatusCode::INVALID_ARGUMENT, "does not exist");

  // The buffer itself still works.
  ASSERT_TRUE(c.write(range(id, 8, 4), {"good"}).ok());
  ASSERT_TRUE(c.read(range(id, 8, 4), &out).ok());
  EXPECT_EQ(out, "good");
}

// The fixture's client with the rich graph uploaded and computed once, under hash 1.
class HostileGraphs : public HostileClient {
 protected:
  void SetUp() override {
    HostileClient::SetUp();
    graph_ = std::make_unique<MirroredGraph>(rich_graph);
    graph_->upload(*client_);
    base_ = graph_->request(1);
    expect_base_computes();
  }

  void expect_base_computes(bool with_graph = true) {
    wire::ComputeRequest req = base_;
    if (!with_graph) req.clear_graph();
    wire::ComputeReply rep;
    grpc::Status s = client_->compute(req, &rep);
    ASSERT_TRUE(s.ok()) << describe(s);
    ASSERT_EQ(rep.reads_size(), static_cast<int>(graph_->expected().size()));
    for (int i = 0; i < rep.reads_size(); ++i) EXPECT_EQ(rep.reads(i), graph_->expected()[i]) << i;
  }

  // The base request under a new hash with `change` applied to its graph.
  grpc::Status compute_changed(const std::function<void(wire::GraphDesc&)>& change) {
    wire::ComputeRequest req = base_;
    req.set_graph_hash(++hash_);
    change(*req.mutable_graph());
    return client_->compute(req);
  }

  int index_of(const char* name) const {
    for (int i = 0; i < base_.graph().tensors_size(); ++i)
      if (base_.graph().tensors(i).name() == name) return i;
    ADD_FAILURE() << "no tensor " << name;
    return 0;
  }

  std::unique_ptr<MirroredGraph> graph_;
  wire::ComputeRequest base_;
  uint64_t hash_ = 1000;
};

TEST_F(HostileGraphs, AnUnknownHashWithoutItsGraphIsNotFound) {
  wire::ComputeRequest req = base_;
  req.clear_graph();
  req.set_graph_hash(0xdeadbeef);
  expect_refused(client_->compute(req), StatusCode::NOT_FOUND, "unknown graph");
  expect_base_computes(false);
}

TEST_F(HostileGraphs, AGraphOverAFreedBufferIsForgottenNotRunOnFreedMemory) {
  const uint64_t params = graph_->remote(0);
  ASSERT_TRUE(client_->free(params).ok());
  // The graph cached under hash 1 used the freed buffer: it must be gone.
  wire::ComputeRequest req = base_;
  req.clear_graph();
  expect_refused(client_->compute(req), StatusCode::NOT_FOUND, "unknown graph");
  // Sent whole again, it names a buffer the session no longer has.
  expect_refused(client_->compute(base_), StatusCode::INVALID_ARGUMENT,
                 format("names buffer %llu, which this session does not have",
                        static_cast<unsigned long long>(params)));
}

TEST_F(HostileGraphs, BuffersOfAnotherSessionAreNotReachable) {
  RawClient other(address());
  wire::ComputeRequest req = base_;
  req.set_graph_hash(77);
  expect_refused(other.compute(req), StatusCode::INVALID_ARGUMENT, "this session does not have");
  std::string out;
  expect_refused(other.read(range(graph_->remote(0), 0, 4), &out), StatusCode::INVALID_ARGUMENT,
                 "does not exist");
  req.clear_graph();
  req.set_graph_hash(1);
  expect_refused(other.compute(req), StatusCode::NOT_FOUND, "unknown graph");
}

TEST_F(HostileGraphs, MalformedGraphsAreRefusedNamingTheProblem) {
  const int x = index_of("x");
  const int n = base_.graph().tensors_size();
  const int leafs = static_cast<int>(base_.graph().leaf_count());
  const int node = leafs + 2;  // a computed node with sources
  int view = 0;                // the first View node (the slice)
  for (int i = n - 1; i >= leafs; --i)
    if (base_.graph().tensors(i).op() == static_cast<uint32_t>(Op::View)) view = i;
  ASSERT_GT(view, 0);
  struct Case {
    const char* what;
    std::function<void(wire::GraphDesc&)> change;
    const char* words;
  };
  const std::vector<Case> cases = {
      {"no tensors", [](wire::GraphDesc& g) { g.clear_tensors(); }, "unknown graph"},
      {"leaf_count past the end", [&](wire::GraphDesc& g) { g.set_leaf_count(n + 1); },
       "leafs but only"},
      {"leaf_count huge", [](wire::GraphDesc& g) { g.set_leaf_count(UINT32_MAX); },
       "leafs but only"},
      {"leaf_count short", [&](wire::GraphDesc& g) { g.set_leaf_count(leafs - 1); },
       "leafs come first"},
      {"source after the node",
       [&](wire::GraphDesc& g) { g.mutable_tensors(node)->set_src(0, node); },
       "not an earlier tensor"},
      {"source past the end",
       [&](wire::GraphDesc& g) { g.mutable_tensors(node)->set_src(0, n + 5); },
       "not an earlier tensor"},
      {"negative source", [&](wire::GraphDesc& g) { g.mutable_tensors(node)->set_src(0, -2); },
       "not an earlier tensor"},
      {"view of a later tensor",
       [&](wire::GraphDesc& g) { g.mutable_tensors(node)->set_view_src(n - 1); },
       "not an earlier tensor"},
      {"unknown op", [&](wire::GraphDesc& g) { g.mutable_tensors(node)->set_op(kOpCount); },
       "has op"},
      {"op past uint8", [&](wire::GraphDesc& g) { g.mutable_tensors(node)->set_op(256 + 4); },
       "has op"},
      {"unknown dtype",
       [&](wire::GraphDesc& g) {
         g.mutable_tensors(x)->set_type(static_cast<uint32_t>(DType::Count));
       },
       "dtype"},
      {"dtype past uint8", [&](wire::GraphDesc& g) { g.mutable_tensors(x)->set_type(256); },
       "dtype"},
      {"unknown flags", [&](wire::GraphDesc& g) { g.mutable_tensors(x)->set_flags(1u << 9); },
       "unknown flags"},
      {"three dims", [&](wire::GraphDesc& g) { g.mutable_tensors(x)->mutable_ne()->RemoveLast(); },
       "must have 4 sizes"},
      {"too many params",
       [&](wire::GraphDesc& g) {
         for (int i = 0; i < 17; ++i) g.mutable_tensors(node)->add_params(0);
       },
       "too many parameters"},
      {"too many sources",
       [&](wire::GraphDesc& g) {
         for (int i = 0; i < 5; ++i) g.mutable_tensors(node)->add_src(-1);
       },
       "too many parameters or sources"},
      {"input shape changed", [&](wire::GraphDesc& g) { g.mutable_tensors(x)->set_ne(1, 4); },
       "builder"},
      {"node shape changed", [&](wire::GraphDesc& g) { g.mutable_tensors(node)->set_ne(0, 9); },
       "but the builder makes"},
      {"zero dim", [&](wire::GraphDesc& g) { g.mutable_tensors(x)->set_ne(2, 0); },
       "dims must be 1 to 2^40"},
      {"huge dims",
       [&](wire::GraphDesc& g) {
         g.mutable_tensors(x)->set_ne(1, int64_t{1} << 40);
         g.mutable_tensors(x)->set_ne(2, int64_t{1} << 40);
       },
       "more than 2^40"},
      {"stride below the element", [&](wire::GraphDesc& g) { g.mutable_tensors(x)->set_nb(1, 2); },
       "below the element size"},
      // Kernels read f32 through float pointers: odd addresses are undefined behaviour.
      {"leaf at an odd offset",
       [&](wire::GraphDesc& g) { g.mutable_tensors(x)->set_offset(g.tensors(x).offset() + 1); },
       "misaligns"},
      {"leaf stride off the element grid",
       [&](wire::GraphDesc& g) { g.mutable_tensors(x)->set_nb(1, g.tensors(x).nb(1) + 2); },
       "misaligns"},
      {"view at an odd offset",
       [&](wire::GraphDesc& g) {
         g.mutable_tensors(view)->set_view_offset(g.tensors(view).view_offset() + 1);
       },
       "misaligns"},
      {"leaf past its buffer's end",
       [&](wire::GraphDesc& g) { g.mutable_tensors(x)->set_offset(graph_->size(1) - 4); },
       "does not fit its buffer"},
      {"leaf offset wraps",
       [&](wire::GraphDesc& g) { g.mutable_tensors(x)->set_offset(kU64Max - 7); },
       "does not fit its buffer"},
      {"leaf in no buffer", [&](wire::GraphDesc& g) { g.mutable_tensors(x)->set_buffer(0); },
       "names buffer 0"},
      {"leaf in an unknown buffer",
       [&](wire::GraphDesc& g) { g.mutable_tensors(x)->set_buffer(kU64Max); },
       "this session does not have"},
      {"too many tensors",
       [](wire::GraphDesc& g) {
         // Empty descriptions: the count is checked before any of them.
         g.clear_tensors();
         for (int i = 0; i <= kMaxGraphTensors; ++i) g.add_tensors();
       },
       "1 to 262144 tensors"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    grpc::Status s = compute_changed(c.change);
    EXPECT_FALSE(s.ok());
    EXPECT_NE(s.error_message().find(c.words), std::string::npos) << describe(s);
  }
  expect_base_computes(false);
}

TEST_F(HostileGraphs, AHugeTensorNameStillGetsAnErrorReply) {
  // Error messages quote names: an unbounded one would not fit the reply's metadata, and
  // the client would see its connection dropped instead of the error.
  for (const std::string& name : {std::string(1 << 20, 'n'), [] {
                                    std::string s;
                                    for (int i = 0; i < 4000; ++i)
                                      s += "\u00e9";  // percent-encoded in replies
                                    return s;
                                  }()}) {
    grpc::Status s = compute_changed([&](wire::GraphDesc& g) {
      wire::TensorDesc& x = *g.mutable_tensors(index_of("x"));
      x.set_name(name);
      x.set_type(999);
    });
    expect_refused(s, StatusCode::INVALID_ARGUMENT, "has dtype");
  }
  wire::Hello hello;
  *hello.mutable_manifest() = local_manifest();
  hello.mutable_manifest()->mutable_ops()->Add(std::string(1 << 20, 'o'));
  RawClient verbose(address(), &hello);
  expect_refused(verbose.hello_status(), StatusCode::FAILED_PRECONDITION, "op sets differ");
  expect_base_computes(false);
}

TEST_F(HostileGraphs, RequestsWithBadDevicesWritesOrReadsAreRefused) {
  wire::ComputeRequest req = base_;
  req.set_device(1);
  expect_refused(client_->compute(req), StatusCode::INVALID_ARGUMENT, "device 1 does not exist");

  const uint64_t out = graph_->remote(2);
  for (const wire::Range& r : {range(out, graph_->size(2), 1), range(out, kU64Max - 7, 16),
                               range(out, 0, kU64Max), range(kU64Max, 0, 4)}) {
    req = base_;
    *req.add_reads() = r;
    grpc::Status s = client_->compute(req);
    EXPECT_EQ(s.error_code(), StatusCode::INVALID_ARGUMENT) << describe(s);
    EXPECT_TRUE(s.error_message().find("outside buffer") != std::string::npos ||
                s.error_message().find("does not exist") != std::string::npos)
        << describe(s);

    req = base_;
    wire::InlineWrite* w = req.add_writes();
    *w->mutable_range() = r;
    w->set_data("abcd");
    s = client_->compute(req);
    EXPECT_EQ(s.error_code(), StatusCode::INVALID_ARGUMENT) << describe(s);
  }
  req = base_;
  wire::InlineWrite* w = req.add_writes();
  *w->mutable_range() = range(out, 0, 8);
  w->set_data("abcd");
  expect_refused(client_->compute(req), StatusCode::INVALID_ARGUMENT,
                 "announced 8 bytes but carries 4");

  // Reads past the reply's budget, though each is in range.
  const uint64_t big = client_->alloc_ok(20 << 20);
  req = base_;
  *req.add_reads() = range(big, 0, 20 << 20);
  *req.add_reads() = range(big, 0, 20 << 20);
  expect_refused(client_->compute(req), StatusCode::INVALID_ARGUMENT, "may read back at most");
  expect_base_computes(false);
}

TEST_F(HostileGraphs, RowIdsOutsideTheTableAreAnErrorNotAnOutOfBoundsRead) {
  // The ids are data, not part of the graph: the kernel must check them.
  const int ids = index_of("ids");
  const wire::TensorDesc& d = base_.graph().tensors(ids);
  for (int32_t bad : {6, -1, INT32_MAX, INT32_MIN}) {
    std::string bytes(16, '\0');
    std::memcpy(bytes.data() + 4, &bad, 4);
    ASSERT_TRUE(client_->write(range(d.buffer(), d.offset(), 16), {bytes}).ok());
    wire::ComputeRequest req = base_;
    req.clear_graph();
    grpc::Status s = client_->compute(req);
    EXPECT_FALSE(s.ok()) << bad;
    EXPECT_NE(s.error_message().find("get_rows"), std::string::npos) << describe(s);
  }
  std::string good(16, '\0');
  for (int32_t i = 0; i < 4; ++i) {
    const int32_t id = i % 3;
    std::memcpy(good.data() + 4 * i, &id, 4);
  }
  ASSERT_TRUE(client_->write(range(d.buffer(), d.offset(), 16), {good}).ok());
  expect_base_computes(false);
}

TEST_F(HostileGraphs, AWeightBufferSwappedForACachedOneLeavesNoGraphOnFreedMemory) {
  // Another client leaves the same weight bytes in the server's cache.
  const std::string weights = graph_->bytes(0);
  const wire::Hash128 hash = to_wire(content_hash(weights.data(), weights.size()));
  {
    RawClient donor(address());
    const uint64_t id = donor.alloc_ok(weights.size());
    ASSERT_TRUE(donor.write(range(id, 0, weights.size()), {weights}, &hash).ok());
    ASSERT_TRUE(donor.free(id).ok());
  }
  // The cached buffer may take the place of the one the graph under hash 1 was built on.
  bool hit = false;
  grpc::Status s = client_->write_cached(range(graph_->remote(0), 0, weights.size()), hash, &hit);
  ASSERT_TRUE(s.ok()) << describe(s);
  // Whatever became of the old memory, the cached graph must not compute from it.
  wire::ComputeRequest req = base_;
  req.clear_graph();
  s = client_->compute(req);
  EXPECT_TRUE(s.ok() || s.error_code() == StatusCode::NOT_FOUND) << describe(s);
  expect_base_computes();
}

TEST_F(HostileClient, AWriteThatFailsHalfwayCannotPoisonTheWeightCache) {
  const std::string good(4096, 'g'), bad(4096, 'b');
  const wire::Hash128 hash = to_wire(content_hash(good.data(), good.size()));
  // Variants: more bytes than announced, fewer, and (the control) no failed write at all.
  for (int variant = 0; variant < 3; ++variant) {
    {
      // The buffer holds a verified weight, then a write overwrites it and fails.
      RawClient attacker(address());
      const uint64_t id = attacker.alloc_ok(good.size());
      ASSERT_TRUE(attacker.write(range(id, 0, good.size()), {good}, &hash).ok());
      if (variant < 2) {
        const grpc::Status s =
            variant == 0 ? attacker.write(range(id, 0, good.size()), {bad, "more"})
                         : attacker.write(range(id, 0, good.size()), {bad.substr(0, 2048)});
        EXPECT_EQ(s.error_code(), StatusCode::INVALID_ARGUMENT) << describe(s);
      }
      ASSERT_TRUE(attacker.free(id).ok());
    }
    // A later client asking for the good bytes by hash must never get the bad ones.
    const uint64_t id = client_->alloc_ok(good.size());
    bool hit = false;
    ASSERT_TRUE(client_->write_cached(range(id, 0, good.size()), hash, &hit).ok());
    std::string back;
    ASSERT_TRUE(client_->read(range(id, 0, good.size()), &back).ok());
    if (variant == 2) {
      EXPECT_TRUE(hit) << "the control: an intact weight is served from the cache";
    }
    EXPECT_TRUE(!hit || back == good)
        << "variant " << variant << ": the cache served altered bytes";
  }
}

TEST(HostileClientDevices, AGraphCachedForOneDeviceIsNotRunOnAnother) {
  // The same CPU served twice stands for two devices.
  auto server = start_server(0, {&cpu(), &cpu()});
  RawClient c(endpoint(*server));
  MirroredGraph g(small_graph);
  g.upload(c);  // every buffer on device 0
  ASSERT_TRUE(c.compute(g.request(5)).ok());
  wire::ComputeRequest req = g.request(5);
  req.set_device(1);
  expect_refused(c.compute(req), StatusCode::INVALID_ARGUMENT, "this session does not have");
  req.clear_graph();
  grpc::Status s = c.compute(req);
  EXPECT_FALSE(s.ok()) << "a graph over device 0's buffers ran on device 1";
}

// Thousands of random single-field mutations of a valid graph request: each gets an answer,
// OK or an error with a message, and the server keeps computing the valid graph correctly.
TEST_F(HostileGraphs, RandomMutationsOfAValidGraphGetAnAnswerAndBreakNothing) {
  const uint64_t spare = client_->alloc_ok(256);
  const uint64_t freed = client_->alloc_ok(256);
  ASSERT_TRUE(client_->free(freed).ok());
  const std::vector<uint64_t> buffers = {
      graph_->remote(0), graph_->remote(1), graph_->remote(2), spare, freed, 0, kU64Max};
  std::mt19937_64 rng(20240611);
  auto pick = [&](uint64_t n) { return n ? rng() % n : 0; };
  auto chance = [&](int percent) { return static_cast<int>(pick(100)) < percent; };
  auto one_of = [&]<typename T>(std::initializer_list<T> values) {
    return *(values.begin() + pick(values.size()));
  };
  // Edge values near and far from `v`; arithmetic wraps, as a careless client's would.
  auto u64 = [&](uint64_t v) {
    return one_of({uint64_t{0}, uint64_t{1}, uint64_t{3}, uint64_t{4}, uint64_t{8}, uint64_t{64},
                   v - 1, v + 1, v * 2, v + 4, kU64Max, kU64Max - 7, uint64_t{1} << 40,
                   (uint64_t{1} << 40) + 1, rng()});
  };
  auto i64 = [&](int64_t v) {
    return static_cast<int64_t>(one_of(
        {uint64_t{0}, ~uint64_t{0}, uint64_t{1}, uint64_t{2}, uint64_t{3}, uint64_t(v) - 1,
         uint64_t(v) + 1, uint64_t(v) * 2, uint64_t(v / 2), uint64_t{INT64_MAX}, uint64_t{1} << 63,
         uint64_t{1} << 40, (uint64_t{1} << 40) + 1, uint64_t{1} << 31, rng()}));
  };
  auto i32 = [&](int32_t v) {
    const float f = one_of({0.0f, -1.0f, 1e30f, 1e-30f, std::numeric_limits<float>::infinity(),
                            std::numeric_limits<float>::quiet_NaN()});
    uint32_t bits;
    std::memcpy(&bits, &f, 4);
    return static_cast<int32_t>(
        one_of({0u, ~0u, 1u, 2u, 3u, 4u, 8u, uint32_t(v) - 1, uint32_t(v) + 1, uint32_t(v) * 2,
                uint32_t{INT32_MAX}, 1u << 31, bits, static_cast<uint32_t>(rng())}));
  };
  auto mutate_range = [&](wire::Range& r) {
    switch (pick(3)) {
      case 0:
        r.set_buffer(buffers[pick(buffers.size())]);
        break;
      case 1:
        r.set_offset(u64(r.offset()));
        break;
      default:
        r.set_size(u64(r.size()));
        break;
    }
  };

  // One random change to one field of the request.
  auto mutate = [&](wire::ComputeRequest& req) {
    wire::GraphDesc& g = *req.mutable_graph();
    const int n = g.tensors_size();
    if (n == 0) return;
    wire::TensorDesc& t = *g.mutable_tensors(static_cast<int>(pick(n)));
    // An earlier mutation may have shortened a field list: index only what is there.
    auto any = [&](int size) { return static_cast<int>(pick(size)); };
    auto index = [&](int32_t v) {
      return static_cast<int32_t>(
          one_of({~0u - 1, ~0u, 0u, uint32_t(v) - 1, uint32_t(v) + 1, uint32_t(n) - 1, uint32_t(n),
                  uint32_t{INT32_MAX}, 1u << 31, static_cast<uint32_t>(pick(n))}));
    };
    switch (pick(21)) {
      case 0:
        t.set_type(chance(80) ? pick(static_cast<uint64_t>(DType::Count) + 1)
                              : static_cast<uint32_t>(rng()));
        break;
      case 1:
      case 2:
        if (t.ne_size() > 0) t.set_ne(any(t.ne_size()), i64(t.ne(any(t.ne_size()))));
        break;
      case 3:
      case 4:
        if (t.nb_size() > 0) t.set_nb(any(t.nb_size()), u64(t.nb(any(t.nb_size()))));
        break;
      case 5:
        t.set_op(chance(80) ? pick(kOpCount + 1) : static_cast<uint32_t>(rng()));
        break;
      case 6:
      case 7:
        if (t.params_size() > 0 && chance(85)) {
          const int k = static_cast<int>(pick(t.params_size()));
          t.set_params(k, i32(t.params(k)));
        } else {
          t.add_params(i32(0));
        }
        break;
      case 8:
        if (t.src_size() > 0) {
          const int k = static_cast<int>(pick(t.src_size()));
          t.set_src(k, index(t.src(k)));
        } else {
          t.add_src(index(0));
        }
        break;
      case 9:
        t.set_view_src(index(t.view_src()));
        break;
      case 10:
        t.set_view_offset(u64(t.view_offset()));
        break;
      case 11:
        t.set_buffer(buffers[pick(buffers.size())]);
        break;
      case 12:
        t.set_offset(u64(t.offset()));
        break;
      case 13:
        t.set_flags(chance(70) ? t.flags() ^ (1u << pick(4)) : static_cast<uint32_t>(rng()));
        break;
      case 14:
        g.set_leaf_count(static_cast<uint32_t>(u64(g.leaf_count())));
        break;
      case 15: {  // drop, duplicate or swap tensors
        const int i = static_cast<int>(pick(n)), j = static_cast<int>(pick(n));
        if (chance(40)) {
          g.mutable_tensors()->DeleteSubrange(i, 1);
        } else if (chance(50)) {
          *g.add_tensors() = g.tensors(i);
          if (chance(50)) g.mutable_tensors()->SwapElements(n, i);
        } else {
          g.mutable_tensors()->SwapElements(i, j);
        }
        break;
      }
      case 16:  // a field list of the wrong length
        switch (pick(4)) {
          case 0:
            if (t.ne_size() > 0) t.mutable_ne()->RemoveLast();
            break;
          case 1:
            t.add_nb(8);
            break;
          case 2:
            if (t.src_size() > 0) t.mutable_src()->RemoveLast();
            break;
          default:
            for (int k = 0; k < 4; ++k) t.add_src(-1);
            break;
        }
        break;
      case 20:  // another dtype with strides to match: it passes the leaf checks
        if (t.op() == 0 && t.ne_size() == kMaxDims && t.nb_size() == kMaxDims) {
          const auto type = static_cast<DType>(pick(static_cast<uint64_t>(DType::Count)));
          Shape ne;
          for (int k = 0; k < kMaxDims; ++k) ne[k] = t.ne(k);
          if (ne[0] < 1 || ne[0] % block_size(type) != 0) break;
          const auto nb = contiguous_strides(type, ne);
          t.set_type(static_cast<uint32_t>(type));
          for (int k = 0; k < kMaxDims; ++k) t.set_nb(k, nb[k]);
        }
        break;
      case 17:
        req.set_device(chance(50) ? 1 : static_cast<uint32_t>(rng()));
        break;
      case 18:
        if (req.reads_size() > 0 && chance(80)) {
          mutate_range(*req.mutable_reads(static_cast<int>(pick(req.reads_size()))));
        } else {
          *req.add_reads() = range(buffers[pick(buffers.size())], u64(0), u64(16));
        }
        break;
      default: {
        wire::InlineWrite* w = req.add_writes();
        *w->mutable_range() = range(graph_->remote(1), 0, 4);
        mutate_range(*w->mutable_range());
        w->set_data(std::string(std::min<uint64_t>(w->range().size(), 64), '\0'));
        if (chance(20)) w->set_data("xyz");
        break;
      }
    }
  };

  // Single-field mutations, then a few stacked ones that reach past the first check.
  const int kSingle = 3000, kStacked = 1000, kMutations = kSingle + kStacked;
  std::map<int, int> codes;
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < kMutations; ++i) {
    wire::ComputeRequest req = base_;
    req.set_graph_hash(++hash_);
    const int count = i < kSingle ? 1 : 2 + static_cast<int>(pick(3));
    for (int m = 0; m < count; ++m) mutate(req);
    // Some requests name a graph the server may hold (the valid one, or a recent mutation
    // it accepted) instead of sending one.
    if (chance(5)) {
      req.clear_graph();
      req.set_graph_hash(chance(50) ? 1 : hash_ - pick(20));
    }
    const grpc::Status s = client_->compute(req);
    ++codes[s.error_code()];
    ASSERT_TRUE(s.ok() || s.error_code() == StatusCode::INVALID_ARGUMENT ||
                s.error_code() == StatusCode::NOT_FOUND ||
                s.error_code() == StatusCode::RESOURCE_EXHAUSTED)
        << "mutation " << i << ": " << describe(s) << "\n"
        << req.graph().ShortDebugString().substr(0, 2000);
    if (!s.ok()) {
      ASSERT_FALSE(s.error_message().empty()) << "mutation " << i;
    }
    // Accepted mutations and inline writes may have overwritten the leafs: restore them
    // now and then, and check that the valid graph still computes exactly.
    if (i % 100 == 99) graph_->upload(*client_);
    if (i % 500 == 499) expect_base_computes();
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::string summary;
  for (auto [code, count] : codes) summary += format(" code %d: %d;", code, count);
  std::printf("[ mutations ] %d in %.2f s:%s\n", kMutations, seconds, summary.c_str());
  // Some mutations are harmless (a flag, an equal value): the mix must not be all errors.
  EXPECT_GT(codes[0], 0);
  EXPECT_GT(codes[static_cast<int>(StatusCode::INVALID_ARGUMENT)], kMutations / 2);
}

}  // namespace
}  // namespace sd::rpc
