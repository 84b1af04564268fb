#include "io/torch_checkpoint.h"

#include <cstring>
#include <string_view>
#include <unordered_set>

#include "io/file_error.h"
#include "io/pickle.h"
#include "io/zip_archive.h"

namespace sd::io {

namespace {

struct TorchType {
  std::string_view storage;  // torch.<X>Storage class name ("" if none)
  std::string_view dtype;    // torch.<dtype> name, as _rebuild_tensor_v3 passes it
  DType engine;
  FileDType file;
  size_t elsize;
};

constexpr TorchType kTypes[] = {
    {"FloatStorage", "float32", DType::F32, FileDType::None, 4},
    {"HalfStorage", "float16", DType::F16, FileDType::None, 2},
    {"BFloat16Storage", "bfloat16", DType::BF16, FileDType::None, 2},
    {"IntStorage", "int32", DType::I32, FileDType::None, 4},
    {"LongStorage", "int64", DType::I32, FileDType::I64, 8},
    {"DoubleStorage", "float64", DType::F32, FileDType::F64, 8},
    {"ByteStorage", "uint8", DType::I32, FileDType::U8, 1},
    {"CharStorage", "int8", DType::I32, FileDType::I8, 1},
    {"ShortStorage", "int16", DType::I32, FileDType::I16, 2},
    {"BoolStorage", "bool", DType::I32, FileDType::Bool, 1},
    // Untyped storages hold bytes; _rebuild_tensor_v3 says what the tensor's elements are.
    {"UntypedStorage", "", DType::I32, FileDType::U8, 1},
    {"", "float8_e4m3fn", DType::F16, FileDType::F8_E4M3, 1},
    {"", "float8_e5m2", DType::F16, FileDType::F8_E5M2, 1},
};

const TorchType* type_by_storage(std::string_view name) {
  for (const auto& t : kTypes) {
    if (!t.storage.empty() && t.storage == name) return &t;
  }
  return nullptr;
}
const TorchType* type_by_dtype(std::string_view name) {
  for (const auto& t : kTypes) {
    if (!t.dtype.empty() && t.dtype == name) return &t;
  }
  return nullptr;
}

// "FILE" of torch's legacy serialization: a LONG1 of 0x1950a86a20f9469cfc6c.
constexpr uint8_t kLegacyMagic[] = {0x6c, 0xfc, 0x9c, 0x46, 0xf9, 0x20, 0x6a, 0xa8, 0x50, 0x19};
constexpr int64_t kLegacyProtocol = 1001;
constexpr int kMaxNesting = 16;
constexpr size_t kMaxKey = 1024;

// Strings are referenced in the pickle's arena rather than copied: a pickle may name one
// memoized string from any number of storages.
struct Storage {
  PickleRef key = kNoPickleRef;     // a String
  PickleRef cls = kNoPickleRef;     // the storage class, a Global
  const TorchType* type = nullptr;  // null: a storage class this engine does not read
  uint64_t numel = 0;               // elements of `type`
  bool is_view = false;             // legacy: a slice [view_offset, +numel) of the storage `key`
  uint64_t view_offset = 0;
  uint64_t pos = 0;  // where it was loaded, for messages
  // Resolved once the storage bytes are found:
  uint64_t file_offset = 0, bytes = 0;
};

struct TensorRec {
  size_t storage = 0;
  const TorchType* type = nullptr;  // from _rebuild_tensor_v3, else the storage's
  bool typed_by_call = false;
  PickleRef dtype = kNoPickleRef;  // the Global _rebuild_tensor_v3 was given
  int64_t offset = 0;
  size_t n_dims = 0;
  std::array<int64_t, kMaxTensorDims> size{}, stride{};  // torch order: slowest first
  uint64_t pos = 0;
};

// Reads plain pickles (the legacy header pickles): no persistent ids, no tensors.
class PlainHost : public PickleHost {
 public:
  explicit PlainHost(std::string path) : path_(std::move(path)) {}
  PickleRef call(PickleArena&, PickleRef, PickleRef, uint64_t) override { return kNoPickleRef; }
  PickleRef persistent_load(PickleArena&, PickleRef, uint64_t pos) override {
    fail_file(path_,
              "unexpected persistent id at byte " + std::to_string(pos) + " (corrupt file?)");
  }

