#include "io/safetensors.h"

#include <algorithm>
#include <cstring>
#include <optional>
#include <string_view>
#include <unordered_set>

#include <nlohmann/json.hpp>

#include "io/file_error.h"

namespace sd::io {

namespace {

using nlohmann::json;

// The header entry of one tensor as written, before validation.
struct Entry {
  std::string name;
  std::optional<std::string> dtype;
  bool has_shape = false, has_offsets = false;
  std::vector<uint64_t> shape, offsets;
};

// Streams the JSON header into entries without building a DOM: memory stays
// proportional to the tensors, and every misplaced value gets an error naming where it
// is. nlohmann's parser checks the JSON syntax and UTF-8; this checks the schema.
class HeaderSax : public nlohmann::json_sax<json> {
 public:
  std::vector<Entry> entries;
  std::map<std::string, std::string> metadata;
  std::string error;  // set when a callback returns false

  bool null() override { return scalar("null"); }
  bool boolean(bool) override { return scalar("a boolean"); }
  bool number_integer(number_integer_t v) override {
    if (depth_ == 3 && skip_ == 0) {
      return fail(field_desc() + " holds the negative number " + std::to_string(v) +
                  " (corrupt header?)");
    }
    return scalar("a number");
  }
  bool number_unsigned(number_unsigned_t v) override {
    if (depth_ == 3 && skip_ == 0) return array_element(v);
    return scalar("a number");
  }
  bool number_float(number_float_t, const string_t& s) override {
    if (depth_ == 3 && skip_ == 0) {
      return fail(field_desc() + " holds " + s + ", not an integer below 2^64 (corrupt header?)");
    }
    return scalar("a number");
  }
  bool string(string_t& s) override {
    if (skip_ > 0) return true;
    if (depth_ == 2 && in_metadata_) {
      metadata[meta_key_] = s;
      return true;
    }
    if (depth_ == 2 && field_ == Field::Dtype) {
      entries.back().dtype = s;
      return true;
    }
    return scalar("a string");
  }
  bool binary(binary_t&) override { return scalar("binary data"); }

  bool start_object(std::size_t) override {
    if (skip_ > 0) return ++skip_, true;
    switch (depth_) {
      case 0:
        break;
      case 1:
        in_metadata_ = name_ == "__metadata__";
        if (!in_metadata_) {
          entries.emplace_back();
          entries.back().name = name_;
        }
        break;
      case 2:
        if (!in_metadata_ && field_ == Field::Other) return ++skip_, true;
        return misplaced("an object");
      default:
        return misplaced("an object");
    }
    ++depth_;
    return true;
  }
  bool end_object() override {
    if (skip_ > 0) return --skip_, true;
    if (depth_ == 2 && !in_metadata_) {
      const Entry& e = entries.back();
      const char* missing = !e.dtype         ? "dtype"
                            : !e.has_shape   ? "shape"
                            : !e.has_offsets ? "data_offsets"
                                             : nullptr;
      if (missing) {
        return fail("tensor '" + e.name + "' has no \"" + missing +
                    "\" field (corrupt header, or not written by a safetensors tool?)");
      }
    }
    in_metadata_ = false;
    --depth_;
    return true;
  }
  bool start_array(std::size_t) override {
    if (skip_ > 0) return ++skip_, true;
    if (depth_ == 2 && !in_metadata_) {
      if (field_ == Field::Other) return ++skip_, true;
      if (field_ == Field::Shape || field_ == Field::Offsets) {
        ++depth_;
        return true;
      }
    }
    return misplaced("an array");
  }
  bool end_array() override {
    if (skip_ > 0) return --skip_, true;
    --depth_;
    return true;
  }
  bool key(string_t& k) override {
    if (skip_ > 0) return true;
    if (depth_ == 1) {
      if (!names_.insert(k).second) {
        return fail("tensor '" + k + "' appears twice in the header (corrupt file?)");
      }
      name_ = k;
    } else if (depth_ == 2 && in_metadata_) {
      if (metadata.count(k)) {
        return fail("__metadata__ key '" + k + "' appears twice (corrupt header?)");
      }
      meta_key_ = k;
    } else if (depth_ == 2) {
      Entry& e = entries.back();
      bool dup = false;
      if (k == "dtype") {
        field_ = Field::Dtype;
        dup = e.dtype.has_value();
      } else if (k == "shape") {
        field_ = Field::Shape;
        dup = e.has_shape;
        e.has_shape = true;
      } else if (k == "data_offsets") {
        field_ = Field::Offsets;
        dup = e.has_offsets;
        e.has_offsets = true;
      } else {
        field_ = Field::Other;  // unknown fields are ignored, as the reference reader does
      }
      if (dup) return fail("tensor '" + e.name + "' has field '" + k + "' twice (corrupt header?)");
    }
    return true;
  }
  bool parse_error(std::size_t pos, const std::string&,
                   const nlohmann::detail::exception& ex) override {
    std::string what = ex.what();
    // Drop nlohmann's "[json.exception.parse_error.101] " tag: users need the position.
    if (auto p = what.find("] "); what.rfind("[json.exception", 0) == 0 && p != std::string::npos)
      what = what.substr(p + 2);
    // ... and its "last read: '...'" quotes the file's bytes, which may be anything.
    if (auto p = what.find("; last read"); p != std::string::npos) what.resize(p);
    return fail("header is not valid JSON: " + what +
                " (corrupt or truncated file, or not a safetensors file?)");
  }

