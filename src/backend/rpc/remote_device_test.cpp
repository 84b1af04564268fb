// The RPC backend over loopback: an in-process sd-rpc-server engine on a free port and the
// client's remote device, checked against the local CPU.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "backend/compute_buffer.h"
#include "backend/registry.h"
#include "backend/rpc/client/rpc_device.h"
#include "backend/rpc/server/server.h"
#include "backend/rpc/tcp_relay_test_util.h"
#include "tensor/context.h"
#include "tensor/error.h"
#include "tensor/ops/elementwise.h"
#include "tensor/ops/matmul.h"
#include "tensor/ops/unary.h"
#include "test_support.h"

namespace sd::rpc {
namespace {

// A server of this machine's CPU on a free loopback port.
ServerOptions cpu_server_options() {
  ServerOptions o;
  o.port = 0;
  o.threads = 2;
  o.devices = {&DeviceRegistry::instance().get("CPU")};
  return o;
}

std::unique_ptr<Server> start_server(std::string token = {}) {
  ServerOptions o = cpu_server_options();
  o.token = std::move(token);
  return std::make_unique<Server>(o);
}

// Runs `f`, which must fail with an sd::Error whose message names `flag` (the fix).
template <typename F>
void expect_error_naming(const std::string& flag, F&& f) {
  try {
    f();
    ADD_FAILURE() << "no error naming " << flag;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(flag), std::string::npos) << e.what();
  }
}

// Waits (up to 5 s) for the server to notice that its clients have gone.
void wait_until_no_sessions(const Server& server) {
  for (int i = 0; i < 50 && server.session_count() > 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
}

std::string endpoint(const Server& s) {
  return "127.0.0.1:" + std::to_string(s.port());
}

ClientOptions quick_options() {
  ClientOptions o;
  o.call_timeout_s = 5;
  o.compute_timeout_s = 10;
  o.keepalive_s = 1;
  o.keepalive_timeout_s = 5;
  return o;
}

// y = gelu(W x + b) with W a weight of `rows` x 64 f32 values.
struct SmallGraph {
  Context ctx;
  Tensor* w;
  Tensor* b;
  Tensor* x;
  Tensor* y;
  Graph graph;
  explicit SmallGraph(int rows) {
    w = ctx.new_tensor(DType::F32, {64, rows}, "w");
    b = ctx.new_tensor(DType::F32, {rows}, "b");
    x = ctx.new_tensor(DType::F32, {64, 3}, "x");
    w->flags |= kFlagParam;
    b->flags |= kFlagParam;
    x->flags |= kFlagInput;
    y = unary(ctx, add(ctx, matmul(ctx, w, x), b), UnaryOp::Gelu);
    graph = Graph::build({y});
  }
};

// Runs SmallGraph on `device` with fixed data; returns y. `steps` computes it again with
// new inputs, as a sampler would.
std::vector<float> run_small(Device& device, int rows, int steps = 1) {
  SmallGraph g(rows);
  auto wbuf = device.buffer_type().allocate(g.w->nbytes() + g.b->nbytes());
  bind_tensor(*g.w, *wbuf, 0);
  bind_tensor(*g.b, *wbuf, g.w->nbytes());
  tensor_set(*g.w, test::random_values(g.w->nelements(), 1).data());
  tensor_set(*g.b, test::random_values(g.b->nelements(), 2).data());
  ComputeBuffer memory(device.buffer_type());
  std::unique_ptr<Backend> backend = device.create_backend(BackendOptions{2});
  std::vector<float> y(static_cast<size_t>(g.y->nelements()));
  for (int step = 0; step < steps; ++step) {
    memory.allocate(g.graph);
    tensor_set(*g.x, test::random_values(g.x->nelements(), 3 + step).data());
    backend->compute(g.graph);
    backend->synchronize();
    tensor_get(*g.y, y.data());
  }
  return y;
}

RpcDevice& only_rpc_device(DeviceRegistry& registry) {
  return dynamic_cast<RpcDevice&>(registry.get("RPC0"));
}

TEST(RpcLoopback, ComputesExactlyLikeTheLocalCpu) {
  auto server = start_server();
  DeviceRegistry registry;
  EXPECT_EQ(add_rpc_servers(registry, endpoint(*server), quick_options()),
            std::vector<std::string>{"RPC0"});
  RpcDevice& remote = only_rpc_device(registry);
  EXPECT_EQ(remote.kind(), DeviceKind::Remote);
  EXPECT_NE(remote.description().find(endpoint(*server)), std::string::npos);
  EXPECT_GT(remote.memory().total, 0u);
  // The server runs the same kernels: the result is bit-identical.
  EXPECT_EQ(run_small(remote, 40), run_small(DeviceRegistry::instance().get("CPU"), 40));
}

TEST(RpcLoopback, LaterStepsSendOnlyTheGraphHashAndInputs) {
  auto server = start_server();
  DeviceRegistry registry;
  add_rpc_servers(registry, endpoint(*server), quick_options());
  RpcDevice& remote = only_rpc_device(registry);
  EXPECT_EQ(run_small(remote, 8, 4), run_small(DeviceRegistry::instance().get("CPU"), 8, 4));
  const TrafficStats s = remote.connection().stats();
  EXPECT_EQ(s.compute_calls, 4u);
  EXPECT_EQ(s.graphs_sent, 1u);
}

TEST(RpcLoopback, WeightsAlreadyOnTheServerAreNotSentAgain) {
  auto server = start_server();
  const int rows = 512;  // 128 KiB of weights: big enough for the weight cache
  for (int run = 0; run < 2; ++run) {
    DeviceRegistry registry;  // a new client connection each time, as a new process
    add_rpc_servers(registry, endpoint(*server), quick_options());
    RpcDevice& remote = only_rpc_device(registry);
    SmallGraph g(rows);
    auto wbuf = remote.buffer_type().allocate(g.w->nbytes());
    bind_tensor(*g.w, *wbuf, 0);
    tensor_set(*g.w, test::random_values(g.w->nelements(), 1).data());
    const TrafficStats s = remote.connection().stats();
    if (run == 0) {
      EXPECT_EQ(s.weight_bytes_sent, g.w->nbytes());
      EXPECT_EQ(s.weight_bytes_cached, 0u);
    } else {
      EXPECT_EQ(s.weight_bytes_sent, 0u);
      EXPECT_EQ(s.weight_bytes_cached, g.w->nbytes());
    }
    std::vector<float> back(static_cast<size_t>(g.w->nelements()));
    tensor_get(*g.w, back.data());
    EXPECT_EQ(back, test::random_values(g.w->nelements(), 1));
  }
}

TEST(RpcLoopback, AWrongTokenIsRefusedClearly) {
  auto server = start_server("s3cret");
  DeviceRegistry registry;
  ClientOptions o = quick_options();
  o.token = "guess";
  try {
    add_rpc_servers(registry, endpoint(*server), o);
    FAIL() << "a wrong token was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("token"), std::string::npos) << e.what();
  }
  o.token = "s3cret";
  EXPECT_NO_THROW(add_rpc_servers(registry, endpoint(*server), o));
}

TEST(RpcLoopback, ADeadServerFailsTheCallNamingIt) {
  auto server = start_server();
  DeviceRegistry registry;
  add_rpc_servers(registry, endpoint(*server), quick_options());
  RpcDevice& remote = only_rpc_device(registry);
  SmallGraph g(8);
  auto wbuf = remote.buffer_type().allocate(4096);
  bind_tensor(*g.w, *wbuf, 0);
  const std::string address = endpoint(*server);
  server.reset();
  const auto start = std::chrono::steady_clock::now();
  try {
    std::vector<float> back(static_cast<size_t>(g.w->nelements()));
    tensor_get(*g.w, back.data());
    FAIL() << "a read from a stopped server succeeded";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(address), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("stopped"), std::string::npos) << e.what();
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
}

// A cut network (or a host that lost power) sends no reset: the call must still fail,
// naming the server, within the keep-alive and deadline bounds (here 1 s + 5 s, and 5 s
// per call), and the client works again once the network is back.
TEST(RpcLoopback, ACutNetworkFailsTheCallInBoundedTime) {
  auto server = start_server();
  TcpRelay relay(server->port());
  const std::string address = "127.0.0.1:" + std::to_string(relay.port());
  DeviceRegistry registry;
  add_rpc_servers(registry, address, quick_options());
  RpcDevice& remote = only_rpc_device(registry);
  EXPECT_NO_THROW(run_small(remote, 8));
  relay.cut();
  const auto start = std::chrono::steady_clock::now();
  expect_error_naming(address, [&] { run_small(remote, 8); });
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(20));
  relay.restore();
  EXPECT_EQ(run_small(remote, 8), run_small(DeviceRegistry::instance().get("CPU"), 8));
}

TEST(RpcLoopback, UnreachableServerIsAnErrorNotAHang) {
  ClientOptions o = quick_options();
  o.call_timeout_s = 2;
  DeviceRegistry registry;
  // Port 1 on loopback: nothing listens there.
  EXPECT_THROW(add_rpc_servers(registry, "127.0.0.1:1", o), Error);
  EXPECT_THROW(add_rpc_servers(registry, "no-port-here", o), Error);
  EXPECT_THROW(add_rpc_servers(registry, "127.0.0.1:99999", o), Error);
}

TEST(RpcLoopback, AClosedClientsBuffersAreFreed) {
  auto server = start_server();
  {
    DeviceRegistry registry;
    add_rpc_servers(registry, endpoint(*server), quick_options());
    auto b = only_rpc_device(registry).buffer_type().allocate(1 << 20);
    EXPECT_EQ(server->session_count(), 1u);
  }
  wait_until_no_sessions(*server);
  EXPECT_EQ(server->session_count(), 0u);
}

TEST(RpcLoopback, ClientsAtOnceKeepTheirOwnBuffers) {
  auto server = start_server();
  std::vector<float> expected[2] = {run_small(DeviceRegistry::instance().get("CPU"), 24, 3),
                                    run_small(DeviceRegistry::instance().get("CPU"), 56, 3)};
  std::vector<float> got[2];
  std::string errors[2];
  auto client = [&](int i) {
    try {
      DeviceRegistry registry;
      add_rpc_servers(registry, endpoint(*server), quick_options());
      got[i] = run_small(only_rpc_device(registry), i == 0 ? 24 : 56, 3);
    } catch (const std::exception& e) {
      errors[i] = e.what();
    }
  };
  std::thread a(client, 0), b(client, 1);
  a.join();
  b.join();
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(errors[i], "");
    EXPECT_EQ(got[i], expected[i]) << "client " << i;
  }
}

