#include "weights/model_manager.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <mutex>
#include <thread>

#include "tensor/error.h"
#include "weights/conv_kernel_layout.h"
#include "weights/weight_type.h"

namespace sd::weights {
namespace {

// A read-only window onto a mapped weight file: weights alias it without a copy.
class MappedBuffer final : public Buffer {
 public:
  MappedBuffer(BufferType& type, const uint8_t* data, size_t size, std::function<void()> evict,
               bool evict_after_use)
      : Buffer(type, size),
        data_(data),
        evict_(std::move(evict)),
        evict_after_use_(evict_after_use) {}
  void evict(const void*, size_t) override { evict_(); }
  bool evict_after_use() const override { return evict_after_use_; }
  bool read_only() const override { return true; }
  void* base() override { return const_cast<uint8_t*>(data_); }
  bool is_host() const override { return true; }
  void set(Tensor& t, const void*, size_t, size_t) override {
    sd::fail("[weights] '%s' is mapped from its file and read-only", t.name.c_str());
  }
  void get(const Tensor& t, void* data, size_t offset, size_t size) const override {
    std::memcpy(data, static_cast<const uint8_t*>(t.data) + offset, size);
  }
  void clear(uint8_t) override { sd::fail("[weights] a mapped weight buffer is read-only"); }

