// TLS between client and server, with a throwaway self-signed certificate made by the
// openssl command (the test skips where it is missing).
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "backend/registry.h"
#include "backend/rpc/client/rpc_device.h"
#include "backend/rpc/server/server.h"
#include "tensor/error.h"

namespace sd::rpc {
namespace {

std::string read_all(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

class Tls : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (std::filesystem::temp_directory_path() / "sd_tls_XXXXXX").string();
    ASSERT_TRUE(::mkdtemp(tmpl.data()));
    dir_ = tmpl;
    const std::string cmd =
        "openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=localhost "
        "-addext subjectAltName=IP:127.0.0.1,DNS:localhost -keyout " +
        (dir_ / "key.pem").string() + " -out " + (dir_ / "cert.pem").string() + " >/dev/null 2>&1";
    if (std::system(cmd.c_str()) != 0) GTEST_SKIP() << "needs the openssl command";
    cert_ = read_all(dir_ / "cert.pem");
    key_ = read_all(dir_ / "key.pem");
  }
  void TearDown() override {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  std::unique_ptr<Server> start() {
    ServerOptions o;
    o.port = 0;
    o.devices = {&DeviceRegistry::instance().get("CPU")};
    o.tls_cert_pem = cert_;
    o.tls_key_pem = key_;
    return std::make_unique<Server>(o);
  }
  std::filesystem::path dir_;
  std::string cert_, key_;
};

TEST_F(Tls, ATrustedCertificateCarriesTheSession) {
  auto server = start();
  ClientOptions o;
  o.call_timeout_s = 5;
  o.ca_pem = cert_;
  DeviceRegistry registry;
  const auto names =
      add_rpc_servers(registry, "tls://127.0.0.1:" + std::to_string(server->port()), o);
  ASSERT_EQ(names.size(), 1u);
  auto buffer = registry.get(names[0]).buffer_type().allocate(4096);
  Tensor t;
  t.type = DType::F32;
  t.ne = {1024, 1, 1, 1};
  t.nb = contiguous_strides(t.type, t.ne);
  bind_tensor(t, *buffer, 0);
  std::vector<float> in(1024, 2.5f), out(1024);
  tensor_set(t, in.data());
  tensor_get(t, out.data());
  EXPECT_EQ(in, out);
}

TEST_F(Tls, PlaintextOrAnUntrustedCertificateIsRefused) {
  auto server = start();
  const std::string port = std::to_string(server->port());
  ClientOptions o;
  o.call_timeout_s = 2;
  DeviceRegistry registry;
  EXPECT_THROW(add_rpc_servers(registry, "127.0.0.1:" + port, o), Error);        // no TLS
  EXPECT_THROW(add_rpc_servers(registry, "tls://127.0.0.1:" + port, o), Error);  // not trusted
}

TEST_F(Tls, ACertificateWithoutItsKeyIsAnError) {
  ServerOptions o;
  o.port = 0;
  o.tls_cert_pem = cert_;
  EXPECT_THROW(Server{o}, Error);
}

}  // namespace
}  // namespace sd::rpc