TEST(RpcLoopback, TheMemoryLimitIsEnforcedWithAClearMessage) {
  ServerOptions o = cpu_server_options();
  o.memory_limit = 1 << 20;
  Server server(o);
  DeviceRegistry registry;
  add_rpc_servers(registry, endpoint(server), quick_options());
  RpcDevice& remote = only_rpc_device(registry);
  EXPECT_LE(remote.memory().total, size_t{1} << 20);
  auto first = remote.buffer_type().allocate(600 << 10);
  expect_error_naming("--mem", [&] { remote.buffer_type().allocate(600 << 10); });
  first.reset();  // freed: there is room again
  EXPECT_NO_THROW(remote.buffer_type().allocate(600 << 10));
}

// Weights the cache keeps count against --mem: they give way to a client's allocation
// rather than refusing it (before, a --mem server could hold --cache-mem on top).
TEST(RpcLoopback, CachedWeightsGiveWayWithinTheMemoryLimit) {
  ServerOptions o = cpu_server_options();
  o.memory_limit = 1 << 20;
  Server server(o);
  {
    DeviceRegistry registry;
    add_rpc_servers(registry, endpoint(server), quick_options());
    SmallGraph g(2048);  // 512 KiB of weights, cached when this client goes
    auto wbuf = only_rpc_device(registry).buffer_type().allocate(g.w->nbytes());
    bind_tensor(*g.w, *wbuf, 0);
    tensor_set(*g.w, test::random_values(g.w->nelements(), 1).data());
  }
  wait_until_no_sessions(server);
  EXPECT_EQ(server.cached_bytes(), size_t{512} << 10);
  DeviceRegistry registry;
  add_rpc_servers(registry, endpoint(server), quick_options());
  // 512 KiB cached + 700 KiB asked for is past the 1 MiB limit: the cached weight goes.
  EXPECT_NO_THROW(only_rpc_device(registry).buffer_type().allocate(700 << 10));
  EXPECT_EQ(server.cached_bytes(), 0u);
}

