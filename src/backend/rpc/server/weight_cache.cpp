#include "backend/rpc/server/weight_cache.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>

namespace sd::rpc {

WeightCache::WeightCache(size_t memory_budget, std::string folder)
    : budget_(memory_budget), folder_(std::move(folder)) {
  if (!folder_.empty()) ::mkdir(folder_.c_str(), 0700);
}

std::string WeightCache::path_of(const ContentHash& hash) const {
  return folder_ + "/" + hash.hex() + ".bin";
}

size_t WeightCache::memory_bytes() const {
  std::lock_guard lock(mutex_);
  return used_;
}

Bytes WeightCache::find(const ContentHash& hash, size_t size) {
  {
    std::lock_guard lock(mutex_);
    auto it = entries_.find(hash);
    if (it != entries_.end()) {
      lru_.splice(lru_.begin(), lru_, it->second.age);
      return it->second.bytes->size() == size ? it->second.bytes : nullptr;
    }
  }
  if (folder_.empty()) return nullptr;
  // A disk entry is read whole and checked: a truncated or altered file is a miss.
  FILE* f = std::fopen(path_of(hash).c_str(), "rb");
  if (!f) return nullptr;
  auto bytes = std::make_shared<std::vector<uint8_t>>(size);
  const bool whole = std::fread(bytes->data(), 1, size, f) == size && std::fgetc(f) == EOF;
  std::fclose(f);
  if (!whole || !(content_hash(bytes->data(), size) == hash)) return nullptr;
  keep_in_memory(hash, bytes);
  return bytes;
}

void WeightCache::put(const ContentHash& hash, Bytes bytes) {
  if (!folder_.empty()) {
    // Written under a temporary name and renamed: a crash leaves no half entry.
    const std::string path = path_of(hash);
    struct stat st;
    if (::stat(path.c_str(), &st) != 0) {
      const std::string tmp = path + ".tmp" + std::to_string(::getpid());
      if (FILE* f = std::fopen(tmp.c_str(), "wb")) {
        const bool ok = std::fwrite(bytes->data(), 1, bytes->size(), f) == bytes->size();
        if (std::fclose(f) == 0 && ok)
          std::rename(tmp.c_str(), path.c_str());
        else
          std::remove(tmp.c_str());
      }
    }
  }
  keep_in_memory(hash, std::move(bytes));
}

void WeightCache::keep_in_memory(const ContentHash& hash, Bytes bytes) {
  std::lock_guard lock(mutex_);
  if (bytes->size() > budget_ || entries_.count(hash)) return;
  while (used_ + bytes->size() > budget_ && !lru_.empty()) {
    auto old = entries_.find(lru_.back());
    used_ -= old->second.bytes->size();
    entries_.erase(old);
    lru_.pop_back();
  }
  lru_.push_front(hash);
  used_ += bytes->size();
  entries_.emplace(hash, Entry{std::move(bytes), lru_.begin()});
}

}  // namespace sd::rpc
