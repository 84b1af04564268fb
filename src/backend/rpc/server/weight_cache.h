// The server's weight cache, keyed by the xxh3-128 of a weight's bytes, so a client that
// reconnects, or reloads a module whose weights live on disk, names the bytes instead of
// sending them again.
//
// In memory it keeps whole buffers, not copies: a buffer that held exactly one verified
// weight and was never written since moves into the cache when its session frees it, and
// moves back out, untouched, to the next session that asks for that hash. Nothing is
// copied and no buffer is ever shared, so one client cannot change another's weights.
// Least recently used buffers are freed when the budget is full. With a folder, verified
// weights are also kept as one file per hash and survive a restart.
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "backend/backend.h"
#include "backend/rpc/protocol.h"

namespace sd::rpc {

class WeightCache {
 public:
  // `memory_budget` bytes of buffers kept in memory; `folder` empty: no disk cache.
  WeightCache(size_t memory_budget, std::string folder);

  // A buffer of `device` holding exactly the bytes with this hash, taken out of the cache;
  // nullptr when there is none.
  std::unique_ptr<Buffer> take(const ContentHash& hash, size_t size, uint32_t device);
  // Keeps a buffer whose whole content has this (verified) hash.
  void give(const ContentHash& hash, uint32_t device, std::unique_ptr<Buffer> buffer);

  // Disk entries: fills [offset, offset + size) of `b` from the file of `hash` when it
  // exists and its bytes match the hash; false otherwise.
  bool load(const ContentHash& hash, Buffer& b, uint64_t offset, size_t size);
  // Writes the range to the file of `hash` (under a temporary name, then renamed).
  void store(const ContentHash& hash, Buffer& b, uint64_t offset, size_t size);
  bool has_folder() const { return !folder_.empty(); }

  size_t memory_bytes() const;
  // Bytes of `device`'s buffers held here, and freeing the least recently used of them until
  // at least `bytes` are freed (or none is left): cached buffers count against the
  // device's --mem limit and give way to allocations.
  size_t device_bytes(uint32_t device) const;
  void evict(uint32_t device, size_t bytes);

 private:
  struct Key {
    ContentHash hash;
    uint32_t device;
    bool operator==(const Key&) const = default;
  };
  struct KeyHash {
    size_t operator()(const Key& k) const { return k.hash.low ^ (k.hash.high * 31) ^ k.device; }
  };
  struct Entry {
    std::unique_ptr<Buffer> buffer;
    std::list<Key>::iterator age;
  };
  std::string path_of(const ContentHash& hash) const;
  // Frees the entry at `age` in lru_ and returns the position after it, as list::erase
  // does. Callers hold mutex_.
  std::list<Key>::iterator drop(std::list<Key>::iterator age);

  mutable std::mutex mutex_;
  size_t budget_;
  size_t used_ = 0;
  std::string folder_;
  std::list<Key> lru_;  // front: most recently given
  std::unordered_map<Key, Entry, KeyHash> entries_;
};

}  // namespace sd::rpc