TEST(RpcLoopback, ClientsPastMaxSessionsAreRefusedClearly) {
  ServerOptions o = cpu_server_options();
  o.max_sessions = 1;
  Server server(o);
  DeviceRegistry first;
  add_rpc_servers(first, endpoint(server), quick_options());
  DeviceRegistry second;
  expect_error_naming("--max-sessions",
                      [&] { add_rpc_servers(second, endpoint(server), quick_options()); });
  EXPECT_EQ(server.session_count(), 1u);
  EXPECT_NO_THROW(run_small(only_rpc_device(first), 8));  // the first is unaffected
}

// A compute call that runs past --compute-timeout is stopped with an error naming the
// flag; the session stays usable.
TEST(RpcLoopback, AComputeCallPastTheTimeLimitIsStopped) {
  ServerOptions o = cpu_server_options();
  o.threads = 1;
  o.compute_timeout = 1;
  Server server(o);
  DeviceRegistry registry;
  add_rpc_servers(registry, endpoint(server), quick_options());
  RpcDevice& remote = only_rpc_device(registry);
  // A chain of large matmuls: far more than a second of work on one thread.
  Context ctx;
  Tensor* w = ctx.new_tensor(DType::F32, {1024, 1024}, "w");
  Tensor* x = ctx.new_tensor(DType::F32, {1024, 1024}, "x");
  w->flags |= kFlagParam;
  x->flags |= kFlagInput;
  Tensor* y = x;
  for (int i = 0; i < 2000; ++i) y = matmul(ctx, w, y);
  Graph graph = Graph::build({y});
  auto wbuf = remote.buffer_type().allocate(w->nbytes());
  bind_tensor(*w, *wbuf, 0);
  tensor_set(*w, std::vector<float>(static_cast<size_t>(w->nelements()), 0.0f).data());
  ComputeBuffer memory(remote.buffer_type());
  memory.allocate(graph);
  tensor_set(*x, std::vector<float>(static_cast<size_t>(x->nelements()), 1.0f).data());
  std::unique_ptr<Backend> backend = remote.create_backend(BackendOptions{1});
  const auto start = std::chrono::steady_clock::now();
  expect_error_naming("--compute-timeout", [&] {
    backend->compute(graph);
    backend->synchronize();
  });
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(8));
  EXPECT_NO_THROW(run_small(remote, 8));
}

