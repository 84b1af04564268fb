// Remote devices: each device an sd-rpc-server offers becomes RPC0, RPC1, ... here. Its
// buffers live on the server (their base addresses are tokens, never dereferenced), and
// its backend sends graphs there: once whole, then by hash with only the new inputs.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/registry.h"
#include "backend/rpc/client/connection.h"

namespace sd::rpc {

class RpcDevice;

class RpcBufferType final : public BufferType {
 public:
  explicit RpcBufferType(RpcDevice& device) : device_(device) {}
  std::string name() const override;
  size_t alignment() const override;
  size_t max_size() const override;
  bool is_host() const override { return false; }
  Device& device() const override;
  std::unique_ptr<Buffer> allocate(size_t size) override;

 private:
  RpcDevice& device_;
};

class RpcBuffer final : public Buffer {
 public:
  RpcBuffer(RpcBufferType& type, size_t size, std::shared_ptr<Connection> connection, uint64_t id);
  ~RpcBuffer() override;
  void* base() override { return base_; }
  bool is_host() const override { return false; }
  void set(Tensor& t, const void* data, size_t offset, size_t size) override;
  void get(const Tensor& t, void* data, size_t offset, size_t size) const override;
  void clear(uint8_t value) override;
  bool lost() const override;

  uint64_t id() const { return id_; }
  const Connection& connection() const { return *connection_; }
  // Offset of a tensor's first byte in this buffer.
  uint64_t offset_of(const Tensor& t) const;

 private:
  void check_alive() const;

  std::shared_ptr<Connection> connection_;
  uint64_t id_;
  uint64_t generation_;
  void* base_;
};

class RpcDevice final : public Device {
 public:
  RpcDevice(std::string name, std::shared_ptr<Connection> connection, uint32_t index);
  std::string name() const override { return name_; }
  // "CPU (16 cores) on 10.0.0.2:50052"
  std::string description() const override;
  DeviceKind kind() const override { return DeviceKind::Remote; }
  DeviceMemory memory() const override;
  DeviceCaps caps() const override { return {}; }
  BufferType& buffer_type() override { return buffer_type_; }
  std::unique_ptr<Backend> create_backend(const BackendOptions& options) override;
  bool supports_op(const Tensor& node) const override;

  Connection& connection() const { return *connection_; }
  const std::shared_ptr<Connection>& shared_connection() const { return connection_; }
  uint32_t index() const { return index_; }
  const wire::DeviceInfo& info() const { return connection_->welcome().devices(index_); }

 private:
  std::string name_;
  std::shared_ptr<Connection> connection_;
  uint32_t index_;
  RpcBufferType buffer_type_;
};

// Connects to every server of a --rpc-servers list ("host:port,...") not connected yet and
// adds its devices to `registry` as RPCn, continuing the numbering. Returns the names of
// the list's devices in order. Throws naming the first server that cannot be used.
std::vector<std::string> add_rpc_servers(DeviceRegistry& registry, const std::string& servers,
                                         const ClientOptions& options);

// Sums the traffic of every RPC device's connection in `registry`, one line per server,
// for the log; empty without RPC devices.
std::string rpc_traffic_report(const DeviceRegistry& registry);

}  // namespace sd::rpc
