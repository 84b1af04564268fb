#include "io/pickle.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <unordered_map>

#include "io/file_error.h"

namespace sd::io {

namespace {

// Opcode bytes, as listed in CPython's pickletools.
enum Op : uint8_t {
  MARK = '(',
  STOP = '.',
  POP = '0',
  POP_MARK = '1',
  DUP = '2',
  BININT = 'J',
  BININT1 = 'K',
  BININT2 = 'M',
  NONE = 'N',
  BINPERSID = 'Q',
  REDUCE = 'R',
  BINSTRING = 'T',
  SHORT_BINSTRING = 'U',
  BINUNICODE = 'X',
  APPEND = 'a',
  BUILD = 'b',
  GLOBAL = 'c',
  DICT = 'd',
  EMPTY_DICT = '}',
  APPENDS = 'e',
  BINGET = 'h',
  LONG_BINGET = 'j',
  LIST = 'l',
  EMPTY_LIST = ']',
  BINPUT = 'q',
  LONG_BINPUT = 'r',
  SETITEM = 's',
  TUPLE = 't',
  EMPTY_TUPLE = ')',
  SETITEMS = 'u',
  BINFLOAT = 'G',
  BINBYTES = 'B',
  SHORT_BINBYTES = 'C',
  PROTO = 0x80,
  NEWOBJ = 0x81,
  TUPLE1 = 0x85,
  TUPLE2 = 0x86,
  TUPLE3 = 0x87,
  NEWTRUE = 0x88,
  NEWFALSE = 0x89,
  LONG1 = 0x8a,
  LONG4 = 0x8b,
  SHORT_BINUNICODE = 0x8c,
  BINUNICODE8 = 0x8d,
  BINBYTES8 = 0x8e,
  NEWOBJ_EX = 0x92,
  STACK_GLOBAL = 0x93,
  MEMOIZE = 0x94,
  FRAME = 0x95,
};

// Names of every opcode, so a refused one is named in the error.
const char* opcode_name(uint8_t op) {
  switch (op) {
    case 'F':
      return "FLOAT";
    case 'I':
      return "INT";
    case 'L':
      return "LONG";
    case 'P':
      return "PERSID";
    case 'S':
      return "STRING";
    case 'V':
      return "UNICODE";
    case 'g':
      return "GET";
    case 'i':
      return "INST";
    case 'o':
      return "OBJ";
    case 'p':
      return "PUT";
    case 0x82:
      return "EXT1";
    case 0x83:
      return "EXT2";
    case 0x84:
      return "EXT4";
    case 0x8f:
      return "EMPTY_SET";
    case 0x90:
      return "ADDITEMS";
    case 0x91:
      return "FROZENSET";
    case 0x96:
      return "BYTEARRAY8";
    case 0x97:
      return "NEXT_BUFFER";
    case 0x98:
      return "READONLY_BUFFER";
    default:
      return nullptr;
  }
}

std::string hex(uint8_t v) {
  const char* d = "0123456789abcdef";
  return std::string("0x") + d[v >> 4] + d[v & 15];
}

// Globals whose only use in a pickle is running code or touching the system.
constexpr std::string_view kDangerousModules[] = {
    "os",     "posix",   "nt",         "subprocess", "sys",      "runpy",   "importlib",
    "socket", "shutil",  "ctypes",     "marshal",    "pickle",   "_pickle", "pty",
    "code",   "codeop",  "webbrowser", "commands",   "platform", "signal",  "multiprocessing",
    "types",  "asyncio", "pip",        "setuptools", "tempfile", "io",      "pathlib",
};
constexpr std::string_view kDangerousBuiltins[] = {
    "eval",    "exec",    "execfile", "compile", "open", "__import__", "getattr",
    "setattr", "delattr", "globals",  "locals",  "vars", "input",      "breakpoint",
    "apply",   "file",    "reload",   "exit",    "quit", "help",       "memoryview",
};

constexpr size_t kMaxGlobalName = 256;

class Vm {
 public:
  Vm(std::string_view path, std::string_view what, const uint8_t* data, uint64_t size,
     uint64_t base, PickleHost& host, const PickleLimits& limits)
      : path_(path),
        what_(what),
        data_(data),
        size_(size),
        base_(base),
        host_(host),
        limits_(limits),
        result_{PickleArena(limits.max_objects), kNoPickleRef, 0} {}