TEST(RpcLoopback, AnIdleSessionStaysOpen) {
  // Keep-alive pings every second for several seconds must not end the session.
  auto server = start_server();
  DeviceRegistry registry;
  add_rpc_servers(registry, endpoint(*server), quick_options());
  RpcDevice& remote = only_rpc_device(registry);
  std::this_thread::sleep_for(std::chrono::seconds(4));
  EXPECT_FALSE(remote.connection().session_lost());
  EXPECT_EQ(server->session_count(), 1u);
  EXPECT_NO_THROW(remote.buffer_type().allocate(1024));
}

TEST(RpcLoopback, NonLoopbackBindNeedsATokenOrInsecure) {
  ServerOptions o;
  o.host = "0.0.0.0";
  o.port = 0;
  try {
    Server s(o);
    FAIL() << "an open bind without a token started";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--insecure"), std::string::npos);
  }
  EXPECT_TRUE(is_loopback_host("127.0.0.1"));
  EXPECT_TRUE(is_loopback_host("127.3.2.1"));
  EXPECT_TRUE(is_loopback_host("::1"));
  EXPECT_TRUE(is_loopback_host("localhost"));
  EXPECT_FALSE(is_loopback_host("0.0.0.0"));
  EXPECT_FALSE(is_loopback_host("192.168.1.4"));
}

}  // namespace
}  // namespace sd::rpc