 private:
  std::string path_;
};

// Understands the few torch calls a state dict is made of; everything else stays opaque.
class TorchHost : public PickleHost {
 public:
  explicit TorchHost(std::string path) : path_(std::move(path)) {}

  std::vector<Storage> storages;
  std::vector<TensorRec> tensors;

  static bool is_tensor(const PickleObject& o) { return o.kind == PickleKind::Host && (o.i & 1); }
  static size_t index(const PickleObject& o) { return static_cast<size_t>(o.i >> 1); }

  PickleRef call(PickleArena& a, PickleRef callable, PickleRef args, uint64_t pos) override {
    std::string_view module = a.global_module(callable), name = a.global_name(callable);
    const auto& items = a[args].items;
    if (module == "torch._utils") {
      if (name == "_rebuild_tensor_v2" || name == "_rebuild_tensor") {
        return rebuild(a, args, pos, false);
      }
      if (name == "_rebuild_tensor_v3") return rebuild(a, args, pos, true);
      if (name == "_rebuild_parameter" || name == "_rebuild_parameter_with_state") {
        if (items.empty()) malformed(name, pos, "no arguments");
        return items[0];
      }
    }
    // OrderedDict() and its items arrive by SETITEMS afterwards; arguments are ignored.
    if (module == "collections" && name == "OrderedDict") return a.add_kind(PickleKind::Dict);
    if (module == "torch" && name == "Size" && items.size() == 1 &&
        a[items[0]].kind == PickleKind::Tuple) {
      return items[0];
    }
    return kNoPickleRef;
  }

  PickleRef persistent_load(PickleArena& a, PickleRef pid, uint64_t pos) override {
    const PickleObject& t = a[pid];
    auto bad = [&](const std::string& why) -> void {
      fail_file(path_, "persistent id at byte " + std::to_string(pos) + " " + why +
                           " (corrupt file, or not written by torch.save?)");
    };
    if (t.kind != PickleKind::Tuple || t.items.size() < 5) bad("is not a storage tuple");
    const auto& it = t.items;
    if (a[it[0]].kind != PickleKind::String || a[it[0]].str != "storage") {
      bad("is not ('storage', ...)");
    }
    if (a[it[1]].kind != PickleKind::Global) bad("names no storage class");
    if (a[it[2]].kind != PickleKind::String) bad("has a key that is not a string");
    // Keys are short numbers; a long one would be copied per reference to it.
    if (a[it[2]].str.size() > kMaxKey)
      bad("has a key longer than " + std::to_string(kMaxKey) + " bytes");
    const PickleObject& numel = a[it[4]];
    if (numel.kind != PickleKind::Int || numel.i < 0) bad("has no valid element count");

    Storage st;
    st.key = it[2];
    st.cls = it[1];
    std::string_view module = a.global_module(it[1]);
    if (module == "torch" || module == "torch.cuda" || module == "torch.storage") {
      st.type = type_by_storage(a.global_name(it[1]));
    }
    st.numel = static_cast<uint64_t>(numel.i);
    st.pos = pos;
    if (it.size() >= 6 && a[it[5]].kind != PickleKind::None) {
      // Legacy view_metadata: (view_key, offset, size) into the storage `key`.
      const PickleObject& v = a[it[5]];
      if (v.kind != PickleKind::Tuple || v.items.size() != 3 ||
          a[v.items[1]].kind != PickleKind::Int || a[v.items[2]].kind != PickleKind::Int ||
          a[v.items[1]].i < 0 || a[v.items[2]].i < 0) {
        bad("has malformed view metadata");
      }
      st.is_view = true;
      st.view_offset = static_cast<uint64_t>(a[v.items[1]].i);
      st.numel = static_cast<uint64_t>(a[v.items[2]].i);
    }
    PickleObject o;
    o.kind = PickleKind::Host;
    o.i = static_cast<int64_t>(storages.size() << 1);
    storages.push_back(std::move(st));
    return add(a, std::move(o), pos);
  }

 private:
  [[noreturn]] void malformed(std::string_view fn, uint64_t pos, const std::string& why) const {
    fail_file(path_, "malformed call of torch._utils." + std::string(fn) + " at byte " +
                         std::to_string(pos) + ": " + why + " (corrupt file?)");
  }