 private:
  enum class Field { Dtype, Shape, Offsets, Other };

  bool fail(std::string what) {
    if (error.empty()) error = std::move(what);
    return false;
  }

  std::string field_desc() const {
    const std::string& n = entries.back().name;
    return (field_ == Field::Shape ? "shape of tensor '" : "data_offsets of tensor '") + n + "'";
  }

  bool array_element(uint64_t v) {
    Entry& e = entries.back();
    if (field_ == Field::Shape) {
      if (e.shape.size() == kMaxTensorDims + 1) {
        return fail("tensor '" + e.name + "' has more than " + std::to_string(kMaxTensorDims + 1) +
                    " dimensions (this engine supports up to 4, and 3-d convolution kernels)");
      }
      e.shape.push_back(v);
    } else {
      if (e.offsets.size() == 2) {
        return fail("data_offsets of tensor '" + e.name +
                    "' has more than 2 entries (expected [begin, end])");
      }
      e.offsets.push_back(v);
    }
    return true;
  }

  bool scalar(const char* what) {
    if (skip_ > 0) return true;
    if (depth_ == 1 && in_metadata_candidate() && std::strcmp(what, "null") == 0) return true;
    if (depth_ == 2 && !in_metadata_ && field_ == Field::Other) return true;
    return misplaced(what);
  }

  bool in_metadata_candidate() const { return name_ == "__metadata__"; }

  bool misplaced(const std::string& what) {
    switch (depth_) {
      case 0:
        return fail("header is " + what + ", not a JSON object (not a safetensors file?)");
      case 1:
        if (in_metadata_candidate()) {
          return fail("__metadata__ is " + what + ", not an object of strings (corrupt header?)");
        }
        return fail("tensor '" + name_ + "' is " + what +
                    " in the header, not an object (corrupt header?)");
      case 2:
        if (in_metadata_) {
          return fail("__metadata__ value of '" + meta_key_ + "' is " + what +
                      ", not a string (corrupt header?)");
        }
        if (field_ == Field::Dtype) {
          return fail("dtype of tensor '" + entries.back().name + "' is " + what +
                      ", not a string (corrupt header?)");
        }
        return fail(field_desc() + " is " + what + ", not an array (corrupt header?)");
      default:
        return fail(field_desc() + " holds " + what + ", not an integer (corrupt header?)");
    }
  }

