// Helpers for the io tests: a temp dir, whole-file read/write, and byte builders for
// hand-made safetensors and GGUF files (independent of the writers under test).
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "tensor/error.h"

namespace sd::io::test {

using Bytes = std::vector<uint8_t>;

class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "sd_io_test_XXXXXX").string();
    char* p = ::mkdtemp(tmpl.data());
    if (!p) throw std::runtime_error("mkdtemp failed");
    path_ = p;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  std::string file(const std::string& name) const { return (path_ / name).string(); }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

inline void write_file(const std::string& path, const Bytes& b) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
  if (!f) throw std::runtime_error("cannot write " + path);
}

inline Bytes read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return Bytes(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

inline Bytes random_bytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  Bytes b(n);
  for (auto& x : b) x = static_cast<uint8_t>(rng());
  return b;
}

// Little-endian appends, for hand-built GGUF bytes.
struct ByteWriter {
  Bytes b;
  template <typename T>
  ByteWriter& put(T v) {
    const auto* p = reinterpret_cast<const uint8_t*>(&v);
    b.insert(b.end(), p, p + sizeof(T));
    return *this;
  }
  ByteWriter& raw(const void* p, size_t n) {
    const auto* c = static_cast<const uint8_t*>(p);
    b.insert(b.end(), c, c + n);
    return *this;
  }
  ByteWriter& str(const std::string& s) {
    put<uint64_t>(s.size());
    return raw(s.data(), s.size());
  }
  ByteWriter& pad_to(size_t alignment) {
    while (b.size() % alignment != 0) b.push_back(0);
    return *this;
  }
};

// A safetensors file from a header text and data section, exactly as given.
inline Bytes safetensors_bytes(const std::string& header, const Bytes& data) {
  ByteWriter w;
  w.put<uint64_t>(header.size()).raw(header.data(), header.size()).raw(data.data(), data.size());
  return w.b;
}

// Builds a valid safetensors file tensor by tensor; shapes are given slowest-first, as
// the format stores them.
class SafetensorsBuilder {
 public:
  SafetensorsBuilder& metadata(const std::string& key, const std::string& value) {
    if (!meta_.empty()) meta_ += ',';
    meta_ += quote(key);
    meta_ += ':';
    meta_ += quote(value);
    return *this;
  }
  SafetensorsBuilder& add(const std::string& name, const std::string& dtype,
                          const std::vector<uint64_t>& shape, const Bytes& bytes) {
    std::string s = "[";
    for (size_t i = 0; i < shape.size(); ++i) {
      if (i) s += ',';
      s += std::to_string(shape[i]);
    }
    s += ']';
    uint64_t begin = data_.size();
    data_.insert(data_.end(), bytes.begin(), bytes.end());
    if (!entries_.empty()) entries_ += ',';
    entries_ += quote(name);
    entries_ += ":{\"dtype\":";
    entries_ += quote(dtype);
    entries_ += ",\"shape\":";
    entries_ += s;
    entries_ += ",\"data_offsets\":[";
    entries_ += std::to_string(begin);
    entries_ += ',';
    entries_ += std::to_string(data_.size());
    entries_ += "]}";
    return *this;
  }
  std::string header() const {
    std::string h = "{";
    if (!meta_.empty()) h += "\"__metadata__\":{" + meta_ + "}" + (entries_.empty() ? "" : ",");
    h += entries_ + "}";
    // Pad to 8 bytes with spaces, as the reference writer does.
    while ((h.size() + 8) % 8 != 0) h += ' ';
    return h;
  }
  Bytes bytes() const { return safetensors_bytes(header(), data_); }
  const Bytes& data() const { return data_; }

 private:
  static std::string quote(const std::string& s) {
    std::string q(1, '"');
    q += s;
    q += '"';
    return q;
  }
  std::string meta_, entries_;
  Bytes data_;
};

// Builds GGUF bytes field by field, so tests can write exactly the (in)valid file they
// mean; counts can be overridden to lie.
struct GgufTensorSpec {
  std::string name;
  std::vector<uint64_t> dims;
  uint32_t type;
  uint64_t offset;  // from the data section start
};

class GgufBuilder {
 public:
  uint32_t version = 3;
  uint32_t alignment = 32;  // used for padding only; add the KV to change the file's
  std::optional<uint64_t> n_tensors, n_kv;
  std::vector<GgufTensorSpec> tensors;
  Bytes data;

  GgufBuilder& kv(const std::string& key, uint32_t type, const Bytes& payload) {
    kvs_.str(key).put<uint32_t>(type).raw(payload.data(), payload.size());
    ++kv_count_;
    return *this;
  }
  template <typename T>
  GgufBuilder& kv_scalar(const std::string& key, uint32_t type, T v) {
    ByteWriter w;
    w.put<T>(v);
    return kv(key, type, w.b);
  }
  GgufBuilder& kv_string(const std::string& key, const std::string& v) {
    ByteWriter w;
    w.str(v);
    return kv(key, 8, w.b);
  }
  // Appends a tensor whose data follows the previous one (aligned) in `data`.
  GgufBuilder& tensor(const std::string& name, std::vector<uint64_t> dims, uint32_t type,
                      const Bytes& bytes) {
    while (data.size() % alignment != 0) data.push_back(0);
    tensors.push_back({name, std::move(dims), type, data.size()});
    data.insert(data.end(), bytes.begin(), bytes.end());
    return *this;
  }

  Bytes header() const {
    ByteWriter w;
    w.raw("GGUF", 4).put<uint32_t>(version);
    w.put<uint64_t>(n_tensors.value_or(tensors.size())).put<uint64_t>(n_kv.value_or(kv_count_));
    w.raw(kvs_.b.data(), kvs_.b.size());
    for (const auto& t : tensors) {
      w.str(t.name).put<uint32_t>(static_cast<uint32_t>(t.dims.size()));
      for (uint64_t d : t.dims) w.put<uint64_t>(d);
      w.put<uint32_t>(t.type).put<uint64_t>(t.offset);
    }
    return w.b;
  }
  Bytes bytes() const {
    ByteWriter w;
    w.b = header();
    if (!tensors.empty() || !data.empty()) w.pad_to(alignment);
    return w.raw(data.data(), data.size()).b;
  }

 private:
  ByteWriter kvs_;
  uint64_t kv_count_ = 0;
};

// Expects `f` to throw sd::Error whose message contains every one of `parts`.
template <typename F>
void expect_error(F&& f, const std::vector<std::string>& parts) {
  try {
    f();
    ADD_FAILURE() << "expected sd::Error containing '" << (parts.empty() ? "" : parts[0]) << "'";
  } catch (const Error& e) {
    std::string msg = e.what();
    for (const auto& p : parts) {
      EXPECT_NE(msg.find(p), std::string::npos) << "message: " << msg << "\nmissing: " << p;
    }
  }
}

}  // namespace sd::io::test