  PickleRef add(PickleArena& a, PickleObject o, uint64_t pos) const {
    PickleRef r = a.add(std::move(o));
    if (r == kNoPickleRef)
      fail_file(path_, "too many objects at byte " + std::to_string(pos) + " (corrupt file?)");
    return r;
  }

  // _rebuild_tensor_v2(storage, storage_offset, size, stride, requires_grad, hooks, ...);
  // _rebuild_tensor_v3 adds the dtype as the 7th argument.
  PickleRef rebuild(PickleArena& a, PickleRef args, uint64_t pos, bool v3) {
    std::string_view fn = v3 ? "_rebuild_tensor_v3" : "_rebuild_tensor_v2";
    const auto& it = a[args].items;
    if (it.size() < (v3 ? 7u : 4u)) malformed(fn, pos, std::to_string(it.size()) + " arguments");
    const PickleObject& st = a[it[0]];
    if (st.kind == PickleKind::Opaque) return kNoPickleRef;
    if (st.kind != PickleKind::Host || is_tensor(st)) malformed(fn, pos, "no storage");
    TensorRec t;
    t.storage = index(st);
    t.pos = pos;
    const PickleObject& off = a[it[1]];
    if (off.kind != PickleKind::Int || off.i < 0) malformed(fn, pos, "bad storage offset");
    t.offset = off.i;
    const PickleObject& size = a[it[2]];
    const PickleObject& stride = a[it[3]];
    if (size.kind != PickleKind::Tuple || stride.kind != PickleKind::Tuple ||
        size.items.size() != stride.items.size()) {
      malformed(fn, pos, "size and stride are not tuples of one length");
    }
    // Only the dimension count is kept past 4: such a tensor is refused by name later.
    t.n_dims = size.items.size();
    for (size_t d = 0; d < std::min<size_t>(t.n_dims, kMaxTensorDims); ++d) {
      const PickleObject& n = a[size.items[d]];
      const PickleObject& m = a[stride.items[d]];
      if (n.kind != PickleKind::Int || m.kind != PickleKind::Int || n.i < 0 || m.i < 0) {
        malformed(fn, pos, "size or stride holds something other than a non-negative int");
      }
      t.size[d] = n.i;
      t.stride[d] = m.i;
    }
    if (v3) {
      if (a[it[6]].kind != PickleKind::Global) malformed(fn, pos, "no dtype");
      t.typed_by_call = true;
      t.dtype = it[6];
      t.type = a.global_module(it[6]) == "torch" ? type_by_dtype(a.global_name(it[6])) : nullptr;
    }
    PickleObject o;
    o.kind = PickleKind::Host;
    o.i = static_cast<int64_t>((tensors.size() << 1) | 1);
    tensors.push_back(t);
    return add(a, std::move(o), pos);
  }

  std::string path_;
};

}  // namespace

// A checkpoint's pickle describes its tensors (names, shapes, storages): about 100 bytes
// each, so even a model of a million tensors stays far below this.
constexpr uint64_t kMaxPickleBytes = uint64_t{256} << 20;

class TorchCheckpointBuilder {
 public:
  explicit TorchCheckpointBuilder(std::shared_ptr<const MappedFile> file)
      : f_(std::move(file)), path_(f_->path()), host_(path_) {}

  TorchCheckpoint build() {
    const MappedFile& f = *f_;
    if (ZipArchive::looks_like_zip(f)) {
      read_zip();
    } else if (f.size() >= 2 && f.data()[0] == 0x80) {
      read_legacy();
    } else if (f.size() >= 262 && std::memcmp(f.data() + 257, "ustar", 5) == 0) {
      fail(
          "tar-format checkpoint from PyTorch before 0.4, which this reader does not support "
          "(re-save it with a newer torch.save, or convert it to safetensors)");
    } else {
      fail(
          "not a PyTorch checkpoint: neither a zip archive nor a pickle (wrong file, or a "
          "truncated download?)");
    }
    collect();
    out_.file_ = f_;
    return std::move(out_);
  }

 private:
  [[noreturn]] void fail(const std::string& what) const { fail_file(path_, what); }

  std::string_view key_view(const Storage& st) const { return result_.arena[st.key].str; }
  std::string key_of(const Storage& st) const { return std::string(key_view(st)); }
  std::string type_name(const Storage& st) const { return result_.arena.describe(st.cls); }