  int depth_ = 0;  // containers open outside any skipped value
  int skip_ = 0;   // containers open inside a value of an unknown field
  bool in_metadata_ = false;
  Field field_ = Field::Other;
  std::string name_, meta_key_;
  std::unordered_set<std::string> names_;
};

struct DtypeName {
  std::string_view name;
  DType dtype;
  FileDType file_dtype;
};

constexpr DtypeName kDtypes[] = {
    {"F32", DType::F32, FileDType::None},        {"F16", DType::F16, FileDType::None},
    {"BF16", DType::BF16, FileDType::None},      {"I32", DType::I32, FileDType::None},
    {"F64", DType::F32, FileDType::F64},         {"I64", DType::I32, FileDType::I64},
    {"U64", DType::I32, FileDType::U64},         {"U32", DType::I32, FileDType::U32},
    {"I16", DType::I32, FileDType::I16},         {"U16", DType::I32, FileDType::U16},
    {"I8", DType::I32, FileDType::I8},           {"U8", DType::I32, FileDType::U8},
    {"BOOL", DType::I32, FileDType::Bool},       {"F8_E4M3", DType::F16, FileDType::F8_E4M3},
    {"F8_E5M2", DType::F16, FileDType::F8_E5M2},
};

// Newer safetensors releases define these; name them so the error says "not supported"
// rather than "corrupt".
constexpr std::string_view kKnownUnsupported[] = {"F8_E8M0", "F6_E2M3", "F6_E3M2", "F4", "C64"};

std::string first_bytes_hint(const MappedFile& f) {
  const uint8_t* d = f.data();
  if (f.size() >= 4 && std::memcmp(d, "GGUF", 4) == 0) return "; this is a GGUF file";
  if (f.size() >= 4 && std::memcmp(d, "PK\x03\x04", 4) == 0) {
    return "; this is a zip archive, e.g. a PyTorch .ckpt/.pt file";
  }
  return "; a truncated download, or a file of another kind?";
}

std::string u64s(uint64_t v) {
  return std::to_string(v);
}

TensorInfo validate(const Entry& e, const std::string& path, uint64_t data_offset,
                    uint64_t data_size) {
  TensorInfo t;
  t.name = e.name;
  t.path = path;
  auto quote = "tensor '" + e.name + "'";

  const DtypeName* dt = nullptr;
  for (const auto& d : kDtypes) {
    if (d.name == *e.dtype) dt = &d;
  }
  if (!dt) {
    for (auto n : kKnownUnsupported) {
      if (n == *e.dtype) {
        fail_file(path, quote + " has dtype " + *e.dtype +
                            ", which this engine does not read yet (convert the file to F16 or "
                            "BF16)");
      }
    }
    fail_file(path, quote + " has unknown dtype '" + *e.dtype +
                        "' (corrupt header, or a newer safetensors type?)");
  }
  t.dtype = dt->dtype;
  t.file_dtype = dt->file_dtype;

  // A 3-d convolution's kernel [out, in, t, h, w] becomes [out * in, t, h, w]: the same
  // bytes, out and in folded into one dim (the Wan VAE's causal convolutions).
  std::vector<uint64_t> shape = e.shape;
  if (shape.size() == kMaxTensorDims + 1) {
    if (shape[0] != 0 && shape[1] > UINT64_MAX / shape[0])
      fail_file(path, quote + " has a shape whose element count overflows 64 bits");
    shape[1] *= shape[0];
    shape.erase(shape.begin());
  }
  // safetensors lists shapes slowest-first; the engine's ne[0] is the fastest dim.
  t.n_dims = static_cast<int>(shape.size());
  uint64_t n_elements = 1;
  for (int i = 0; i < t.n_dims; ++i) {
    uint64_t d = shape[static_cast<size_t>(t.n_dims - 1 - i)];
    if (d > static_cast<uint64_t>(INT64_MAX) ||
        __builtin_mul_overflow(n_elements, d, &n_elements) ||
        n_elements > static_cast<uint64_t>(INT64_MAX)) {
      fail_file(path,
                quote + " has a shape whose element count overflows 64 bits (corrupt header?)");
    }
    t.ne[static_cast<size_t>(i)] = static_cast<int64_t>(d);
  }
  size_t elem_size = t.needs_conversion() ? file_dtype_size(t.file_dtype) : type_size(t.dtype);
  uint64_t bytes = 0;
  if (__builtin_mul_overflow(n_elements, static_cast<uint64_t>(elem_size), &bytes)) {
    fail_file(path, quote + " has a shape whose byte size overflows 64 bits (corrupt header?)");
  }

  if (e.offsets.size() != 2) {
    fail_file(path, quote + " has " + std::to_string(e.offsets.size()) +
                        " data_offsets (expected [begin, end]; corrupt header?)");
  }
  uint64_t begin = e.offsets[0], end = e.offsets[1];
  if (begin > end) {
    fail_file(path, quote + " has data_offsets [" + u64s(begin) + ", " + u64s(end) +
                        "] with begin after end (corrupt header?)");
  }
  if (end > data_size) {
    fail_file(path, quote + " ends at byte " + u64s(data_offset + end) +
                        " past the end of the file (" + u64s(data_offset + data_size) +
                        " bytes; truncated download?)");
  }
  if (end - begin != bytes) {
    fail_file(path, quote + " has " + u64s(end - begin) + " bytes in the file but its shape " +
                        shape_string(t) + " of " + std::string(*e.dtype) + " needs " + u64s(bytes) +
                        " (corrupt header?)");
  }
  t.offset = data_offset + begin;
  t.size = bytes;
  return t;
}

}  // namespace

SafetensorsFile SafetensorsFile::open(const std::string& path, MapMode mode) {
  return parse(MappedFile::open(path, mode));
}

SafetensorsFile SafetensorsFile::parse(std::shared_ptr<const MappedFile> file) {
  const std::string& path = file->path();
  const uint64_t file_size = file->size();
  if (file_size < 8) {
    fail_file(path, "file is " + u64s(file_size) +
                        " bytes, too short for a safetensors header (empty or truncated file?)");
  }
  uint64_t header_len;
  std::memcpy(&header_len, file->data(), 8);
  // The first 8 bytes are the header's length. When they make no sense, the file is
  // something else: say so, without quoting its bytes back as a number.
  if (header_len > file_size - 8) {
    fail_file(path,
              "not a safetensors file: its first 8 bytes are not a header length that "
              "fits the file (" +
                  u64s(file_size) + " bytes" + first_bytes_hint(*file) + ")");
  }
  if (header_len > kMaxSafetensorsHeader) {
    fail_file(path,
              "not a safetensors file, or a corrupt one: its header would be larger than "
              "the " +
                  u64s(kMaxSafetensorsHeader >> 20) +
                  " MiB limit (real headers are a few MiB at most)");
  }
  if (header_len < 2) {
    fail_file(path,
              "not a safetensors file, or a corrupt one: its header length is too short for "
              "a JSON object");
  }

  const char* json_begin = reinterpret_cast<const char*>(file->data() + 8);
  // nlohmann's lexer takes NUL for the end of input; JSON text never holds a raw NUL.
  if (std::memchr(json_begin, 0, static_cast<size_t>(header_len)) != nullptr) {
    fail_file(path, "header holds a NUL byte, which JSON text never does (corrupt file?)");
  }
  HeaderSax sax;
  bool ok = false;
  try {
    ok = json::sax_parse(json_begin, json_begin + header_len, &sax,
                         nlohmann::detail::input_format_t::json, /*strict=*/true,
                         /*ignore_comments=*/false);
  } catch (const json::exception& e) {  // the SAX path reports through parse_error; be safe
    fail_file(path, std::string("header is not valid JSON: ") + e.what() + " (corrupt file?)");
  }
  if (!ok) {
    fail_file(path, sax.error.empty() ? std::string("header could not be parsed (corrupt file?)")
                                      : sax.error);
  }

  SafetensorsFile st;
  st.file_ = std::move(file);
  st.data_offset_ = 8 + header_len;
  st.metadata_ = std::move(sax.metadata);
  const uint64_t data_size = file_size - st.data_offset_;
  st.tensors_.reserve(sax.entries.size());
  for (const Entry& e : sax.entries) {
    st.tensors_.push_back(validate(e, path, st.data_offset_, data_size));
  }

  // Overlapping byte ranges mean a corrupt or crafted header; empty tensors own no bytes.
  std::vector<const TensorInfo*> by_offset;
  by_offset.reserve(st.tensors_.size());
  for (const auto& t : st.tensors_) {
    if (t.size > 0) by_offset.push_back(&t);
  }
  std::sort(by_offset.begin(), by_offset.end(),
            [](const TensorInfo* a, const TensorInfo* b) { return a->offset < b->offset; });
  for (size_t i = 1; i < by_offset.size(); ++i) {
    const TensorInfo& a = *by_offset[i - 1];
    const TensorInfo& b = *by_offset[i];
    if (a.offset + a.size > b.offset) {
      fail_file(path, "tensors '" + a.name + "' and '" + b.name +
                          "' overlap in the file (corrupt header?)");
    }
  }

  st.index_.reserve(st.tensors_.size());
  for (size_t i = 0; i < st.tensors_.size(); ++i) st.index_.emplace(st.tensors_[i].name, i);
  return st;
}

const TensorInfo* SafetensorsFile::find(const std::string& name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

}  // namespace sd::io
