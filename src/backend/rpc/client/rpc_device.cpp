#include "backend/rpc/client/rpc_device.h"

#include <xxhash.h>

#include "backend/rpc/graph_wire.h"
#include "backend/rpc/protocol.h"
#include "tensor/error.h"

namespace sd::rpc {

namespace {

// Buffer ids become base addresses 64 GiB apart: distinct, never dereferenced.
void* base_token(uint64_t id) {
  return reinterpret_cast<void*>(static_cast<uintptr_t>(id) << 36);
}

// Outputs up to this size come back with the compute reply.
constexpr size_t kOutputsWithReply = size_t{16} << 20;

class RpcBackend final : public Backend {
 public:
  explicit RpcBackend(RpcDevice& device) : device_(device) {}
  Device& device() override { return device_; }

  void compute_nodes(const Graph& graph, size_t first, size_t end) override {
    SD_CHECK(first <= end && end <= graph.nodes.size(),
             "[%s] nodes %zu..%zu are outside a graph of %zu nodes", device_.name().c_str(), first,
             end, graph.nodes.size());
    check_supported(device_, graph);
    const Connection& mine = device_.connection();
    auto locate = [&](const Tensor& t) -> std::pair<uint64_t, uint64_t> {
      auto* b = dynamic_cast<RpcBuffer*>(t.buffer);
      SD_CHECK(b && &b->connection() == &mine,
               "[%s] tensor '%s' is in %s, not on this device; stage it first",
               device_.name().c_str(), t.name.c_str(),
               t.buffer ? t.buffer->type().name().c_str() : "no buffer");
      SD_CHECK(!b->lost(), "[%s] tensor '%s' was on %s before its server restarted; generate again",
               device_.name().c_str(), t.name.c_str(), mine.endpoint().c_str());
      return {b->id(), b->offset_of(t)};
    };
    const wire::GraphDesc desc = describe_graph(graph, locate);
    const std::string bytes = desc.SerializeAsString();
    const uint64_t hash = XXH3_64bits_withSeed(bytes.data(), bytes.size(), device_.index());
    std::vector<wire::Range> reads;
    size_t read_bytes = 0;
    // Outputs this range computes come back with the reply.
    for (size_t i = first; i < end; ++i) {
      const Tensor* t = graph.nodes[i];
      if (!t->has_flag(kFlagOutput) || t->view_src || read_bytes + t->nbytes() > kOutputsWithReply)
        continue;
      auto [buffer, offset] = locate(*t);
      wire::Range r;
      r.set_buffer(buffer);
      r.set_offset(offset);
      r.set_size(t->nbytes());
      reads.push_back(r);
      read_bytes += t->nbytes();
    }
    device_.connection().compute(device_.index(), hash, desc, reads, first, end);
  }

