// The backend interface, in ggml-backend's nouns: a Device (name, memory, kind,
// capabilities) offers BufferTypes that allocate Buffers, and creates Backends (streams)
// that set/get tensor data and compute graphs. Written so that a GPU or a remote machine
// fits behind it: buffer memory need not be host-addressable and copies may be
// asynchronous until synchronize().
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <string>

#include "tensor/graph.h"
#include "tensor/tensor.h"

namespace sd {

class Backend;
class BufferType;
class Device;

// Software: a GPU API run on the CPU (Mesa's lavapipe); it computes like a GPU but is never
// picked by `auto` or `gpu`.
enum class DeviceKind { Cpu, Gpu, Remote, Software };

struct DeviceMemory {
  size_t free = 0;
  size_t total = 0;
};

struct DeviceCaps {
  bool host_addressable = false;     // kernels can read host memory directly (mmap'd weights)
  bool async_copy = false;           // set/get may return before the copy is done
  bool host_pinned_buffers = false;  // host_buffer_type() gives page-locked memory
  // Convolutions with block-quantized channels-last kernels run on 8-bit integer dot
  // products (ops/conv2d.h; the CPU with AVX-512 VNNI): --quantize-convs pays off here.
  bool int8_convolutions = false;
};

class Buffer {
 public:
  Buffer(BufferType& type, size_t size) : type_(type), size_(size) {}
  virtual ~Buffer() = default;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  BufferType& type() const { return type_; }
  size_t size() const { return size_; }
  // Base address in the device's address space; host-dereferenceable only if is_host().
  virtual void* base() = 0;
  virtual bool is_host() const = 0;

  // Byte ranges of a tensor placed in this buffer, synchronous.
  virtual void set(Tensor& t, const void* data, size_t offset, size_t size) = 0;
  virtual void get(const Tensor& t, void* data, size_t offset, size_t size) const = 0;
  virtual void clear(uint8_t value) = 0;
  // Lets [data, data + size) leave RAM when its bytes can be read back on demand (a
  // read-only file mapping): a backend that keeps its own packed copy of a weight calls
  // this so the model is not held twice. A later read brings the bytes back. Default: no-op.
  virtual void evict(const void* data, size_t size) {}
  // True when the bytes should leave RAM (evict) as soon as the graph being computed has
  // read them for the last time: weights mapped from a file and kept on disk.
  virtual bool evict_after_use() const { return false; }
  // True when the bytes can never change while the buffer lives (a read-only file
  // mapping): a packed copy made from them stays valid without checking them again.
  virtual bool read_only() const { return false; }
  // True when the memory is gone behind our back (a remote server restarted): the owner
  // must make a new buffer and fill it again.
  virtual bool lost() const { return false; }

 private:
  BufferType& type_;
  size_t size_;
};

class BufferType {
 public:
  virtual ~BufferType() = default;
  virtual std::string name() const = 0;
  virtual size_t alignment() const = 0;
  // The largest single allocation; loaders split bigger requests.
  virtual size_t max_size() const { return std::numeric_limits<size_t>::max(); }
  virtual bool is_host() const = 0;
  virtual Device& device() const = 0;
  // Throws sd::Error naming the buffer type and the size when memory is short.
  virtual std::unique_ptr<Buffer> allocate(size_t size) = 0;
};

struct BackendOptions {
  int threads = 0;  // 0: all cores
};

// The compute threads a request for `requested` gets: all of the machine's for 0 or less,
// at most the machine's otherwise (more only contend, and OpenMP fails on absurd counts:
// 100000 crashed it).
int usable_threads(int requested);

// How much of a device's memory the graphs run through one of its backends may take
// (--max-vram): compute buffer and staged weights together. A module whose weights do not
// fit beside its compute buffer runs segment by segment, each segment's weights staged in
// just before it runs (backend/weight_streamer.h).
struct MemoryBudget {
  size_t bytes = 0;       // 0: no budget
  bool prefetch = false;  // --stream-layers: upload the next segment while one computes
};

class Device {
 public:
  virtual ~Device() = default;
  virtual std::string name() const = 0;  // "CPU", "CUDA0", "RPC0"
  virtual std::string description() const = 0;
  virtual DeviceKind kind() const = 0;
  virtual DeviceMemory memory() const = 0;
  virtual DeviceCaps caps() const = 0;
  virtual BufferType& buffer_type() = 0;
  // Optional: page-locked host memory for fast transfers; nullptr when not offered.
  virtual BufferType* host_buffer_type() { return nullptr; }
  virtual std::unique_ptr<Backend> create_backend(const BackendOptions& options) = 0;
  // Whether this device can compute `node` (op, dtypes, layout).
  virtual bool supports_op(const Tensor& node) const = 0;
  // The most device memory this process held on the device at once, in bytes; 0 where the
  // device does not count it (the CPU's is the process's RSS).
  virtual size_t peak_memory_used() const { return 0; }
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual Device& device() = 0;
  virtual void set_threads(int threads) {}
  // Asynchronous where the device allows; the default is synchronous.
  virtual void set_tensor_async(Tensor& t, const void* data, size_t offset, size_t size);
  virtual void get_tensor_async(const Tensor& t, void* data, size_t offset, size_t size);
  // Runs every node of `graph`; all tensors must already have memory. May return before
  // the work is done on async devices. Throws sd::Error on unsupported ops.
  void compute(const Graph& graph) { compute_nodes(graph, 0, graph.nodes.size()); }
  // Runs nodes [first, end) of `graph` only: what earlier nodes computed is read from
  // where they left it. A graph whose weights take turns in device memory runs this way.
  virtual void compute_nodes(const Graph& graph, size_t first, size_t end) = 0;
  virtual void synchronize() {}
  // Later compute() calls stop with an sd::Error once this time has passed (checked
  // between nodes); time_point::max() (the default) never stops them. A server bounds how
  // long one client's graph may hold its devices with it.
  virtual void set_deadline(std::chrono::steady_clock::time_point deadline) { (void)deadline; }
  // Later compute() calls stop with sd::Error "generation cancelled" once `stop` answers true
  // (asked between nodes): a cancel reaches a VAE decode within one node, not one image.
  // Null (the default) never stops them.
  virtual void set_stop(std::function<bool()> stop) { (void)stop; }
  // Frees what the backend keeps between calls for speed (packed weight copies, kernel
  // scratch); later calls rebuild what they need. Called when a phase ends so the next one
  // has the memory.
  virtual void release_caches() {}

  void set_memory_budget(const MemoryBudget& budget) { budget_ = budget; }
  const MemoryBudget& memory_budget() const { return budget_; }

 private:
  MemoryBudget budget_;
};

// Synchronous data transfer of a whole tensor or a byte range of it, bounds-checked.
void tensor_set(Tensor& t, const void* data, size_t offset, size_t size);
void tensor_get(const Tensor& t, void* data, size_t offset, size_t size);
inline void tensor_set(Tensor& t, const void* data) {
  tensor_set(t, data, 0, t.nbytes());
}
inline void tensor_get(const Tensor& t, void* data) {
  tensor_get(t, data, 0, t.nbytes());
}

// Places `t` at `offset` of `buffer` (weights and inputs that are not graph-allocated).
void bind_tensor(Tensor& t, Buffer& buffer, size_t offset);

// Throws an error naming every op of `graph` that `device` cannot compute.
void check_supported(const Device& device, const Graph& graph);

}  // namespace sd
