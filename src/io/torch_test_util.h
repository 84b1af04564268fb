// Byte builders for hand-made PyTorch checkpoints: a pickle writer that emits the opcodes
// torch.save (pickle protocol 2) does, a zip writer (stored entries, or deflated ones as
// re-zipping tools write them), and the legacy layout.
// Independent of the reader under test; written from CPython's pickletools opcode list and
// PKWARE's APPNOTE.
#pragma once

#include <zlib.h>

#include <cstdint>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "io/io_test_util.h"

namespace sd::io::test {

class PickleWriter {
 public:
  Bytes b;

  PickleWriter& op(uint8_t o) {
    b.push_back(o);
    return *this;
  }
  PickleWriter& proto(uint8_t v = 2) { return op(0x80).op(v); }
  PickleWriter& stop() { return op('.'); }
  PickleWriter& mark() { return op('('); }
  PickleWriter& none() { return op('N'); }
  PickleWriter& boolean(bool v) { return op(v ? 0x88 : 0x89); }
  PickleWriter& integer(int64_t v) {
    if (v >= 0 && v < 256) return op('K').op(static_cast<uint8_t>(v));
    if (v >= 0 && v < 65536) return op('M').le(static_cast<uint16_t>(v));
    if (v >= INT32_MIN && v <= INT32_MAX) return op('J').le(static_cast<int32_t>(v));
    return op(0x8a).op(8).le(v);
  }
  PickleWriter& str(const std::string& s) {
    op('X').le(static_cast<uint32_t>(s.size()));
    b.insert(b.end(), s.begin(), s.end());
    return *this;
  }
  PickleWriter& global(const std::string& module, const std::string& name) {
    op('c');
    b.insert(b.end(), module.begin(), module.end());
    b.push_back('\n');
    b.insert(b.end(), name.begin(), name.end());
    b.push_back('\n');
    return *this;
  }
  PickleWriter& put(uint32_t i) {
    return i < 256 ? op('q').op(static_cast<uint8_t>(i)) : op('r').le(i);
  }
  PickleWriter& get(uint32_t i) {
    return i < 256 ? op('h').op(static_cast<uint8_t>(i)) : op('j').le(i);
  }
  PickleWriter& tuple(const std::vector<int64_t>& v) {
    if (v.empty()) return op(')');
    mark();
    for (int64_t x : v) integer(x);
    return op('t');
  }
  PickleWriter& raw(const Bytes& x) {
    b.insert(b.end(), x.begin(), x.end());
    return *this;
  }
  // An empty OrderedDict, as torch pickles one.
  PickleWriter& ordered_dict() { return global("collections", "OrderedDict").op(')').op('R'); }
  uint32_t next_memo() { return memo_++; }

  template <typename T>
  PickleWriter& le(T v) {
    const auto* p = reinterpret_cast<const uint8_t*>(&v);
    b.insert(b.end(), p, p + sizeof(T));
    return *this;
  }

 private:
  uint32_t memo_ = 0;
};

struct TorchStorageSpec {
  std::string key, type;  // type: "FloatStorage", ...
  Bytes bytes;
  uint64_t numel;
};

struct TorchTensorSpec {
  std::string name, key;
  int64_t offset;
  std::vector<int64_t> size, stride;  // torch order
};

// One zip entry as written: `payload` is the bytes in the archive (deflated or not),
// `size` and `crc` what the directory declares of the uncompressed bytes.
struct ZipEntrySpec {
  std::string name;
  Bytes payload;
  uint16_t method = 0;
  uint32_t crc = 0;
  uint64_t size = 0;
  bool streamed = false;
};

// A raw deflate stream (no zlib header), as zip entries hold them.
inline Bytes raw_deflate(const Bytes& data, int level = Z_BEST_COMPRESSION) {
  z_stream zs{};
  if (deflateInit2(&zs, level, Z_DEFLATED, -MAX_WBITS, 8, Z_DEFAULT_STRATEGY) != Z_OK) return {};
  Bytes out(deflateBound(&zs, static_cast<uLong>(data.size())));
  zs.next_in = const_cast<Bytef*>(data.data());
  zs.avail_in = static_cast<uInt>(data.size());
  zs.next_out = out.data();
  zs.avail_out = static_cast<uInt>(out.size());
  const int r = deflate(&zs, Z_FINISH);
  out.resize(r == Z_STREAM_END ? zs.total_out : 0);
  deflateEnd(&zs);
  return out;
}

inline uint32_t crc32_of(const Bytes& data) {
  return static_cast<uint32_t>(crc32(0, data.data(), static_cast<uInt>(data.size())));
}

inline ZipEntrySpec deflated_entry(const std::string& name, const Bytes& data,
                                   bool streamed = false) {
  return {name, raw_deflate(data), 8, crc32_of(data), data.size(), streamed};
}

// Builds a checkpoint of tensors on shared storages, as torch.save lays one out.
class TorchFileBuilder {
 public:
  std::vector<TorchStorageSpec> storages;
  std::vector<TorchTensorSpec> tensors;
  // Wraps the state dict as a Lightning checkpoint: {"epoch", "global_step",
  // "callbacks": {<opaque ModelCheckpoint>}, "state_dict": ...}.
  bool lightning = false;
  bool zip64 = false;    // write zip64 end records and extra fields
  bool deflate = false;  // deflate every zip entry, as re-zipping tools do
  std::string top = "archive";

