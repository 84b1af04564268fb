// A safe subset of Python's pickle machine (opcodes as documented in CPython's
// pickletools), enough to read the state dicts torch.save writes. Nothing is ever
// executed: a global is only a name, and calling it (REDUCE, NEWOBJ) asks the host, which
// understands the few torch functions it needs and lets everything else become an inert
// "opaque" object. Globals that only make sense for running code (os.system,
// builtins.eval, ...) are refused outright, naming them, since a file holding them is
// hostile. Text-protocol opcodes (INST, OBJ, ...) and extension registries are refused.
//
// Objects live in an arena and refer to each other by index, so shared and even cyclic
// structures (memo references) cost nothing special and free with the arena. The stack,
// memo, mark stack and arena are bounded, and every length is checked against the bytes
// left, so a hostile pickle cannot make the reader allocate beyond its own size.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace sd::io {

using PickleRef = uint32_t;
constexpr PickleRef kNoPickleRef = UINT32_MAX;

enum class PickleKind : uint8_t {
  None,
  Bool,
  Int,     // fits int64: `i`
  BigInt,  // wider LONG1/LONG4: `str` holds the little-endian two's complement bytes
  Float,
  String,  // str: UTF-8 as pickled
  Bytes,
  Tuple,   // items
  List,    // items
  Dict,    // items: key, value, key, value, ... in insertion order
  Global,  // items: the module and name String objects
  Opaque,  // an object this reader does not model, made by calling the Global `i`
  Host,    // made by the PickleHost; `i` is the host's own index
};

std::string_view pickle_kind_name(PickleKind k);

struct PickleObject {
  PickleKind kind = PickleKind::None;
  int64_t i = 0;  // Bool, Int, Host
  double f = 0;
  std::string str;
  std::vector<PickleRef> items;
};

struct PickleLimits {
  // Real state dicts need a few hundred thousand objects at most; the caps keep a hostile
  // pickle's memory within a few hundred MiB.
  uint64_t max_stack = 1u << 20;
  uint64_t max_memo = 1u << 21;
  uint64_t max_marks = 1u << 16;
  uint64_t max_objects = 1u << 21;
};

class PickleArena {
 public:
  explicit PickleArena(uint64_t max_objects = PickleLimits{}.max_objects)
      : max_objects_(max_objects) {}
  const PickleObject& operator[](PickleRef r) const { return objects_[r]; }
  PickleObject& mut(PickleRef r) { return objects_[r]; }
  // Returns kNoPickleRef when the arena is full (the VM turns that into an error).
  PickleRef add(PickleObject o);
  PickleRef add_kind(PickleKind k) {
    PickleObject o;
    o.kind = k;
    return add(std::move(o));
  }
  size_t size() const { return objects_.size(); }
  // Value of a Dict entry whose key is the string `key`, or kNoPickleRef.
  PickleRef dict_get(PickleRef dict, std::string_view key) const;
  // Parts of a Global. Objects refer to strings instead of copying them, so no opcode can
  // allocate more than a fixed size beyond the bytes it reads.
  std::string_view global_module(PickleRef g) const { return objects_[objects_[g].items[0]].str; }
  std::string_view global_name(PickleRef g) const { return objects_[objects_[g].items[1]].str; }
  // "collections.OrderedDict", "torch.optim.AdamW(...)" (opaque), or the kind's name.
  std::string describe(PickleRef r) const;

 private:
  std::vector<PickleObject> objects_;
  uint64_t max_objects_;
};

// What a file format layers on top of plain pickle. `pos` is the opcode's byte offset,
// for error messages.
class PickleHost {
 public:
  virtual ~PickleHost() = default;
  // REDUCE / NEWOBJ with a Global callable (args is a Tuple). Returns the result, or
  // kNoPickleRef to let the VM make an opaque object. May throw sd::Error.
  virtual PickleRef call(PickleArena& arena, PickleRef callable, PickleRef args, uint64_t pos) = 0;
  // BINPERSID. May throw sd::Error.
  virtual PickleRef persistent_load(PickleArena& arena, PickleRef pid, uint64_t pos) = 0;
};

struct PickleResult {
  PickleArena arena;
  PickleRef root = kNoPickleRef;
  uint64_t end = 0;  // offset just past STOP, from `data`
};

// Runs the pickle at data[0, size). `path` starts every error message; `what` names the
// pickle inside it ("archive/data.pkl"), and `base` is added to byte offsets in messages.
PickleResult run_pickle(std::string_view path, std::string_view what, const uint8_t* data,
                        uint64_t size, uint64_t base, PickleHost& host,
                        const PickleLimits& limits = {});

// True for globals that exist only to run code or touch the system, refused in any file.
bool pickle_global_is_dangerous(std::string_view module, std::string_view name);

}  // namespace sd::io