  void read_zip() {
    ZipArchive zip = ZipArchive::parse(f_);
    const ZipEntry* pkl = nullptr;
    for (const ZipEntry& e : zip.entries()) {
      std::string_view n = e.name;
      if (n.size() > 9 && n.substr(n.size() - 9) == "/data.pkl" && n.find('/') == n.size() - 9) {
        pkl = &e;
        break;
      }
    }
    if (!pkl) {
      fail("zip archive has no '<name>/data.pkl' entry (not a PyTorch checkpoint?)");
    }
    const std::string pkl_name = pkl->name;
    std::string prefix = pkl_name.substr(0, pkl_name.size() - 8);
    if (zip.has_deflated_entries()) {
      // Re-zipped by a tool that compresses. Inflate only what is read, as much as is
      // read: the pickle first, then the storages it refers to, each to the bytes the
      // pickle gives it. Entries nothing refers to (or a bomb's padding) stay compressed.
      if (pkl->size > kMaxPickleBytes) {
        fail("zip entry '" + pkl_name + "' declares " + std::to_string(pkl->size) +
             " bytes, more than a checkpoint's pickle holds (corrupt file?)");
      }
      const ZipArchive pickle_only = zip.inflated({{pkl_name, pkl->size}});
      const ZipEntry& p = *pickle_only.find(pkl_name);
      result_ = run_pickle(path_, pkl_name, pickle_only.stored_data(p), p.size, 0, host_);
      std::unordered_map<std::string, uint64_t> keep = {{prefix + "byteorder", 16}};
      for (const Storage& st : host_.storages) {
        uint64_t need = 0;
        if (st.type && __builtin_mul_overflow(st.numel, st.type->elsize, &need)) need = ~0ull;
        uint64_t& k = keep[prefix + "data/" + key_of(st)];
        k = std::max(k, need);
      }
      zip = zip.inflated(keep);
      f_ = zip.shared_file();
    } else {
      result_ =
          run_pickle(path_, pkl_name, zip.stored_data(*pkl), pkl->size, pkl->data_offset, host_);
    }
    if (const ZipEntry* bo = zip.find(prefix + "byteorder")) {
      const uint8_t* p = zip.stored_data(*bo);
      if (bo->size == 3 && std::memcmp(p, "big", 3) == 0) {
        fail(
            "checkpoint was saved on a big-endian machine, which this reader does not support "
            "(convert it to safetensors there)");
      }
    }
    for (Storage& st : host_.storages) {
      std::string name = prefix + "data/" + key_of(st);
      const ZipEntry* e = zip.find(name);
      if (!e) {
        fail("storage '" + key_of(st) + "' (entry '" + name +
             "') is missing from the archive (corrupt or truncated file?)");
      }
      st.file_offset = e->data_offset;
      st.bytes = e->size;
      zip.stored_data(*e);  // refuses compressed entries
      if (st.type) check_fits(st, e->size, "its archive entry '" + name + "'");
    }
  }

  void check_fits(const Storage& st, uint64_t available, const std::string& where) const {
    uint64_t need;
    if (__builtin_mul_overflow(st.numel, st.type->elsize, &need) || need > available) {
      fail("storage '" + key_of(st) + "' claims " + std::to_string(st.numel) + " elements of " +
           std::string(st.type->storage) + " but " + where + " holds " + std::to_string(available) +
           " bytes (corrupt or truncated file?)");
    }
  }

  // Runs the pickle starting at `pos` of the file; returns its result, with end as a file
  // offset.
  PickleResult pickle_at(uint64_t pos, const std::string& what, PickleHost& host) {
    PickleResult r = run_pickle(path_, what, f_->data() + pos, f_->size() - pos, pos, host);
    r.end += pos;
    return r;
  }

