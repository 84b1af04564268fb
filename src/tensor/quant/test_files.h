// TEST USE ONLY: minimal safetensors and GGUF v3 readers for the quantizer tests, which
// compare against reference files in ../shared/golden/quant. They read whole files into
// memory, trust their input beyond basic bounds checks and report problems by throwing
// std::runtime_error. The real, validating readers belong in src/io; do not use these
// outside tests.
#pragma once

#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

namespace sd::test_files {

inline std::vector<uint8_t> read_all(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw std::runtime_error("cannot open " + path);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

struct TestTensor {
  std::string dtype;          // safetensors dtype ("F32") or GGUF type name ("q4_K")
  uint32_t gguf_type = 0;     // GGUF only
  std::vector<int64_t> ne;    // fastest-first, as GGUF lists it (safetensors shape reversed)
  std::vector<uint8_t> data;  // the tensor's bytes
};

// ---------------------------------------------------------------------------------------
// safetensors: u64 header length, a JSON object {name: {dtype, shape, data_offsets}},
// then the data. The JSON parser below handles exactly the subset the format uses.

namespace detail {

class Json {
 public:
  explicit Json(const std::string& s) : s_(s) {}

  // Calls on_entry(name) for each key of a top-level object, with the parser positioned at
  // the value; on_entry must consume the value.
  template <typename F>
  void object(F&& on_entry) {
    expect('{');
    skip_ws();
    if (peek() == '}') {
      ++pos_;
      return;
    }
    while (true) {
      std::string key = string();
      expect(':');
      on_entry(key);
      skip_ws();
      if (peek() == ',') {
        ++pos_;
        continue;
      }
      expect('}');
      return;
    }
  }

  std::string string() {
    expect('"');
    std::string out;
    while (pos_ < s_.size() && s_[pos_] != '"') {
      if (s_[pos_] == '\\') ++pos_;  // names in test files carry no escapes but \" and \\.
      out += s_[pos_++];
    }
    expect('"');
    return out;
  }

  int64_t integer() {
    skip_ws();
    size_t used = 0;
    const int64_t v = std::stoll(s_.substr(pos_, 32), &used);
    pos_ += used;
    return v;
  }

  std::vector<int64_t> int_array() {
    std::vector<int64_t> out;
    expect('[');
    skip_ws();
    if (peek() == ']') {
      ++pos_;
      return out;
    }
    while (true) {
      out.push_back(integer());
      skip_ws();
      if (peek() == ',') {
        ++pos_;
        continue;
      }
      expect(']');
      return out;
    }
  }

  // Skips any JSON value (used for __metadata__).
  void skip_value() {
    skip_ws();
    const char c = peek();
    if (c == '"') {
      string();
    } else if (c == '{') {
      object([this](const std::string&) { skip_value(); });
    } else if (c == '[') {
      ++pos_;
      skip_ws();
      if (peek() == ']') {
        ++pos_;
        return;
      }
      while (true) {
        skip_value();
        skip_ws();
        if (peek() == ',') {
          ++pos_;
          continue;
        }
        expect(']');
        return;
      }
    } else {
      // number, true, false or null
      while (pos_ < s_.size() && !is_space(s_[pos_]) && s_[pos_] != ',' && s_[pos_] != '}' &&
             s_[pos_] != ']') {
        ++pos_;
      }
    }
  }

 private:
  char peek() const { return pos_ < s_.size() ? s_[pos_] : '\0'; }
  static bool is_space(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }
  void skip_ws() {
    while (pos_ < s_.size() && is_space(s_[pos_])) ++pos_;
  }
  void expect(char c) {
    skip_ws();
    if (peek() != c) throw std::runtime_error(std::string("safetensors header: expected ") + c);
    ++pos_;
  }

  const std::string& s_;
  size_t pos_ = 0;
};

template <typename T>
T read_le(const std::vector<uint8_t>& b, size_t& pos) {
  if (pos + sizeof(T) > b.size()) throw std::runtime_error("file truncated");
  T v;
  std::memcpy(&v, b.data() + pos, sizeof(T));  // x86: files and host are little-endian
  pos += sizeof(T);
  return v;
}

inline std::string read_gguf_string(const std::vector<uint8_t>& b, size_t& pos) {
  const uint64_t n = read_le<uint64_t>(b, pos);
  if (n > b.size() - pos) throw std::runtime_error("gguf string runs past the end");
  std::string s(reinterpret_cast<const char*>(b.data() + pos), n);
  pos += n;
  return s;
}

// Skips one GGUF metadata value of `type`; returns its value when it is an integer that
// fits (for general.alignment), else 0.
inline uint64_t skip_gguf_value(const std::vector<uint8_t>& b, size_t& pos, uint32_t type) {
  switch (type) {
    case 0:  // u8
    case 1:  // i8
    case 7:  // bool
      return read_le<uint8_t>(b, pos);
    case 2:  // u16
    case 3:  // i16
      return read_le<uint16_t>(b, pos);
    case 4:  // u32
    case 5:  // i32
      return read_le<uint32_t>(b, pos);
    case 6:  // f32
      read_le<uint32_t>(b, pos);
      return 0;
    case 8:  // string
      read_gguf_string(b, pos);
      return 0;
    case 9: {  // array: element type, count, elements
      const uint32_t elem = read_le<uint32_t>(b, pos);
      const uint64_t n = read_le<uint64_t>(b, pos);
      for (uint64_t i = 0; i < n; ++i) skip_gguf_value(b, pos, elem);
      return 0;
    }
    case 10:  // u64
    case 11:  // i64
      return read_le<uint64_t>(b, pos);
    case 12:  // f64
      read_le<uint64_t>(b, pos);
      return 0;
    default:
      throw std::runtime_error("gguf: unknown metadata value type " + std::to_string(type));
  }
}

}  // namespace detail

inline std::map<std::string, TestTensor> read_safetensors(const std::string& path) {
  const std::vector<uint8_t> file = read_all(path);
  size_t pos = 0;
  const uint64_t header_len = detail::read_le<uint64_t>(file, pos);
  if (header_len > file.size() - 8) throw std::runtime_error(path + ": header past the end");
  const std::string header(reinterpret_cast<const char*>(file.data() + 8), header_len);
  const size_t data_start = 8 + header_len;

  std::map<std::string, TestTensor> out;
  detail::Json json(header);
  json.object([&](const std::string& name) {
    if (name == "__metadata__") {
      json.skip_value();
      return;
    }
    TestTensor t;
    std::vector<int64_t> shape;
    int64_t begin = -1, end = -1;
    json.object([&](const std::string& field) {
      if (field == "dtype") {
        t.dtype = json.string();
      } else if (field == "shape") {
        shape = json.int_array();
      } else if (field == "data_offsets") {
        const std::vector<int64_t> offsets = json.int_array();
        if (offsets.size() != 2) throw std::runtime_error(name + ": bad data_offsets");
        begin = offsets[0];
        end = offsets[1];
      } else {
        json.skip_value();
      }
    });
    if (begin < 0 || end < begin || data_start + static_cast<size_t>(end) > file.size()) {
      throw std::runtime_error(path + ": tensor " + name + " has bad offsets");
    }
    t.ne.assign(shape.rbegin(), shape.rend());
    t.data.assign(file.begin() + static_cast<ptrdiff_t>(data_start + begin),
                  file.begin() + static_cast<ptrdiff_t>(data_start + end));
    out.emplace(name, std::move(t));
  });
  return out;
}

// ---------------------------------------------------------------------------------------
// GGUF v3: magic "GGUF", u32 version, u64 tensor count, u64 metadata count, the metadata
// key/value pairs, the tensor infos (name, u32 n_dims, u64 ne[n_dims], u32 type, u64
// offset), padding to general.alignment (default 32), then the data. `bytes_of(type, ne)`
// gives a tensor's size, which the file does not store.

template <typename BytesOf>
std::map<std::string, TestTensor> read_gguf(const std::string& path, BytesOf&& bytes_of) {
  const std::vector<uint8_t> file = read_all(path);
  size_t pos = 0;
  if (file.size() < 4 || std::memcmp(file.data(), "GGUF", 4) != 0) {
    throw std::runtime_error(path + ": not a GGUF file");
  }
  pos = 4;
  const uint32_t version = detail::read_le<uint32_t>(file, pos);
  if (version != 3) throw std::runtime_error(path + ": GGUF version is not 3");
  const uint64_t n_tensors = detail::read_le<uint64_t>(file, pos);
  const uint64_t n_kv = detail::read_le<uint64_t>(file, pos);

  uint64_t alignment = 32;
  for (uint64_t i = 0; i < n_kv; ++i) {
    const std::string key = detail::read_gguf_string(file, pos);
    const uint32_t type = detail::read_le<uint32_t>(file, pos);
    const uint64_t value = detail::skip_gguf_value(file, pos, type);
    if (key == "general.alignment") alignment = value;
  }
  if (alignment == 0) throw std::runtime_error(path + ": zero alignment");

  struct Info {
    std::string name;
    TestTensor tensor;
    uint64_t offset;
  };
  std::vector<Info> infos;
  for (uint64_t i = 0; i < n_tensors; ++i) {
    Info info;
    info.name = detail::read_gguf_string(file, pos);
    const uint32_t n_dims = detail::read_le<uint32_t>(file, pos);
    if (n_dims > 8) throw std::runtime_error(path + ": too many dimensions");
    for (uint32_t d = 0; d < n_dims; ++d) {
      info.tensor.ne.push_back(static_cast<int64_t>(detail::read_le<uint64_t>(file, pos)));
    }
    info.tensor.gguf_type = detail::read_le<uint32_t>(file, pos);
    info.offset = detail::read_le<uint64_t>(file, pos);
    infos.push_back(std::move(info));
  }
  const size_t data_start = (pos + alignment - 1) / alignment * alignment;

  std::map<std::string, TestTensor> out;
  for (Info& info : infos) {
    const size_t bytes = bytes_of(info.tensor.gguf_type, info.tensor.ne);
    const size_t begin = data_start + info.offset;
    if (begin > file.size() || bytes > file.size() - begin) {
      throw std::runtime_error(path + ": tensor " + info.name + " ends past the end");
    }
    info.tensor.data.assign(file.begin() + static_cast<ptrdiff_t>(begin),
                            file.begin() + static_cast<ptrdiff_t>(begin + bytes));
    out.emplace(info.name, std::move(info.tensor));
  }
  return out;
}

}  // namespace sd::test_files
