#include "io/gguf.h"

#include <algorithm>
#include <cstring>
#include <string_view>

#include "io/file_error.h"
#include "tensor/error.h"

namespace sd::io {

namespace {

std::string u64s(uint64_t v) {
  return std::to_string(v);
}

// Sequential little-endian reads that check every length against the bytes left first.
class Cursor {
 public:
  Cursor(const MappedFile& f) : d_(f.data()), size_(f.size()), path_(f.path()) {}

  uint64_t pos() const { return pos_; }
  uint64_t remaining() const { return size_ - pos_; }
  const std::string& path() const { return path_; }

  // `what` + `suffix` names the field in the error; joined only when the read fails.
  const uint8_t* take(uint64_t n, const std::string& what, const char* suffix = "") {
    if (n > remaining()) {
      fail_file(path_, what + suffix + " at byte " + u64s(pos_) + " needs " + u64s(n) +
                           " bytes, past the end of the file (" + u64s(size_) +
                           " bytes; truncated download?)");
    }
    const uint8_t* p = d_ + pos_;
    pos_ += n;
    return p;
  }

  template <typename T>
  T read(const std::string& what, const char* suffix = "") {
    T v;
    std::memcpy(&v, take(sizeof(T), what, suffix), sizeof(T));
    return v;
  }

  std::string read_string(const std::string& what) {
    auto len = read<uint64_t>(what, " length");
    const uint8_t* p = take(len, what);
    return std::string(reinterpret_cast<const char*>(p), static_cast<size_t>(len));
  }