  void read_legacy() {
    out_.legacy_ = true;
    PlainHost plain(path_);
    PickleResult magic = pickle_at(0, "legacy header pickle", plain);
    const PickleObject& m = magic.arena[magic.root];
    if (m.kind != PickleKind::BigInt || m.str.size() != sizeof(kLegacyMagic) ||
        std::memcmp(m.str.data(), kLegacyMagic, sizeof(kLegacyMagic)) != 0) {
      fail(
          "starts with a pickle but not PyTorch's magic number (not a PyTorch checkpoint, or "
          "a plain pickle file this reader does not load)");
    }
    PickleResult proto = pickle_at(magic.end, "legacy header pickle", plain);
    const PickleObject& pv = proto.arena[proto.root];
    if (pv.kind != PickleKind::Int || pv.i != kLegacyProtocol) {
      fail("legacy checkpoint protocol is not " + std::to_string(kLegacyProtocol) +
           " (corrupt file, or an unknown torch.save variant?)");
    }
    PickleResult info = pickle_at(proto.end, "legacy system-info pickle", plain);
    if (info.arena[info.root].kind == PickleKind::Dict) {
      PickleRef le = info.arena.dict_get(info.root, "little_endian");
      if (le != kNoPickleRef && info.arena[le].kind == PickleKind::Bool && info.arena[le].i == 0) {
        fail(
            "checkpoint was saved on a big-endian machine, which this reader does not support "
            "(convert it to safetensors there)");
      }
    }
    result_ = pickle_at(info.end, "main pickle", host_);
    PickleResult keys = pickle_at(result_.end, "storage-keys pickle", plain);
    const PickleObject& list = keys.arena[keys.root];
    if (list.kind != PickleKind::List) {
      fail("legacy storage-key list is a " + std::string(pickle_kind_name(list.kind)) +
           ", not a list (corrupt file?)");
    }
    // Each storage follows as an 8-byte element count and the elements.
    struct Root {
      uint64_t offset, bytes;
      const TorchType* type;
    };
    std::unordered_map<std::string_view, Root> roots;
    std::unordered_map<std::string_view, const Storage*> used;
    for (const Storage& c : host_.storages) used.emplace(key_view(c), &c);
    uint64_t pos = keys.end;
    for (PickleRef k : list.items) {
      const PickleObject& key = keys.arena[k];
      if (key.kind != PickleKind::String)
        fail("legacy storage key is not a string (corrupt file?)");
      auto u = used.find(key.str);
      const Storage* st = u == used.end() ? nullptr : u->second;
      if (!st) {
        fail("storage '" + key.str + "' is listed but no tensor refers to it (corrupt file?)");
      }
      if (!st->type) {
        fail("storage '" + key.str + "' has type " + type_name(*st) +
             ", which this reader does not load (convert the file to safetensors)");
      }
      if (f_->size() - pos < 8) {
        fail("storage '" + key.str + "' at byte " + std::to_string(pos) +
             " runs past the end of the file (truncated download?)");
      }
      uint64_t count, bytes;
      std::memcpy(&count, f_->data() + pos, 8);
      pos += 8;
      if (__builtin_mul_overflow(count, st->type->elsize, &bytes) || bytes > f_->size() - pos) {
        fail("storage '" + key.str + "' of " + std::to_string(count) + " elements at byte " +
             std::to_string(pos) + " runs past the end of the file (" + std::to_string(f_->size()) +
             " bytes; truncated download?)");
      }
      if (!roots.emplace(key.str, Root{pos, bytes, st->type}).second) {
        fail("storage '" + key.str + "' is listed twice (corrupt file?)");
      }
      pos += bytes;
    }
    for (Storage& st : host_.storages) {
      auto it = roots.find(key_view(st));
      if (it == roots.end()) {
        fail("storage '" + key_of(st) + "' is not in the file's storage list (corrupt file?)");
      }
      const Root& r = it->second;
      if (!st.type) {
        fail("storage '" + key_of(st) + "' has type " + type_name(st) +
             ", which this reader does not load (convert the file to safetensors)");
      }
      if (st.type->elsize != r.type->elsize) {
        fail("storage '" + key_of(st) + "' is used with two element types (corrupt file?)");
      }
      uint64_t begin = 0;
      if (st.is_view && __builtin_mul_overflow(st.view_offset, st.type->elsize, &begin))
        begin = ~0ull;
      if (begin > r.bytes)
        fail("storage view '" + key_of(st) + "' starts past its storage (corrupt file?)");
      st.file_offset = r.offset + begin;
      st.bytes = r.bytes - begin;
      check_fits(st, st.bytes, "the file");
      if (st.is_view) st.bytes = st.numel * st.type->elsize;
    }
  }