 private:
  const uint8_t* data_;
  std::function<void()> evict_;  // drops the tensor's pages (ModelLoader::evict)
  bool evict_after_use_;         // kept on disk: the pages leave after each graph's last read
};

std::string shape_text(const Shape& ne) {
  int n = kMaxDims;
  while (n > 1 && ne[n - 1] == 1) --n;
  std::string s = "[";
  for (int d = 0; d < n; ++d) s += (d ? ", " : "") + std::to_string(ne[d]);
  return s + "]";
}

// Whether `compute` can run kernels on `buffer` in place.
bool readable_by(const Buffer& buffer, Device& compute) {
  return &buffer.type().device() == &compute ||
         (buffer.is_host() && compute.caps().host_addressable);
}

}  // namespace

ModelManager::ModelManager(ModelLoader& loader, ModelManagerOptions options)
    : loader_(loader), options_(options) {}

ModelManager::ModelManager(ModelLoader& loader, Device& device, ModelManagerOptions options)
    : ModelManager(loader, options) {
  add_module(ModuleSpec{"all", {""}, &device, {}});
}

ModelManager::~ModelManager() = default;

void ModelManager::add_module(ModuleSpec spec) {
  SD_CHECK(spec.compute, "[weights] module %s has no compute device", spec.name.c_str());
  SD_CHECK((spec.residency.kind != Residency::Kind::Device && !spec.residency.streamed) ||
               spec.residency.device,
           "[weights] module %s keeps its weights on a device but names none", spec.name.c_str());
  SD_CHECK(!find_module(spec.name), "[weights] module %s is registered twice", spec.name.c_str());
  modules_.push_back(Module{std::move(spec), {}, false});
}

ModelManager::Module* ModelManager::find_module(const std::string& name) {
  for (Module& m : modules_)
    if (m.spec.name == name) return &m;
  return nullptr;
}

const ModelManager::Module* ModelManager::owner_of(const std::string& name) const {
  const Module* best = nullptr;
  size_t best_length = 0;
  for (const Module& m : modules_) {
    for (const std::string& p : m.spec.prefixes) {
      if (name.starts_with(p) && (!best || p.size() > best_length)) {
        best = &m;
        best_length = p.size();
      }
    }
  }
  return best;
}

AttentionPrecision ModelManager::attention_precision(const Tensor* projection) {
  // A LoRA added at runtime makes the projection a node (the weight cast, plus products):
  // the weight is the leaf at the end of its first sources.
  const Tensor* weight = projection;
  while (!weight->has_flag(kFlagParam) && weight->src[0]) weight = weight->src[0];
  const Module* owner = owner_of(weight->name);
  if (owner && owner->spec.bf16_attention) return AttentionPrecision::BF16;
  return nn::attention_precision_for(weight);
}

ModelManager::Module& ModelManager::module_of(const std::string& name) {
  const Module* m = owner_of(name);
  SD_CHECK(m, "[weights] tensor '%s' belongs to no registered module", name.c_str());
  return const_cast<Module&>(*m);
}

Device& ModelManager::params_device(const Module& m) const {
  const Residency& r = m.spec.residency;
  const bool elsewhere =
      r.kind == Residency::Kind::Device || (r.kind == Residency::Kind::Disk && r.streamed);
  return elsewhere ? *r.device : *m.spec.compute;
}

void ModelManager::declare(const std::string& module, const std::vector<nn::ParamDecl>& params,
                           const std::string& part, const std::string& fix) {
  Module* m = find_module(module);
  SD_CHECK(m, "[weights] no module named %s", module.c_str());
  std::vector<std::string> problems;
  for (const nn::ParamDecl& p : params) {
    if (p.conv_stride > 0) conv_kernels_[p.name] = p.conv_stride;
    if (!loader_.contains(p.name)) {
      problems.push_back("'" + p.name + "' " + shape_text(p.ne) + " is missing");
      continue;
    }
    const WeightSource& s = loader_.find(p.name);
    if (s.ne != p.ne)
      problems.push_back("'" + p.name + "' is " + shape_text(s.ne) + " in '" + s.file->path() +
                         "', the model expects " + shape_text(p.ne));
  }
  if (!problems.empty()) {
    // One line (the log escapes line breaks): the first problems, then how many more.
    std::string list;
    const size_t shown = std::min<size_t>(problems.size(), 12);
    for (size_t i = 0; i < shown; ++i) list += (i ? "; " : " ") + problems[i];
    if (problems.size() > shown) list += format("; ... and %zu more", problems.size() - shown);
    const std::string what = part.empty() ? "the " + module + " weights" : part;
    const std::string hint =
        fix.empty()
            ? "The file is not a complete model of that type, or a part was not given (e.g. --vae)"
            : fix;
    sd::fail("%s in %s do not fit the detected model (%zu of %zu tensors):%s. %s", what.c_str(),
             loader_.sources().c_str(), problems.size(), params.size(), list.c_str(), hint.c_str());
  }
  m->params = params;
}

ConvKernelLayout ModelManager::kernel_layout(const std::string& name) const {
  constexpr ConvKernelLayout kStandard = ConvKernelLayout::Standard;
  const auto conv = conv_kernels_.find(name);
  if (conv == conv_kernels_.end() || lora_targets_.count(name)) return kStandard;
  const Module* owner = owner_of(name);
  if (!owner || !owner->spec.quantize_convs) return kStandard;
  const WeightSource& s = loader_.find(name);
  // Channels in whole q8_0 blocks; Cin != KW keeps the layouts' shapes apart.
  if (s.n_dims != 4 || !is_float(s.stored) || s.ne[2] % 32 != 0 || s.ne[2] == s.ne[0])
    return kStandard;
  const bool winograd = s.ne[0] == 3 && s.ne[1] == 3 && conv->second == 1;
  return winograd ? ConvKernelLayout::WinogradF2x3 : ConvKernelLayout::ChannelsLast;
}

DType ModelManager::resident_type(const std::string& name) const {
  if (kernel_layout(name) != ConvKernelLayout::Standard) return DType::Q8_0;
  const WeightSource& s = loader_.find(name);
  DType type =
      target_weight_type(name, s.ne[0], s.stored, options_.weight_type, options_.type_rules);
  // Vectors (norm weights, biases) are f32 in sd.cpp's models whatever the file or --type
  // says, and the norm ops take float weights: a q8_0 norm weight, as sd.cpp's convert
  // writes one, is dequantized on load.
  if (s.n_dims == 1 && is_quantized(type)) type = DType::F32;
  return type;
}

bool ModelManager::place(const std::string& name, Device& device, Resident& r) {
  const WeightSource& s = loader_.find(name);
  Tensor& t = r.tensor;
  t.type = resident_type(name);
  r.layout = kernel_layout(name);
  const bool reshaped = r.layout != ConvKernelLayout::Standard;
  t.ne = s.ne;
  if (r.layout == ConvKernelLayout::ChannelsLast) t.ne = Shape{s.ne[2], s.ne[0], s.ne[1], s.ne[3]};
  if (r.layout == ConvKernelLayout::WinogradF2x3) t.ne = Shape{s.ne[2], 4, 4, s.ne[3]};
  t.nb = contiguous_strides(t.type, t.ne);
  t.name = name;
  t.flags = kFlagParam;
  // A weight a LoRA is merged into is a copy: the mapped file stays as it is.
  const uint8_t* mapped = !reshaped && options_.use_mmap && device.caps().host_addressable &&
                                  (!lora_targets_.count(name) || lora_at_runtime(name))
                              ? loader_.mapped(name, t.type)
                              : nullptr;
  if (mapped) {
    const bool on_disk = module_of(name).spec.residency.kind == Residency::Kind::Disk;
    r.buffer = std::make_unique<MappedBuffer>(
        device.buffer_type(), mapped, t.nbytes(), [this, name] { loader_.evict(name); }, on_disk);
    r.mapped = true;
    bind_tensor(t, *r.buffer, 0);
    traffic_.mapped += t.nbytes();
    return false;
  }
  r.buffer = device.buffer_type().allocate(t.nbytes());
  bind_tensor(t, *r.buffer, 0);
  return true;
}

void ModelManager::fill(const std::string& name, Resident& r) {
  if (lora_targets_.count(name) && !lora_at_runtime(name)) return fill_merged(name, r);
  if (r.layout != ConvKernelLayout::Standard) return fill_conv_kernel(name, r);
  Tensor& t = r.tensor;
  if (r.buffer->is_host()) {
    loader_.read(name, t.type, t.data);
  } else if (const uint8_t* stored = options_.use_mmap ? loader_.mapped(name, t.type) : nullptr) {
    // Straight from the mapped file to the device: no copy in between, no fresh pages.
    tensor_set(t, stored);
  } else {
    std::vector<uint8_t> bytes(t.nbytes());
    loader_.read(name, t.type, bytes.data());
    tensor_set(t, bytes.data());
  }
  // The mapped file was only the source of this copy: its pages leave RAM, so converting
  // a model (--type) does not hold it twice.
  loader_.evict(name);
}

void ModelManager::fill_conv_kernel(const std::string& name, Resident& r) {
  const WeightSource& s = loader_.find(name);
  // The stored kernel, from the mapped file where it is usable as stored.
  std::vector<uint8_t> raw;
  const uint8_t* kernel = options_.use_mmap ? loader_.mapped(name, s.stored) : nullptr;
  if (!kernel) {
    raw.resize(tensor_bytes(s.stored, s.ne));
    loader_.read(name, s.stored, raw.data());
    kernel = raw.data();
  }
  Tensor& t = r.tensor;
  std::vector<uint8_t> converted;
  void* dst = r.buffer->is_host() ? t.data : nullptr;
  if (!dst) {
    converted.resize(t.nbytes());
    dst = converted.data();
  }
  quantize_conv_kernel(r.layout, s.stored, kernel, s.ne, dst);
  if (!converted.empty()) tensor_set(t, converted.data());
  loader_.evict(name);  // the file's pages were only the source
}

Tensor* ModelManager::get(Context& ctx, const std::string& name, const Shape& ne) {
  return get_leaf(ctx, name, ne, false);
}

Tensor* ModelManager::get_conv_kernel(Context& ctx, const std::string& name, const Shape& ne,
                                      int stride) {
  conv_kernels_.emplace(name, stride);
  return get_leaf(ctx, name, ne, true);
}

Tensor* ModelManager::get_leaf(Context& ctx, const std::string& name, const Shape& ne,
                               bool conv_kernel) {
  const WeightSource* s = loader_.contains(name) ? &loader_.find(name) : nullptr;
  SD_CHECK(s,
           "tensor '%s' %s is missing from %s; the file is not a complete model of the "
           "detected type (or a part was not given, e.g. --vae)",
           name.c_str(), shape_text(ne).c_str(), loader_.sources().c_str());
  SD_CHECK(s->ne == ne, "tensor '%s' in '%s' is %s, the model expects %s", name.c_str(),
           s->file->path().c_str(), shape_text(s->ne).c_str(), shape_text(ne).c_str());
  Module& m = module_of(name);
  if (m.spec.residency.kind == Residency::Kind::Disk && !m.files_checked) {
    loader_.verify_files();
    m.files_checked = true;
  }
  auto it = resident_.find(name);
  if (it != resident_.end() && it->second.buffer->lost()) {
    // Its device lost the memory (a remote server restarted): read it again.
    resident_.erase(it);
    it = resident_.end();
  }
  if (it == resident_.end() && !m.loaded && !m.params.empty()) {
    // The module's first weight this phase: read all it declared, in parallel.
    load_module(m.spec.name);
    it = resident_.find(name);
  }
  if (it == resident_.end()) {
    Resident r;
    const bool needs_read = place(name, params_device(m), r);
    if (needs_read) {
      fill(name, r);
      traffic_.loaded += r.tensor.nbytes();
    }
    it = resident_.emplace(name, std::move(r)).first;
  }
  const Resident* use = &it->second;
  // Streamed weights stay where they live: the graph runner stages them segment by
  // segment within the device's budget.
  if (!readable_by(*use->buffer, *m.spec.compute) && !m.spec.residency.streamed) {
    auto st = staged_.find(name);
    if (st == staged_.end()) {
      Resident copy;
      copy.tensor = use->tensor;
      copy.buffer = m.spec.compute->buffer_type().allocate(use->tensor.nbytes());
      bind_tensor(copy.tensor, *copy.buffer, 0);
      std::vector<uint8_t> bytes(use->tensor.nbytes());
      tensor_get(use->tensor, bytes.data());
      tensor_set(copy.tensor, bytes.data());
      traffic_.staged += copy.tensor.nbytes();
      st = staged_.emplace(name, std::move(copy)).first;
    }
    use = &st->second;
  }
  // A channels-last kernel has its own shape, which only a convolution reads.
  const bool reshaped = use->layout != ConvKernelLayout::Standard;
  SD_CHECK(conv_kernel || !reshaped,
           "[weights] '%s' is read as a convolution kernel and as a plain tensor; "
           "--quantize-convs holds it in another layout (run without --quantize-convs)",
           name.c_str());
  Tensor* leaf = ctx.new_tensor(use->tensor.type, reshaped ? use->tensor.ne : ne, name);
  leaf->flags |= kFlagParam;
  leaf->buffer = use->tensor.buffer;
  leaf->data = use->tensor.data;
  if (lora_targets_.count(name) && lora_at_runtime(name))
    return add_runtime_loras(ctx, name, leaf, *m.spec.compute);
  return leaf;
}

void ModelManager::after_compute() {
  for (const auto& [name, r] : staged_) traffic_.freed += r.tensor.nbytes();
  staged_.clear();
}

void ModelManager::load_module(const std::string& module,
                               const std::function<void(size_t, size_t)>& progress, bool prefault) {
  Module* m = find_module(module);
  SD_CHECK(m, "[weights] no module named %s", module.c_str());
  m->loaded = true;
  if (m->spec.residency.kind == Residency::Kind::Disk && !m->files_checked) {
    loader_.verify_files();
    m->files_checked = true;
  }
  // Memory first, one tensor after another (allocation is not thread-safe); then the reads,
  // which are the slow part, in parallel.
  std::vector<std::pair<const std::string*, Resident*>> reads;
  size_t done = 0;
  const size_t total = m->params.size();
  for (const nn::ParamDecl& p : m->params) {
    auto it = resident_.find(p.name);
    bool needs_read = false;
    if (it == resident_.end()) {
      Resident r;
      needs_read = place(p.name, params_device(*m), r);
      it = resident_.emplace(p.name, std::move(r)).first;
    }
    if (needs_read || (prefault && it->second.mapped))
      reads.push_back({&it->first, &it->second});
    else
      ++done;
  }
  if (progress) progress(done, total);
  std::atomic<size_t> next{0};
  std::mutex report;
  std::exception_ptr error;
  auto worker = [&] {
    for (size_t i = next++; i < reads.size(); i = next++) {
      try {
        Resident& r = *reads[i].second;
        if (r.mapped) {
          // One byte per page brings the file's pages in.
          const auto* p = static_cast<const volatile uint8_t*>(r.tensor.data);
          uint8_t sum = 0;
          for (size_t b = 0; b < r.tensor.nbytes(); b += 4096) sum ^= p[b];
          (void)sum;
        } else {
          fill(*reads[i].first, r);
        }
      } catch (...) {
        std::lock_guard<std::mutex> lock(report);
        if (!error) error = std::current_exception();
        next = reads.size();
        return;
      }
      std::lock_guard<std::mutex> lock(report);
      if (!reads[i].second->mapped) traffic_.loaded += reads[i].second->tensor.nbytes();
      if (progress) progress(++done, total);
    }
  };
  // A remote device is bound by round trips, not by this machine's cores: more uploads in
  // flight hide the latency.
  const unsigned hw = std::max(1u, std::thread::hardware_concurrency());
  const unsigned by_default = params_device(*m).kind() == DeviceKind::Remote ? 8 : hw;
  const size_t threads = std::min<size_t>(
      reads.size(),
      options_.load_threads > 0 ? static_cast<size_t>(options_.load_threads) : by_default);
  std::vector<std::thread> pool;
  for (size_t i = 1; i < threads; ++i) pool.emplace_back(worker);
  if (threads > 0) worker();
  for (std::thread& t : pool) t.join();
  if (error) {
    // Leave nothing half-read behind: the next use reads those tensors again.
    for (auto& [name, r] : reads) {
      if (r->mapped) continue;
      const std::string key = *name;  // erasing destroys *name
      resident_.erase(key);
    }
    std::rethrow_exception(error);
  }
}

void ModelManager::drop(std::map<std::string, Resident>::iterator it) {
  traffic_.freed += it->second.tensor.nbytes();
  if (it->second.mapped) loader_.evict(it->first);
  resident_.erase(it);
}

void ModelManager::phase_done(const std::string& module) {
  Module* m = find_module(module);
  SD_CHECK(m, "[weights] no module named %s", module.c_str());
  after_compute();
  if (m->spec.residency.kind == Residency::Kind::Disk) {
    m->loaded = false;
    for (auto it = resident_.begin(); it != resident_.end();) {
      auto next = std::next(it);
      if (&module_of(it->first) == m) drop(it);
      it = next;
    }
    m->files_checked = false;
    return;
  }
  // Mapped weights stay mapped, but their pages leave the process until the next phase
  // touches them: the page cache keeps them, so that costs soft page faults, not reads,
  // and the next phase's weights do not sit beside this phase's.
  for (const auto& [name, r] : resident_)
    if (r.mapped && &module_of(name) == m) loader_.evict(name);
  // Weights converted on load (--type, --tensor-type-rules, --quantize-convs) into host RAM
  // are anonymous memory the OS cannot reclaim, unlike mapped file pages: kept, they would
  // sit beside the next phase's weights and its packed copies (the text encoder's during
  // sampling, the diffusion net's during decoding: 0.14 GB of the SD 1.5 peak with
  // --quantize-convs). Converting again costs a fraction of the phase.
  if (!options_.weight_type && options_.type_rules.empty() && !m->spec.quantize_convs) return;
  bool dropped = false;
  for (auto it = resident_.begin(); it != resident_.end();) {
    auto next = std::next(it);
    if (&module_of(it->first) == m && !it->second.mapped && it->second.buffer->is_host()) {
      drop(it);
      dropped = true;
    }
    it = next;
  }
  if (dropped) m->loaded = false;
}

void ModelManager::release(const std::string& prefix) {
  for (auto it = resident_.begin(); it != resident_.end();) {
    auto next = std::next(it);
    if (it->first.starts_with(prefix)) drop(it);
    it = next;
  }
}

size_t ModelManager::resident_bytes() const {
  size_t n = 0;
  for (const auto& [name, r] : resident_)
    if (!r.mapped) n += r.tensor.nbytes();
  return n;
}

size_t ModelManager::mapped_bytes() const {
  size_t n = 0;
  for (const auto& [name, r] : resident_)
    if (r.mapped) n += r.tensor.nbytes();
  return n;
}

}  // namespace sd::weights
