// Test helpers for sd-rpc-server against hostile clients: a raw wire client that opens
// its own session, a graph mirrored on the local CPU for exact expected results, and the
// fixtures whose teardown checks the server still serves a well-behaved client.
#pragma once

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

namespace sd::rpc::hostile {

using grpc::StatusCode;
constexpr uint64_t kU64Max = std::numeric_limits<uint64_t>::max();

inline Device& cpu() {
  return DeviceRegistry::instance().get("CPU");
}

inline std::unique_ptr<Server> start_server(size_t memory_limit = 0,
                                            std::vector<Device*> devices = {}) {
  ServerOptions o;
  o.port = 0;
  o.threads = 2;
  o.memory_limit = memory_limit;
  o.devices = devices.empty() ? std::vector<Device*>{&cpu()} : std::move(devices);
  return std::make_unique<Server>(o);
}

inline std::string endpoint(const Server& s) {
  return "127.0.0.1:" + std::to_string(s.port());
}

inline wire::Range range(uint64_t buffer, uint64_t offset, uint64_t size) {
  wire::Range r;
  r.set_buffer(buffer);
  r.set_offset(offset);
  r.set_size(size);
  return r;
}

inline std::string describe(const grpc::Status& s) {
  return "status " + std::to_string(s.error_code()) + ": " + s.error_message();
}

// The call failed with `code` and a message that contains `words`.
inline void expect_refused(const grpc::Status& s, StatusCode code, const std::string& words) {
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
inline std::vector<Tensor*> small_graph(Context& ctx) {
  Tensor* x = ctx.new_tensor(DType::F32, {4, 2}, "x");
  Tensor* b = ctx.new_tensor(DType::F32, {4}, "b");
  x->flags |= kFlagInput;
  b->flags |= kFlagParam;
  return {add(ctx, x, b)};
}

// Many ops, small shapes: each mutation of it reaches a different builder and kernel.
inline std::vector<Tensor*> rich_graph(Context& ctx) {
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
inline void expect_serves_a_well_behaved_client(const std::string& address) {
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

}  // namespace sd::rpc::hostile