  // Finds the state dict and turns its tensors into TensorInfos.
  void collect() {
    const PickleArena& a = result_.arena;
    PickleRef root = result_.root;
    if (a[root].kind != PickleKind::Dict) {
      std::string what(pickle_kind_name(a[root].kind));
      if (a[root].kind == PickleKind::Opaque) what += " '" + a.describe(root) + "'";
      fail("the checkpoint holds a " + what +
           ", not a dict of tensors (a TorchScript archive or a pickled model object? save "
           "model.state_dict() instead)");
    }
    PickleRef sd = a.dict_get(root, "state_dict");
    if (sd != kNoPickleRef && a[sd].kind == PickleKind::Dict) root = sd;
    walk(root, "", 0);
    out_.index_.reserve(out_.tensors_.size());
    for (size_t i = 0; i < out_.tensors_.size(); ++i) out_.index_[out_.tensors_[i].name] = i;
  }

  void walk(PickleRef dict, const std::string& prefix, int depth) {
    const PickleArena& a = result_.arena;
    // Memo references can make a dict contain itself; each is walked once.
    if (!visited_.insert(dict).second) return;
    const auto& items = a[dict].items;
    for (size_t k = 0; k + 1 < items.size(); k += 2) {
      const PickleObject& key = a[items[k]];
      const PickleObject& v = a[items[k + 1]];
      std::string name;
      if (key.kind == PickleKind::String && key.str.size() > kMaxKey) {
        // Real tensor names are a few dozen bytes; copying a huge one per entry would let a
        // small file allocate without bound.
        fail("a key in the state dict is " + std::to_string(key.str.size()) +
             " bytes long, beyond the " + std::to_string(kMaxKey) +
             "-byte limit for tensor names (corrupt file?)");
      }
      if (key.kind == PickleKind::String) {
        name = prefix + key.str;
      } else if (key.kind == PickleKind::Int) {
        name = prefix + std::to_string(key.i);
      } else {
        continue;
      }
      if (TorchHost::is_tensor(v)) {
        add_tensor(name, host_.tensors[TorchHost::index(v)]);
      } else if (v.kind == PickleKind::Dict) {
        if (depth + 1 >= kMaxNesting) {
          out_.notes_.push_back("'" + name + "': dicts nested too deep, skipped");
        } else {
          walk(items[k + 1], name + ".", depth + 1);
        }
      } else if (v.kind == PickleKind::Opaque) {
        out_.notes_.push_back("'" + name + "': skipped " + a.describe(items[k + 1]) +
                              ", not a tensor");
      }
    }
  }

  void add_tensor(const std::string& name, const TensorRec& t) {
    const Storage& st = host_.storages[t.storage];
    auto quote = "tensor '" + name + "'";
    const TorchType* type = t.typed_by_call ? t.type : st.type;
    if (!type || (t.typed_by_call && st.type && st.type->elsize != 1 && st.type != type)) {
      std::string what = t.typed_by_call ? result_.arena.describe(t.dtype) : type_name(st);
      fail(quote + " has type " + what +
           ", which this engine does not load (convert it to float16/float32 first)");
    }
    if (t.n_dims > kMaxTensorDims) {
      fail(quote + " has " + std::to_string(t.n_dims) +
           " dimensions (this engine supports up to 4)");
    }
    const uint64_t elsize = type->elsize;
    TensorInfo info;
    TorchLayout lay;
    info.name = name;
    info.path = path_;
    info.dtype = type->engine;
    info.file_dtype = type->file;
    info.n_dims = static_cast<int>(t.n_dims);
    uint64_t n = 1, last = static_cast<uint64_t>(t.offset);
    bool overflow = false;
    int64_t expected = 1;
    for (size_t d = t.n_dims; d-- > 0;) {
      auto size = static_cast<uint64_t>(t.size[d]);
      auto stride = static_cast<uint64_t>(t.stride[d]);
      overflow |= __builtin_mul_overflow(n, size, &n);
      uint64_t reach;
      if (size > 0) {
        overflow |= __builtin_mul_overflow(size - 1, stride, &reach);
        overflow |= __builtin_add_overflow(last, reach, &last);
      }
      if (t.size[d] != 1 && t.stride[d] != expected) lay.contiguous = false;
      overflow |= __builtin_mul_overflow(expected, t.size[d], &expected);
      size_t e = t.n_dims - 1 - d;  // engine order
      info.ne[e] = t.size[d];
      lay.stride[e] = t.stride[d];
    }
    if (overflow || n > static_cast<uint64_t>(INT64_MAX) ||
        __builtin_mul_overflow(n, elsize, &info.size)) {
      fail(quote + " has a shape or strides that overflow 64 bits (corrupt file?)");
    }
    if (n == 0) {
      lay.contiguous = true;
      info.offset = st.file_offset;
    } else {
      uint64_t end;
      if (__builtin_add_overflow(last, 1, &end) || __builtin_mul_overflow(end, elsize, &end) ||
          end > st.bytes) {
        fail(quote + " " + shape_string(info) + " at element offset " + std::to_string(t.offset) +
             " reaches past the end of its storage '" + key_of(st) + "' (" +
             std::to_string(st.bytes) + " bytes; corrupt file?)");
      }
      info.offset = st.file_offset + static_cast<uint64_t>(t.offset) * elsize;
      // Only views whose elements overlap (stride 0 from expand(), ...) can hold more than
      // their storage; state dicts never do, and refusing them bounds what a loader allocates
      // by the file's size.
      if (info.size > st.bytes) {
        fail(quote + " " + shape_string(info) +
             " is a view whose elements overlap in its storage (an expanded tensor?), which "
             "this reader does not load (save a .contiguous() copy)");
      }
    }
    lay.storage_offset = st.file_offset;
    lay.storage_size = st.bytes;
    auto [it, fresh] = names_.emplace(name, out_.tensors_.size());
    if (!fresh) {  // a repeated key: Python keeps the last value
      out_.tensors_[it->second] = std::move(info);
      out_.layouts_[it->second] = lay;
      return;
    }
    out_.tensors_.push_back(std::move(info));
    out_.layouts_.push_back(lay);
  }