  PickleResult run() {
    while (true) {
      if (p_ >= size_) {
        fail_at(size_, "ends without a STOP opcode (truncated file?)");
      }
      op_pos_ = p_;
      uint8_t op = data_[p_++];
      if (step(op)) break;
    }
    result_.end = p_;
    return std::move(result_);
  }

 private:
  [[noreturn]] void fail_at(uint64_t pos, const std::string& msg) const {
    fail_file(path_, std::string(what_) + " at byte " + std::to_string(base_ + pos) + ": " + msg);
  }
  [[noreturn]] void fail(const std::string& msg) const { fail_at(op_pos_, msg); }

  PickleArena& arena() { return result_.arena; }

  const uint8_t* take(uint64_t n) {
    if (n > size_ - p_) {
      fail("an argument of " + std::to_string(n) + " bytes runs past the end of the pickle (" +
           std::to_string(size_ - p_) + " bytes left; truncated or corrupt file?)");
    }
    const uint8_t* r = data_ + p_;
    p_ += n;
    return r;
  }
  template <typename T>
  T read() {
    T v;
    std::memcpy(&v, take(sizeof(T)), sizeof(T));
    return v;
  }

  PickleRef add(PickleObject o) {
    PickleRef r = arena().add(std::move(o));
    if (r == kNoPickleRef) {
      fail("more than " + std::to_string(limits_.max_objects) +
           " objects (not a state dict; corrupt or hostile file?)");
    }
    return r;
  }
  PickleRef add_kind(PickleKind k) {
    PickleObject o;
    o.kind = k;
    return add(std::move(o));
  }
  PickleRef add_int(int64_t v, PickleKind k = PickleKind::Int) {
    PickleObject o;
    o.kind = k;
    o.i = v;
    return add(std::move(o));
  }
  PickleRef add_str(PickleKind k, const uint8_t* p, uint64_t n) {
    PickleObject o;
    o.kind = k;
    o.str.assign(reinterpret_cast<const char*>(p), static_cast<size_t>(n));
    return add(std::move(o));
  }
  void push(PickleRef r) {
    if (stack_.size() >= limits_.max_stack) {
      fail("stack grows past " + std::to_string(limits_.max_stack) +
           " entries (corrupt or hostile file?)");
    }
    stack_.push_back(r);
  }
  size_t fence() const { return marks_.empty() ? 0 : marks_.back(); }
  PickleRef pop(const char* op) {
    if (stack_.size() <= fence()) fail(std::string(op) + " pops an empty stack (corrupt file?)");
    PickleRef r = stack_.back();
    stack_.pop_back();
    return r;
  }
  PickleRef top(const char* op) {
    if (stack_.size() <= fence())
      fail(std::string(op) + " needs a value on the stack (corrupt file?)");
    return stack_.back();
  }
  std::vector<PickleRef> pop_mark(const char* op) {
    if (marks_.empty()) fail(std::string(op) + " without a preceding MARK (corrupt file?)");
    size_t k = marks_.back();
    marks_.pop_back();
    std::vector<PickleRef> items(stack_.begin() + static_cast<std::ptrdiff_t>(k), stack_.end());
    stack_.resize(k);
    return items;
  }

  PickleRef make_seq(PickleKind k, std::vector<PickleRef> items) {
    PickleObject o;
    o.kind = k;
    o.items = std::move(items);
    return add(std::move(o));
  }

  void memo_put(uint64_t idx, const char* op) {
    PickleRef v = top(op);
    auto it = memo_.find(idx);
    if (it != memo_.end()) {
      it->second = v;
      return;
    }
    if (memo_.size() >= limits_.max_memo) {
      fail("memo grows past " + std::to_string(limits_.max_memo) +
           " entries (corrupt or hostile file?)");
    }
    memo_.emplace(idx, v);
  }
  void memo_get(uint64_t idx) {
    auto it = memo_.find(idx);
    if (it == memo_.end()) {
      fail("memo index " + std::to_string(idx) + " was never stored (corrupt file?)");
    }
    push(it->second);
  }