  TorchFileBuilder& storage(const std::string& key, const std::string& type, const Bytes& bytes,
                            size_t elsize) {
    storages.push_back({key, type, bytes, bytes.size() / elsize});
    return *this;
  }
  TorchFileBuilder& tensor(const std::string& name, const std::string& key, int64_t offset,
                           std::vector<int64_t> size, std::vector<int64_t> stride = {}) {
    if (stride.empty()) {  // contiguous
      stride.resize(size.size());
      int64_t s = 1;
      for (size_t d = size.size(); d-- > 0;) {
        stride[d] = s;
        s *= size[d];
      }
    }
    tensors.push_back({name, key, offset, std::move(size), std::move(stride)});
    return *this;
  }

  Bytes main_pickle(bool legacy) const {
    PickleWriter w;
    w.proto(2);
    if (lightning) {
      w.op('}').put(w.next_memo()).mark();
      w.str("epoch").integer(3).str("global_step").integer(70000);
      w.str("callbacks").op('}').mark().str("ModelCheckpoint{'monitor': None}");
      w.global("pytorch_lightning.callbacks.model_checkpoint", "ModelCheckpoint");
      w.op(')').op(0x81);                                               // NEWOBJ
      w.op('}').mark().str("best_model_score").none().op('u').op('b');  // BUILD
      w.op('u');
      w.str("state_dict");
    }
    w.ordered_dict().put(w.next_memo()).mark();
    std::map<std::string, uint32_t> memo;
    for (const auto& t : tensors) {
      const TorchStorageSpec* st = nullptr;
      for (const auto& s : storages) {
        if (s.key == t.key) st = &s;
      }
      w.str(t.name).global("torch._utils", "_rebuild_tensor_v2").mark();
      if (auto it = memo.find(t.key); it != memo.end()) {
        w.get(it->second);
      } else {
        w.mark()
            .str("storage")
            .global("torch", st->type)
            .str(t.key)
            .str("cpu")
            .integer(static_cast<int64_t>(st->numel));
        if (legacy) w.none();
        w.op('t').op('Q');
        memo[t.key] = w.next_memo();
        w.put(memo[t.key]);
      }
      w.integer(t.offset).tuple(t.size).tuple(t.stride).boolean(false).ordered_dict();
      w.op('t').op('R').put(w.next_memo());
    }
    w.op('u');
    if (lightning) w.op('u');
    return w.stop().b;
  }

  Bytes zip_bytes() const {
    std::vector<std::pair<std::string, Bytes>> entries;
    entries.push_back({top + "/data.pkl", main_pickle(false)});
    entries.push_back({top + "/byteorder", Bytes{'l', 'i', 't', 't', 'l', 'e'}});
    for (const auto& s : storages) entries.push_back({top + "/data/" + s.key, s.bytes});
    entries.push_back({top + "/version", Bytes{'3', '\n'}});
    return deflate ? zip_deflated(entries, zip64) : zip_stored(entries, zip64);
  }

  Bytes legacy_bytes() const {
    PickleWriter w;
    w.proto(2).op(0x8a).op(10).raw({0x6c, 0xfc, 0x9c, 0x46, 0xf9, 0x20, 0x6a, 0xa8, 0x50, 0x19});
    w.stop();
    w.proto(2).integer(1001).stop();
    w.proto(2).op('}').mark().str("protocol_version").integer(1001).str("little_endian");
    w.boolean(true).str("type_sizes").op('}').mark().str("int").integer(4).op('u').op('u').stop();
    w.raw(main_pickle(true));
    w.proto(2).op(']').mark();
    for (const auto& s : storages) w.str(s.key);
    w.op('e').stop();
    for (const auto& s : storages) w.le<uint64_t>(s.numel).raw(s.bytes);
    return w.b;
  }

  // A zip archive of stored entries, data aligned to 64 bytes as torch.save does.
  // `method` only labels them (a stored payload under another method's number).
  static Bytes zip_stored(const std::vector<std::pair<std::string, Bytes>>& entries,
                          bool zip64 = false, uint16_t method = 0) {
    std::vector<ZipEntrySpec> specs;
    for (const auto& [name, data] : entries) {
      specs.push_back({name, data, method, 0, data.size(), false});
    }
    return zip_entries(specs, zip64);
  }

  // The same entries deflated, with their CRC-32, as `zip -9` writes them; `streamed`
  // writes them as streaming writers do (flag bit 3, zeros in the local header, a data
  // descriptor after the data).
  static Bytes zip_deflated(const std::vector<std::pair<std::string, Bytes>>& entries,
                            bool zip64 = false, bool streamed = false) {
    std::vector<ZipEntrySpec> specs;
    for (const auto& [name, data] : entries) specs.push_back(deflated_entry(name, data, streamed));
    return zip_entries(specs, zip64);
  }