 private:
  const uint8_t* d_;
  uint64_t size_;
  uint64_t pos_ = 0;
  const std::string& path_;
};

// Smallest encodings, used to bound counts by the bytes left before allocating.
constexpr uint64_t kMinKvBytes = 8 + 4 + 1;              // key length, type, a u8
constexpr uint64_t kMinTensorInfoBytes = 8 + 4 + 4 + 8;  // name length, n_dims, type, offset

uint64_t min_encoded_size(GgufType t) {
  if (t == GgufType::String) return 8;
  if (t == GgufType::Array) return 4 + 8;
  return gguf_scalar_size(t);
}

void check_bools(const Cursor& c, const uint8_t* p, uint64_t n, const std::string& what) {
  for (uint64_t i = 0; i < n; ++i) {
    if (p[i] > 1) {
      fail_file(c.path(), what + " holds the bool value " + std::to_string(p[i]) +
                              " (only 0 and 1 are valid; corrupt file?)");
    }
  }
}

GgufValue read_value(Cursor& c, GgufType type, const std::string& what, int depth) {
  if (type == GgufType::String) return GgufValue::string(c.read_string(what));
  if (type != GgufType::Array) {
    const uint8_t* p = c.take(gguf_scalar_size(type), what);
    if (type == GgufType::Bool) check_bools(c, p, 1, what);
    return GgufValue::scalar_from_bytes(type, p);
  }
  if (depth >= kGgufMaxArrayDepth) {
    fail_file(c.path(), what + " nests arrays more than " + std::to_string(kGgufMaxArrayDepth) +
                            " deep (corrupt file?)");
  }
  auto elem_id = c.read<uint32_t>(what, " element type");
  auto elem = gguf_type_from_id(elem_id);
  if (!elem) {
    fail_file(c.path(), what + " has unknown element type id " + std::to_string(elem_id) +
                            " (corrupt file, or a newer GGUF version?)");
  }
  auto count = c.read<uint64_t>(what, " element count");
  if (count > c.remaining() / min_encoded_size(*elem)) {
    fail_file(c.path(), what + " claims " + u64s(count) + " " + std::string(gguf_type_name(*elem)) +
                            " elements, more than the " + u64s(c.remaining()) +
                            " bytes left in the file hold (corrupt file?)");
  }
  if (*elem != GgufType::String && *elem != GgufType::Array) {
    const uint8_t* p = c.take(count * gguf_scalar_size(*elem), what);
    if (*elem == GgufType::Bool) check_bools(c, p, count, what);
    return GgufValue::packed_array(*elem, p, static_cast<size_t>(count));
  }
  std::vector<GgufValue> items;
  items.reserve(static_cast<size_t>(count));
  for (uint64_t i = 0; i < count; ++i) items.push_back(read_value(c, *elem, what, depth + 1));
  return GgufValue::array(*elem, std::move(items));
}

// ggml type ids this engine does not compute in, for messages that name them.
std::string_view ggml_type_name(uint32_t id) {
  switch (id) {
    case 9:
      return "q8_1";
    case 16:
      return "iq2_xxs";
    case 17:
      return "iq2_xs";
    case 18:
      return "iq3_xxs";
    case 19:
      return "iq1_s";
    case 20:
      return "iq4_nl";
    case 21:
      return "iq3_s";
    case 22:
      return "iq2_s";
    case 23:
      return "iq4_xs";
    case 29:
      return "iq1_m";
    case 34:
      return "tq1_0";
    case 35:
      return "tq2_0";
    case 39:
      return "mxfp4";
    default:
      return "";
  }
}

// GGUF's plain integer and f64 tensor types load through the same conversions as
// safetensors'.
std::optional<FileDType> gguf_file_dtype(uint32_t id) {
  switch (id) {
    case 24:
      return FileDType::I8;
    case 25:
      return FileDType::I16;
    case 27:
      return FileDType::I64;
    case 28:
      return FileDType::F64;
    default:
      return std::nullopt;
  }
}

TensorInfo read_tensor_info(Cursor& c, uint64_t index) {
  TensorInfo t;
  t.path = c.path();
  t.name = c.read_string("name of tensor " + u64s(index));
  const std::string quote = "tensor '" + t.name + "'";
  auto n_dims = c.read<uint32_t>(quote, " dimension count");
  if (n_dims > kMaxTensorDims) {
    fail_file(c.path(), quote + " has " + std::to_string(n_dims) +
                            " dimensions (this engine supports up to 4; corrupt file?)");
  }
  t.n_dims = static_cast<int>(n_dims);
  uint64_t n_elements = 1;
  for (uint32_t i = 0; i < n_dims; ++i) {
    auto d = c.read<uint64_t>(quote, " shape");
    // A zero dimension is legal (an empty tensor, as ggml allows); negative ones are not.
    if (d > static_cast<uint64_t>(INT64_MAX)) {
      fail_file(c.path(), quote + " has dimension " + std::to_string(i) + " of " + u64s(d) +
                              " (larger than 2^63; corrupt file?)");
    }
    if (__builtin_mul_overflow(n_elements, d, &n_elements) ||
        n_elements > static_cast<uint64_t>(INT64_MAX)) {
      fail_file(c.path(), quote +
                              " has a shape whose element count overflows 64 bits "
                              "(corrupt file?)");
    }
    t.ne[i] = static_cast<int64_t>(d);
  }
  auto type_id = c.read<uint32_t>(quote, " type");
  if (auto dt = dtype_from_gguf_id(type_id)) {
    t.dtype = *dt;
  } else if (auto fdt = gguf_file_dtype(type_id)) {
    t.file_dtype = *fdt;
    t.dtype = engine_dtype_for(*fdt);
  } else if (auto name = ggml_type_name(type_id); !name.empty()) {
    fail_file(c.path(), quote + " has type " + std::string(name) + " (id " +
                            std::to_string(type_id) +
                            "), which this engine does not support yet (re-quantize it to a "
                            "q*_0, q*_1 or q*_K type)");
  } else {
    fail_file(c.path(), quote + " has unknown type id " + std::to_string(type_id) +
                            " (corrupt file, or a newer ggml type?)");
  }

  // Sizes: block types store whole blocks of ne[0].
  uint64_t bytes = 0;
  if (t.needs_conversion()) {
    if (__builtin_mul_overflow(n_elements, static_cast<uint64_t>(file_dtype_size(t.file_dtype)),
                               &bytes)) {
      fail_file(c.path(), quote + " has a byte size that overflows 64 bits (corrupt file?)");
    }
  } else {
    auto bs = static_cast<uint64_t>(block_size(t.dtype));
    if (static_cast<uint64_t>(t.ne[0]) % bs != 0) {
      fail_file(c.path(), quote + " has ne[0] = " + std::to_string(t.ne[0]) +
                              ", not a multiple of " + std::string(dtype_name(t.dtype)) +
                              "'s block size " + u64s(bs) + " (corrupt file?)");
    }
    uint64_t blocks = n_elements / bs;
    if (__builtin_mul_overflow(blocks, static_cast<uint64_t>(type_size(t.dtype)), &bytes)) {
      fail_file(c.path(), quote + " has a byte size that overflows 64 bits (corrupt file?)");
    }
  }
  t.size = bytes;
  t.offset = c.read<uint64_t>(quote, " data offset");  // relative until the section is known
  return t;
}

void check_magic_and_version(Cursor& c, uint32_t& version) {
  char magic[4];
  std::memcpy(magic, c.take(4, "GGUF magic"), 4);
  if (std::memcmp(magic, kGgufMagic, 4) != 0) {
    std::string shown;
    for (char m : magic) shown += (m >= 32 && m < 127) ? m : '?';
    std::string hint = "not a GGUF file";
    if (std::memcmp(magic, "ggjt", 4) == 0 || std::memcmp(magic, "tjgg", 4) == 0 ||
        std::memcmp(magic, "lmgg", 4) == 0 || std::memcmp(magic, "GGML", 4) == 0) {
      hint = "a pre-GGUF ggml file; re-convert it with a current tool";
    } else if (std::memcmp(magic, "PK\x03\x04", 4) == 0) {
      hint = "a zip archive, e.g. a PyTorch .ckpt/.pt file";
    }
    fail_file(c.path(), "bad magic '" + shown + "', expected 'GGUF' (" + hint + ")");
  }
  version = c.read<uint32_t>("GGUF version");
  if (version == 2 || version == 3) return;
  if (version == 1) {
    fail_file(c.path(),
              "GGUF version 1 is not supported (re-convert the file with a current "
              "tool to GGUF v3)");
  }
  if ((version & 0xffff) == 0 && version != 0) {
    fail_file(c.path(), "is a big-endian GGUF file (version field " + std::to_string(version) +
                            "), which this reader does not support (use a little-endian file)");
  }
  fail_file(c.path(), "unsupported GGUF version " + std::to_string(version) +
                          " (this reader knows versions 2 and 3; corrupt or newer file?)");
}

}  // namespace

GgufFile GgufFile::open(const std::string& path, MapMode mode) {
  return parse(MappedFile::open(path, mode));
}

GgufFile GgufFile::parse(std::shared_ptr<const MappedFile> file) {
  GgufFile g;
  g.file_ = std::move(file);
  const std::string& path = g.file_->path();
  Cursor c(*g.file_);
  check_magic_and_version(c, g.version_);

  auto n_tensors = c.read<uint64_t>("tensor count");
  auto n_kv = c.read<uint64_t>("metadata count");
  if (n_tensors > c.remaining() / kMinTensorInfoBytes) {
    fail_file(path, "header claims " + u64s(n_tensors) + " tensors, more than the " +
                        u64s(c.remaining()) +
                        " bytes left in the file can describe (corrupt file?)");
  }
  if (n_kv > c.remaining() / kMinKvBytes) {
    fail_file(path, "header claims " + u64s(n_kv) + " metadata entries, more than the " +
                        u64s(c.remaining()) + " bytes left in the file can hold (corrupt file?)");
  }

  g.metadata_.reserve(static_cast<size_t>(n_kv));
  g.key_index_.reserve(static_cast<size_t>(n_kv));
  for (uint64_t i = 0; i < n_kv; ++i) {
    std::string key = c.read_string("key of metadata entry " + u64s(i));
    const std::string what = "metadata '" + key + "'";
    auto type_id = c.read<uint32_t>(what, " type");
    auto type = gguf_type_from_id(type_id);
    if (!type) {
      fail_file(path, what + " has unknown value type id " + std::to_string(type_id) +
                          " (corrupt file, or a newer GGUF version?)");
    }
    GgufValue v = read_value(c, *type, what, 0);
    if (!g.key_index_.emplace(key, g.metadata_.size()).second) {
      fail_file(path, what + " appears twice (corrupt file?)");
    }
    g.metadata_.emplace_back(std::move(key), std::move(v));
  }

  if (const GgufValue* a = g.find_value("general.alignment")) {
    if (!a->is_integer()) {
      fail_file(path, "metadata 'general.alignment' is a " +
                          std::string(gguf_type_name(a->type())) +
                          ", not an integer (corrupt file?)");
    }
    uint64_t v = 0;
    try {
      v = a->as_u64();
    } catch (const Error&) {  // negative: refused just below
    }
    if (v == 0 || v > (1u << 31) || (v & (v - 1)) != 0) {
      fail_file(path, "metadata 'general.alignment' is " + a->to_string() +
                          ", not a positive power of two (corrupt file?)");
    }
    g.alignment_ = static_cast<uint32_t>(v);
  }

  if (n_tensors > c.remaining() / kMinTensorInfoBytes) {
    fail_file(path, "header claims " + u64s(n_tensors) + " tensors, more than the " +
                        u64s(c.remaining()) +
                        " bytes left after the metadata can describe "
                        "(corrupt file?)");
  }
  g.tensors_.reserve(static_cast<size_t>(n_tensors));
  g.tensor_index_.reserve(static_cast<size_t>(n_tensors));
  for (uint64_t i = 0; i < n_tensors; ++i) {
    TensorInfo t = read_tensor_info(c, i);
    if (!g.tensor_index_.emplace(t.name, g.tensors_.size()).second) {
      fail_file(path, "tensor '" + t.name + "' appears twice (corrupt file?)");
    }
    g.tensors_.push_back(std::move(t));
  }

  const uint64_t file_size = g.file_->size();
  const uint64_t align = g.alignment_;
  g.data_offset_ = (c.pos() + align - 1) / align * align;
  const uint64_t data_size = g.data_offset_ <= file_size ? file_size - g.data_offset_ : 0;
  for (TensorInfo& t : g.tensors_) {
    const std::string quote = "tensor '" + t.name + "'";
    if (t.offset % align != 0) {
      fail_file(path, quote + " data offset " + u64s(t.offset) + " is not a multiple of the " +
                          u64s(align) + "-byte alignment (corrupt file?)");
    }
    if (t.offset > data_size || t.size > data_size - t.offset) {
      uint64_t end = 0;
      bool overflow = __builtin_add_overflow(g.data_offset_, t.offset, &end) ||
                      __builtin_add_overflow(end, t.size, &end);
      fail_file(path, quote + " ends at byte " +
                          (overflow ? std::string("beyond 2^64") : u64s(end)) +
                          " past the end of the file (" + u64s(file_size) +
                          " bytes; truncated download?)");
    }
    t.offset += g.data_offset_;
  }

  std::vector<const TensorInfo*> by_offset;
  by_offset.reserve(g.tensors_.size());
  for (const TensorInfo& t : g.tensors_)
    if (t.size > 0) by_offset.push_back(&t);  // empty tensors own no bytes
  std::sort(by_offset.begin(), by_offset.end(),
            [](const TensorInfo* a, const TensorInfo* b) { return a->offset < b->offset; });
  for (size_t i = 1; i < by_offset.size(); ++i) {
    const TensorInfo& a = *by_offset[i - 1];
    const TensorInfo& b = *by_offset[i];
    if (a.offset + a.size > b.offset) {
      fail_file(path, "tensors '" + a.name + "' and '" + b.name +
                          "' overlap in the file (corrupt file?)");
    }
  }
  return g;
}

const GgufValue* GgufFile::find_value(const std::string& key) const {
  auto it = key_index_.find(key);
  return it == key_index_.end() ? nullptr : &metadata_[it->second].second;
}

const GgufValue& GgufFile::value(const std::string& key) const {
  const GgufValue* v = find_value(key);
  if (!v) fail_file(path(), "metadata '" + key + "' is missing (not a file of the expected kind?)");
  return *v;
}

namespace {

template <typename F>
auto typed_get(const GgufFile& g, const std::string& key, F&& get) {
  const GgufValue& v = g.value(key);
  try {
    return get(v);
  } catch (const Error& e) {
    std::string what = e.what();
    if (what.rfind("[gguf] ", 0) == 0) what = what.substr(7);
    fail_file(g.path(), "metadata '" + key + "': " + what);
  }
}

}  // namespace

std::string GgufFile::get_string(const std::string& key) const {
  return typed_get(*this, key, [](const GgufValue& v) { return v.as_string(); });
}
uint64_t GgufFile::get_u64(const std::string& key) const {
  return typed_get(*this, key, [](const GgufValue& v) { return v.as_u64(); });
}
int64_t GgufFile::get_i64(const std::string& key) const {
  return typed_get(*this, key, [](const GgufValue& v) { return v.as_i64(); });
}
double GgufFile::get_f64(const std::string& key) const {
  return typed_get(*this, key, [](const GgufValue& v) { return v.as_f64(); });
}
bool GgufFile::get_bool(const std::string& key) const {
  return typed_get(*this, key, [](const GgufValue& v) { return v.as_bool(); });
}

const TensorInfo* GgufFile::find(const std::string& name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

}  // namespace sd::io