  // Appends to the List or Dict below the popped values; opaque targets swallow them.
  void extend(std::vector<PickleRef> items, PickleKind want, const char* op) {
    PickleRef target = top(op);
    PickleKind k = arena()[target].kind;
    if (k == PickleKind::Opaque) return;
    if (k != want) {
      fail(std::string(op) + " on a " + std::string(pickle_kind_name(k)) + ", not a " +
           std::string(pickle_kind_name(want)) + " (corrupt file?)");
    }
    if (want == PickleKind::Dict && items.size() % 2 != 0) {
      fail(std::string(op) + " with an odd number of keys and values (corrupt file?)");
    }
    // Duplicate keys are kept; readers of a Dict take the last value, as Python does.
    auto& dst = arena().mut(target).items;
    dst.insert(dst.end(), items.begin(), items.end());
  }

  void push_global(PickleRef module, PickleRef name) {
    std::string_view m = arena()[module].str, n = arena()[name].str;
    // Python identifiers in real checkpoints are short; a long one is garbage.
    if (m.size() > kMaxGlobalName || n.size() > kMaxGlobalName) {
      fail("global name longer than " + std::to_string(kMaxGlobalName) + " bytes (corrupt file?)");
    }
    if (pickle_global_is_dangerous(m, n)) {
      fail("refused global '" + std::string(m) + "." + std::string(n) +
           "': it can only serve to run code when Python loads the file (a malicious "
           "checkpoint? do not load it in Python either)");
    }
    push(make_seq(PickleKind::Global, {module, name}));
  }

  PickleRef read_line() {
    const uint8_t* start = data_ + p_;
    size_t window = static_cast<size_t>(std::min<uint64_t>(size_ - p_, kMaxGlobalName + 1));
    const void* nl = std::memchr(start, '\n', window);
    if (!nl) {
      fail("GLOBAL name is not a short newline-terminated line (truncated or corrupt file?)");
    }
    auto n = static_cast<uint64_t>(static_cast<const uint8_t*>(nl) - start);
    p_ += n + 1;
    return add_str(PickleKind::String, start, n);
  }

  void call(const char* op, bool is_reduce) {
    PickleRef args = pop(op);
    PickleRef callable = pop(op);
    const PickleObject& c = arena()[callable];
    if (c.kind == PickleKind::Opaque) {
      push(callable);  // inert either way; sharing it keeps chains of calls from growing
      return;
    }
    if (c.kind != PickleKind::Global) {
      fail(std::string(op) + " calls a " + std::string(pickle_kind_name(c.kind)) +
           ", which is not callable (corrupt file?)");
    }
    if (arena()[args].kind != PickleKind::Tuple) {
      fail(std::string(op) + " arguments are a " +
           std::string(pickle_kind_name(arena()[args].kind)) + ", not a tuple (corrupt file?)");
    }
    PickleRef r = is_reduce ? host_.call(arena(), callable, args, base_ + op_pos_) : kNoPickleRef;
    if (r == kNoPickleRef) r = add_int(callable, PickleKind::Opaque);
    push(r);
  }

  uint64_t read_len(uint64_t n, const char* op) {
    if (n > size_ - p_) {
      fail(std::string(op) + " of " + std::to_string(n) +
           " bytes runs past the end of the pickle (" + std::to_string(size_ - p_) +
           " bytes left; truncated or corrupt file?)");
    }
    return n;
  }

  void push_long(const uint8_t* b, uint64_t n) {
    if (n <= 8) {
      uint64_t v = 0;
      for (uint64_t k = 0; k < n; ++k) v |= uint64_t{b[k]} << (8 * k);
      if (n > 0 && n < 8 && (b[n - 1] & 0x80)) v |= ~uint64_t{0} << (8 * n);  // sign-extend
      push(add_int(static_cast<int64_t>(v)));
    } else {
      push(add_str(PickleKind::BigInt, b, n));
    }
  }