  std::shared_ptr<const MappedFile> f_;
  std::string path_;
  TorchHost host_;
  PickleResult result_;
  TorchCheckpoint out_;
  std::unordered_set<PickleRef> visited_;
  std::unordered_map<std::string, size_t> names_;
};

TorchCheckpoint TorchCheckpoint::open(const std::string& path, MapMode mode) {
  return parse(MappedFile::open(path, mode));
}

TorchCheckpoint TorchCheckpoint::parse(std::shared_ptr<const MappedFile> file) {
  return TorchCheckpointBuilder(std::move(file)).build();
}

const TensorInfo* TorchCheckpoint::find(const std::string& name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

const TorchLayout& TorchCheckpoint::layout(const TensorInfo& info) const {
  auto it = index_.find(info.name);
  if (it == index_.end()) {
    fail_file(path(), "tensor '" + info.name + "' is not in this checkpoint (internal error)");
  }
  return layouts_[it->second];
}

const uint8_t* TorchCheckpoint::data(const TensorInfo& info) const {
  if (!is_contiguous(info)) {
    fail_file(path(), "tensor '" + info.name +
                          "' is a strided view whose bytes are not contiguous in the file "
                          "(the loader must gather it with read())");
  }
  return file_->data() + info.offset;
}

void TorchCheckpoint::read(const TensorInfo& info, void* dst) const {
  const TorchLayout& lay = layout(info);
  if (info.size == 0) return;  // dst may be null then; memcpy must not see it
  const uint8_t* base = file_->data() + info.offset;
  if (lay.contiguous) {
    std::memcpy(dst, base, static_cast<size_t>(info.size));
    return;
  }
  const size_t el =
      info.needs_conversion() ? file_dtype_size(info.file_dtype) : type_size(info.dtype);
  auto* out = static_cast<uint8_t*>(dst);
  const auto& ne = info.ne;
  const auto& st = lay.stride;
  for (int64_t i3 = 0; i3 < ne[3]; ++i3) {
    for (int64_t i2 = 0; i2 < ne[2]; ++i2) {
      for (int64_t i1 = 0; i1 < ne[1]; ++i1) {
        const uint8_t* row = base + static_cast<size_t>(i3 * st[3] + i2 * st[2] + i1 * st[1]) * el;
        for (int64_t i0 = 0; i0 < ne[0]; ++i0) {
          std::memcpy(out, row + static_cast<size_t>(i0 * st[0]) * el, el);
          out += el;
        }
      }
    }
  }
}

}  // namespace sd::io