 private:
  RpcDevice& device_;
};

}  // namespace

std::string RpcBufferType::name() const {
  return device_.name();
}
size_t RpcBufferType::alignment() const {
  return std::max<uint64_t>(device_.info().alignment(), 1);
}
size_t RpcBufferType::max_size() const {
  return device_.info().max_alloc() ? device_.info().max_alloc() : BufferType::max_size();
}
Device& RpcBufferType::device() const {
  return device_;
}

std::unique_ptr<Buffer> RpcBufferType::allocate(size_t size) {
  const uint64_t id = device_.connection().alloc(device_.index(), size);
  return std::make_unique<RpcBuffer>(*this, size, device_.shared_connection(), id);
}

RpcBuffer::RpcBuffer(RpcBufferType& type, size_t size, std::shared_ptr<Connection> connection,
                     uint64_t id)
    : Buffer(type, size),
      connection_(std::move(connection)),
      id_(id),
      generation_(connection_->session_generation()),
      base_(base_token(id)) {}

RpcBuffer::~RpcBuffer() {
  if (!lost()) connection_->free(id_);
}

bool RpcBuffer::lost() const {
  return generation_ != connection_->session_generation() || connection_->session_lost();
}

void RpcBuffer::check_alive() const {
  SD_CHECK(!lost(),
           "[%s] the session with %s ended (the server stopped, restarted or dropped the "
           "connection), and this buffer's contents with it; generate again",
           type().name().c_str(), connection_->endpoint().c_str());
}

uint64_t RpcBuffer::offset_of(const Tensor& t) const {
  return static_cast<uint64_t>(static_cast<const uint8_t*>(t.data) -
                               static_cast<const uint8_t*>(base_));
}

void RpcBuffer::set(Tensor& t, const void* data, size_t offset, size_t size) {
  check_alive();
  // Whole weights go by content hash, so a server that has them already is not sent them.
  const bool weight =
      t.has_flag(kFlagParam) && offset == 0 && size == t.nbytes() && size >= kCachedWriteMinBytes;
  connection_->write(id_, offset_of(t) + offset, data, size, weight);
}

void RpcBuffer::get(const Tensor& t, void* data, size_t offset, size_t size) const {
  check_alive();
  connection_->read(id_, offset_of(t) + offset, data, size);
}

void RpcBuffer::clear(uint8_t value) {
  check_alive();
  connection_->clear(id_, value);
}

RpcDevice::RpcDevice(std::string name, std::shared_ptr<Connection> connection, uint32_t index)
    : name_(std::move(name)),
      connection_(std::move(connection)),
      index_(index),
      buffer_type_(*this) {}

std::string RpcDevice::description() const {
  return info().description() + " (" + info().name() + ") on " + connection_->endpoint();
}

DeviceMemory RpcDevice::memory() const {
  try {
    return connection_->memory(index_);
  } catch (const Error&) {
    return {0, info().total()};  // unreachable now: nothing is free there
  }
}

std::unique_ptr<Backend> RpcDevice::create_backend(const BackendOptions&) {
  return std::make_unique<RpcBackend>(*this);
}

bool RpcDevice::supports_op(const Tensor& node) const {
  // The server serves the engine's whole op set (the hello checked that both sides
  // number it alike) and rejects what its device cannot run with a clear error.
  return node.op < Op::Count;
}

std::vector<std::string> add_rpc_servers(DeviceRegistry& registry, const std::string& servers,
                                         const ClientOptions& options) {
  std::vector<std::string> names;
  size_t start = 0;
  while (start <= servers.size()) {
    size_t end = servers.find(',', start);
    if (end == std::string::npos) end = servers.size();
    std::string endpoint = servers.substr(start, end - start);
    while (!endpoint.empty() && endpoint.back() == ' ') endpoint.pop_back();
    while (!endpoint.empty() && endpoint.front() == ' ') endpoint.erase(0, 1);
    start = end + 1;
    if (endpoint.empty()) continue;
    bool known = false;
    for (const auto& d : registry.devices()) {
      auto* rpc = dynamic_cast<RpcDevice*>(d.get());
      if (rpc && rpc->connection().endpoint() == endpoint) {
        names.push_back(rpc->name());
        known = true;
      }
    }
    if (known) continue;
    auto connection = std::make_shared<Connection>(endpoint, options);
    int remote = 0;
    for (const auto& d : registry.devices()) remote += d->kind() == DeviceKind::Remote;
    for (int i = 0; i < connection->welcome().devices_size(); ++i) {
      const std::string name = "RPC" + std::to_string(remote + i);
      registry.add(std::make_unique<RpcDevice>(name, connection, static_cast<uint32_t>(i)));
      names.push_back(name);
    }
  }
  SD_CHECK(!names.empty(), "--rpc-servers '%s' names no server; give host:port,...",
           servers.c_str());
  return names;
}

std::string rpc_traffic_report(const DeviceRegistry& registry) {
  std::string report;
  const Connection* last = nullptr;
  for (const auto& d : registry.found()) {
    auto* rpc = dynamic_cast<RpcDevice*>(d.get());
    if (!rpc || &rpc->connection() == last) continue;
    last = &rpc->connection();
    const TrafficStats s = last->stats();
    report += format(
        "%s: weights %s sent, %s from the server's cache; %s sent, %s received in "
        "all; %llu compute calls (%llu with their graph)\n",
        last->endpoint().c_str(), human_bytes(s.weight_bytes_sent).c_str(),
        human_bytes(s.weight_bytes_cached).c_str(), human_bytes(s.bytes_sent).c_str(),
        human_bytes(s.bytes_received).c_str(), static_cast<unsigned long long>(s.compute_calls),
        static_cast<unsigned long long>(s.graphs_sent));
  }
  return report;
}

}  // namespace sd::rpc