  // Runs one opcode; true at STOP.
  bool step(uint8_t op) {
    switch (op) {
      case PROTO: {
        uint8_t v = read<uint8_t>();
        if (v > 5)
          fail("pickle protocol " + std::to_string(v) + " is newer than 5 (corrupt file?)");
        return false;
      }
      case FRAME:
        read_len(read<uint64_t>(), "FRAME");  // frames only group opcodes; read straight on
        return false;
      case STOP:
        result_.root = top("STOP");
        return true;
      case MARK:
        if (marks_.size() >= limits_.max_marks) {
          fail("MARKs nest deeper than " + std::to_string(limits_.max_marks) +
               " (corrupt or hostile file?)");
        }
        marks_.push_back(stack_.size());
        return false;
      case POP:
        pop("POP");
        return false;
      case POP_MARK:
        pop_mark("POP_MARK");
        return false;
      case DUP:
        push(top("DUP"));
        return false;
      case EMPTY_DICT:
        push(add_kind(PickleKind::Dict));
        return false;
      case EMPTY_LIST:
        push(add_kind(PickleKind::List));
        return false;
      case EMPTY_TUPLE:
        push(add_kind(PickleKind::Tuple));
        return false;
      case TUPLE:
        push(make_seq(PickleKind::Tuple, pop_mark("TUPLE")));
        return false;
      case TUPLE1:
      case TUPLE2:
      case TUPLE3: {
        size_t n = op - TUPLE1 + 1u;
        std::vector<PickleRef> items(n);
        for (size_t k = n; k-- > 0;) items[k] = pop("TUPLEn");
        push(make_seq(PickleKind::Tuple, std::move(items)));
        return false;
      }
      case LIST:
        push(make_seq(PickleKind::List, pop_mark("LIST")));
        return false;
      case DICT: {
        auto items = pop_mark("DICT");
        if (items.size() % 2 != 0)
          fail("DICT with an odd number of keys and values (corrupt file?)");
        push(make_seq(PickleKind::Dict, std::move(items)));
        return false;
      }
      case SETITEM: {
        PickleRef v = pop("SETITEM");
        PickleRef k = pop("SETITEM");
        extend({k, v}, PickleKind::Dict, "SETITEM");
        return false;
      }
      case SETITEMS:
        extend(pop_mark("SETITEMS"), PickleKind::Dict, "SETITEMS");
        return false;
      case APPEND: {
        PickleRef v = pop("APPEND");
        extend({v}, PickleKind::List, "APPEND");
        return false;
      }
      case APPENDS:
        extend(pop_mark("APPENDS"), PickleKind::List, "APPENDS");
        return false;
      case BININT:
        push(add_int(read<int32_t>()));
        return false;
      case BININT1:
        push(add_int(read<uint8_t>()));
        return false;
      case BININT2:
        push(add_int(read<uint16_t>()));
        return false;
      case LONG1: {
        uint64_t n = read_len(read<uint8_t>(), "LONG1");
        push_long(take(n), n);
        return false;
      }
      case LONG4: {
        int32_t n = read<int32_t>();
        if (n < 0) fail("LONG4 with negative length " + std::to_string(n) + " (corrupt file?)");
        uint64_t len = read_len(static_cast<uint64_t>(n), "LONG4");
        push_long(take(len), len);
        return false;
      }
      case BINFLOAT: {
        const uint8_t* b = take(8);
        uint64_t bits = 0;
        for (int k = 0; k < 8; ++k) bits = (bits << 8) | b[k];  // big-endian, per the spec
        PickleObject o;
        o.kind = PickleKind::Float;
        std::memcpy(&o.f, &bits, 8);
        push(add(std::move(o)));
        return false;
      }
      case NONE:
        push(add_kind(PickleKind::None));
        return false;
      case NEWTRUE:
      case NEWFALSE:
        push(add_int(op == NEWTRUE, PickleKind::Bool));
        return false;
      case SHORT_BINUNICODE:
      case SHORT_BINSTRING:
      case SHORT_BINBYTES: {
        uint64_t n = read_len(read<uint8_t>(), "string");
        push(add_str(op == SHORT_BINBYTES ? PickleKind::Bytes : PickleKind::String, take(n), n));
        return false;
      }
      case BINUNICODE:
      case BINBYTES: {
        uint64_t n = read_len(read<uint32_t>(), op == BINUNICODE ? "BINUNICODE" : "BINBYTES");
        push(add_str(op == BINBYTES ? PickleKind::Bytes : PickleKind::String, take(n), n));
        return false;
      }
      case BINSTRING: {
        int32_t len = read<int32_t>();
        if (len < 0) fail("BINSTRING with negative length (corrupt file?)");
        uint64_t n = read_len(static_cast<uint64_t>(len), "BINSTRING");
        push(add_str(PickleKind::String, take(n), n));
        return false;
      }
      case BINUNICODE8:
      case BINBYTES8: {
        uint64_t n = read_len(read<uint64_t>(), op == BINUNICODE8 ? "BINUNICODE8" : "BINBYTES8");
        push(add_str(op == BINBYTES8 ? PickleKind::Bytes : PickleKind::String, take(n), n));
        return false;
      }
      case BINPUT:
        memo_put(read<uint8_t>(), "BINPUT");
        return false;
      case LONG_BINPUT:
        memo_put(read<uint32_t>(), "LONG_BINPUT");
        return false;
      case MEMOIZE:
        memo_put(memo_.size(), "MEMOIZE");
        return false;
      case BINGET:
        memo_get(read<uint8_t>());
        return false;
      case LONG_BINGET:
        memo_get(read<uint32_t>());
        return false;
      case GLOBAL: {
        PickleRef module = read_line();
        PickleRef name = read_line();
        push_global(module, name);
        return false;
      }
      case STACK_GLOBAL: {
        PickleRef name = pop("STACK_GLOBAL");
        PickleRef module = pop("STACK_GLOBAL");
        if (arena()[name].kind != PickleKind::String ||
            arena()[module].kind != PickleKind::String) {
          fail("STACK_GLOBAL needs two strings (corrupt file?)");
        }
        push_global(module, name);
        return false;
      }
      case REDUCE:
        call("REDUCE", true);
        return false;
      case NEWOBJ:
        call("NEWOBJ", false);
        return false;
      case NEWOBJ_EX:
        pop("NEWOBJ_EX");  // kwargs; the class and args are checked as NEWOBJ's
        call("NEWOBJ_EX", false);
        return false;
      case BUILD:
        // Python would set the object's state; nothing here runs, so the state is dropped.
        pop("BUILD");
        top("BUILD");
        return false;
      case BINPERSID: {
        PickleRef pid = pop("BINPERSID");
        push(host_.persistent_load(arena(), pid, base_ + op_pos_));
        return false;
      }
      default: {
        const char* name = opcode_name(op);
        fail("unsupported opcode " + hex(op) + (name ? std::string(" (") + name + ")" : "") +
             " (this reader accepts only the opcodes torch.save writes for a state dict; corrupt "
             "file, or an object that is not a state dict?)");
      }
    }
  }

