// The server's weight cache: tensor bytes keyed by their xxh3-128 content hash, so a client
// that reconnects, or reloads a module whose weights live on disk, names the bytes instead
// of sending them again. Kept in memory up to a byte budget (least recently used leave
// first) and, with a cache folder, on disk as one file per hash.
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "backend/rpc/protocol.h"

namespace sd::rpc {

using Bytes = std::shared_ptr<const std::vector<uint8_t>>;

class WeightCache {
 public:
  // `memory_budget` bytes in RAM; `folder` empty: no disk cache.
  WeightCache(size_t memory_budget, std::string folder);

  // The bytes with this hash and size, from memory or disk; nullptr when absent. Disk
  // entries are verified against their hash before use.
  Bytes find(const ContentHash& hash, size_t size);
  // Keeps bytes already verified against `hash`.
  void put(const ContentHash& hash, Bytes bytes);

  size_t memory_bytes() const;

 private:
  struct Entry {
    Bytes bytes;
    std::list<ContentHash>::iterator age;
  };
  struct HashOf {
    size_t operator()(const ContentHash& h) const { return h.low ^ (h.high * 31); }
  };
  std::string path_of(const ContentHash& hash) const;
  void keep_in_memory(const ContentHash& hash, Bytes bytes);

  mutable std::mutex mutex_;
  size_t budget_;
  size_t used_ = 0;
  std::string folder_;
  std::list<ContentHash> lru_;  // front: most recently used
  std::unordered_map<ContentHash, Entry, HashOf> entries_;
};

}  // namespace sd::rpc
