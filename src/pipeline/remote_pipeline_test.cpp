// Whole generations with modules on remote devices: in-process sd-rpc-server engines on
// free loopback ports, the tiny model, and the local image as the oracle.
#include <gtest/gtest.h>

#include <memory>

#include "backend/registry.h"
#include "backend/rpc/client/rpc_device.h"
#include "backend/rpc/server/server.h"
#include "pipeline/stable_diffusion.h"
#include "pipeline/tiny_model_test_util.h"
#include "tensor/error.h"
#include "test_support.h"

namespace sd::pipeline {
namespace {

std::unique_ptr<rpc::Server> start_server() {
  rpc::ServerOptions o;
  o.port = 0;
  o.threads = 2;
  o.devices = {&DeviceRegistry::instance().get("CPU")};
  return std::make_unique<rpc::Server>(o);
}

std::string endpoint(const rpc::Server& s) {
  return "127.0.0.1:" + std::to_string(s.port());
}

rpc::ClientOptions quick() {
  rpc::ClientOptions o;
  o.call_timeout_s = 10;
  o.compute_timeout_s = 60;
  o.keepalive_s = 2;
  o.keepalive_timeout_s = 10;
  return o;
}

class RemotePipeline : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string shared = sd::test::shared_dir();
    if (shared.empty()) GTEST_SKIP() << "needs ../shared/data/clip for the vocabulary";
    options_.architecture = test::tiny_architecture();
    options_.model = test::write_tiny_checkpoint(*options_.architecture);
    options_.clip_vocab = shared + "/data/clip/bpe_simple_vocab_16e6.txt.gz";
    options_.threads = 2;
    request_.prompt = "a cat";
    request_.width = request_.height = 32;
    request_.steps = 3;
    request_.seed = 5;
    local_ = StableDiffusion(options_).generate(request_)[0].pixels;
  }
  std::vector<uint8_t> generate(const std::string& backend, const std::string& params = {}) {
    ModelOptions o = options_;
    o.backend = backend;
    o.params_backend = params;
    StableDiffusion sd(o);
    return sd.generate(request_)[0].pixels;
  }
  ModelOptions options_;
  ImageRequest request_;
  std::vector<uint8_t> local_;
};

TEST_F(RemotePipeline, EveryPlacementOnRemoteDevicesGivesTheLocalImage) {
  auto a = start_server();
  auto b = start_server();
  // Devices are numbered in --rpc-servers order (after any this process added before).
  const auto names =
      rpc::add_rpc_servers(DeviceRegistry::instance(), endpoint(*a) + "," + endpoint(*b), quick());
  ASSERT_EQ(names.size(), 2u);
  EXPECT_EQ(std::stoi(names[1].substr(3)), std::stoi(names[0].substr(3)) + 1);
  const std::string& first = names[0];
  EXPECT_EQ(generate("diffusion=" + first), local_);
  EXPECT_EQ(generate(first), local_);
  EXPECT_EQ(generate(first, "disk"), local_);
  EXPECT_EQ(generate(first, "cpu"), local_);  // weights in RAM here, staged per graph
  EXPECT_EQ(generate("cpu", first), local_);  // weights kept remote, fetched per graph
  // Two servers holding different modules in one generation.
  EXPECT_EQ(generate("te=" + first + ",diffusion=" + names[1] + ",vae=" + first), local_);
}

TEST_F(RemotePipeline, ASecondClientFindsTheWeightsInTheServersCache) {
  auto server = start_server();
  const std::string name =
      rpc::add_rpc_servers(DeviceRegistry::instance(), endpoint(*server), quick())[0];
  auto& remote = dynamic_cast<rpc::RpcDevice&>(DeviceRegistry::instance().get(name));
  EXPECT_EQ(generate(name), local_);
  const rpc::TrafficStats first = remote.connection().stats();
  EXPECT_GT(first.weight_bytes_sent, 0u);
  EXPECT_EQ(generate(name, "disk"), local_);
  const rpc::TrafficStats second = remote.connection().stats();
  EXPECT_EQ(second.weight_bytes_sent, first.weight_bytes_sent) << "weights were sent again";
  EXPECT_GE(second.weight_bytes_cached, first.weight_bytes_sent);
}

TEST_F(RemotePipeline, AGenerationFailsCleanlyWhenTheServerDiesAndWorksWhenItIsBack) {
  auto server = start_server();
  const int port = server->port();
  const std::string name =
      rpc::add_rpc_servers(DeviceRegistry::instance(), endpoint(*server), quick())[0];
  ModelOptions o = options_;
  o.backend = "diffusion=" + name;
  StableDiffusion sd(o);
  EXPECT_EQ(sd.generate(request_)[0].pixels, local_);
  server.reset();
  try {
    sd.generate(request_);
    FAIL() << "generated with the server gone";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("127.0.0.1:" + std::to_string(port)), std::string::npos)
        << e.what();
  }
  // The server comes back on the same port: the same context generates again, reloading
  // the weights the old session lost.
  rpc::ServerOptions so;
  so.port = port;
  so.threads = 2;
  so.devices = {&DeviceRegistry::instance().get("CPU")};
  rpc::Server again(so);
  EXPECT_EQ(sd.generate(request_)[0].pixels, local_);
}

}  // namespace
}  // namespace sd::pipeline