  // Every field as given, so tests can make them lie.
  static Bytes zip_entries(const std::vector<ZipEntrySpec>& entries, bool zip64 = false) {
    ByteWriter w, cd;
    for (const ZipEntrySpec& e : entries) {
      const std::string& name = e.name;
      const Bytes& data = e.payload;
      const uint16_t flags = e.streamed ? 8 : 0;
      uint64_t header = w.b.size();
      size_t pad = (64 - (header + 30 + name.size() + 4) % 64) % 64;
      w.put<uint32_t>(0x04034b50).put<uint16_t>(20).put<uint16_t>(flags).put<uint16_t>(e.method);
      w.put<uint32_t>(0).put<uint32_t>(e.streamed ? 0 : e.crc);  // time and date; crc
      w.put<uint32_t>(e.streamed ? 0 : static_cast<uint32_t>(data.size()))
          .put<uint32_t>(e.streamed ? 0 : static_cast<uint32_t>(e.size));
      w.put<uint16_t>(static_cast<uint16_t>(name.size()))
          .put<uint16_t>(static_cast<uint16_t>(4 + pad));
      w.raw(name.data(), name.size())
          .put<uint16_t>(0x4246)
          .put<uint16_t>(static_cast<uint16_t>(pad));
      w.b.resize(w.b.size() + pad);
      w.raw(data.data(), data.size());
      if (e.streamed) {
        w.put<uint32_t>(0x08074b50).put<uint32_t>(e.crc);
        if (zip64) {
          w.put<uint64_t>(data.size()).put<uint64_t>(e.size);
        } else {
          w.put<uint32_t>(static_cast<uint32_t>(data.size()))
              .put<uint32_t>(static_cast<uint32_t>(e.size));
        }
      }

      uint32_t small_csize = zip64 ? 0xffffffff : static_cast<uint32_t>(data.size());
      uint32_t small_size = zip64 ? 0xffffffff : static_cast<uint32_t>(e.size);
      uint32_t small_header = zip64 ? 0xffffffff : static_cast<uint32_t>(header);
      cd.put<uint32_t>(0x02014b50).put<uint16_t>(45).put<uint16_t>(45).put<uint16_t>(flags);
      cd.put<uint16_t>(e.method).put<uint32_t>(0).put<uint32_t>(e.crc);
      cd.put<uint32_t>(small_csize).put<uint32_t>(small_size);
      cd.put<uint16_t>(static_cast<uint16_t>(name.size())).put<uint16_t>(zip64 ? 28 : 0);
      cd.put<uint16_t>(0).put<uint16_t>(0).put<uint16_t>(0).put<uint32_t>(0);
      cd.put<uint32_t>(small_header).raw(name.data(), name.size());
      if (zip64) {
        cd.put<uint16_t>(1).put<uint16_t>(24).put<uint64_t>(e.size).put<uint64_t>(data.size());
        cd.put<uint64_t>(header);
      }
    }
    uint64_t cd_offset = w.b.size();
    w.raw(cd.b.data(), cd.b.size());
    uint64_t n = entries.size();
    if (zip64) {
      uint64_t eocd64 = w.b.size();
      w.put<uint32_t>(0x06064b50).put<uint64_t>(44).put<uint16_t>(45).put<uint16_t>(45);
      w.put<uint32_t>(0).put<uint32_t>(0).put<uint64_t>(n).put<uint64_t>(n);
      w.put<uint64_t>(cd.b.size()).put<uint64_t>(cd_offset);
      w.put<uint32_t>(0x07064b50).put<uint32_t>(0).put<uint64_t>(eocd64).put<uint32_t>(1);
    }
    w.put<uint32_t>(0x06054b50).put<uint16_t>(0).put<uint16_t>(0);
    w.put<uint16_t>(zip64 ? 0xffff : static_cast<uint16_t>(n))
        .put<uint16_t>(zip64 ? 0xffff : static_cast<uint16_t>(n));
    w.put<uint32_t>(zip64 ? 0xffffffff : static_cast<uint32_t>(cd.b.size()));
    w.put<uint32_t>(zip64 ? 0xffffffff : static_cast<uint32_t>(cd_offset)).put<uint16_t>(0);
    return w.b;
  }
};

// A zip-format checkpoint whose data.pkl is `pickle`, plus the given storages.
inline Bytes zip_with_pickle(const Bytes& pickle,
                             const std::vector<std::pair<std::string, Bytes>>& more = {}) {
  std::vector<std::pair<std::string, Bytes>> e = {{"archive/data.pkl", pickle}};
  e.insert(e.end(), more.begin(), more.end());
  return TorchFileBuilder::zip_stored(e);
}

template <typename T>
Bytes bytes_of(const std::vector<T>& v) {
  Bytes b(v.size() * sizeof(T));
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

}  // namespace sd::io::test