  std::string_view path_, what_;
  const uint8_t* data_;
  uint64_t size_, base_;
  PickleHost& host_;
  PickleLimits limits_;
  PickleResult result_;
  uint64_t p_ = 0, op_pos_ = 0;
  std::vector<PickleRef> stack_;
  std::vector<size_t> marks_;
  std::unordered_map<uint64_t, PickleRef> memo_;
};

}  // namespace

std::string_view pickle_kind_name(PickleKind k) {
  constexpr std::array<std::string_view, 13> kNames = {
      "None",  "bool", "int",  "int",    "float",         "str",         "bytes",
      "tuple", "list", "dict", "global", "opaque object", "torch object"};
  return kNames[static_cast<size_t>(k)];
}

PickleRef PickleArena::add(PickleObject o) {
  if (objects_.size() >= max_objects_) return kNoPickleRef;
  objects_.push_back(std::move(o));
  return static_cast<PickleRef>(objects_.size() - 1);
}

PickleRef PickleArena::dict_get(PickleRef dict, std::string_view key) const {
  const auto& items = objects_[dict].items;
  for (size_t k = items.size(); k >= 2; k -= 2) {
    const PickleObject& o = objects_[items[k - 2]];
    if (o.kind == PickleKind::String && o.str == key) return items[k - 1];
  }
  return kNoPickleRef;
}

std::string PickleArena::describe(PickleRef r) const {
  const PickleObject& o = objects_[r];
  if (o.kind == PickleKind::Global) {
    return std::string(global_module(r)) + "." + std::string(global_name(r));
  }
  if (o.kind == PickleKind::Opaque) {
    auto g = static_cast<PickleRef>(o.i);
    return objects_[g].kind == PickleKind::Global ? describe(g) + "(...)" : "an opaque object";
  }
  return std::string(pickle_kind_name(o.kind));
}

bool pickle_global_is_dangerous(std::string_view module, std::string_view name) {
  std::string_view top = module.substr(0, module.find('.'));
  for (auto m : kDangerousModules) {
    if (top == m) return true;
  }
  if (module == "builtins" || module == "__builtin__") {
    for (auto n : kDangerousBuiltins) {
      if (name == n) return true;
    }
  }
  return false;
}

PickleResult run_pickle(std::string_view path, std::string_view what, const uint8_t* data,
                        uint64_t size, uint64_t base, PickleHost& host,
                        const PickleLimits& limits) {
  return Vm(path, what, data, size, base, host, limits).run();
}

}  // namespace sd::io
