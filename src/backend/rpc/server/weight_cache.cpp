#include "backend/rpc/server/weight_cache.h"

#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include <cstdio>
#include <iterator>
#include <vector>

namespace sd::rpc {

namespace {

// A tensor standing for a byte range of a buffer, for Buffer::set/get.
Tensor range_of(Buffer& b, uint64_t offset) {
  Tensor t;
  t.buffer = &b;
  t.data = static_cast<uint8_t*>(b.base()) + offset;
  return t;
}

}  // namespace

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

size_t WeightCache::device_bytes(uint32_t device) const {
  std::lock_guard lock(mutex_);
  size_t n = 0;
  for (const auto& [key, entry] : entries_)
    if (key.device == device) n += entry.buffer->size();
  return n;
}

void WeightCache::evict(uint32_t device, size_t bytes) {
  std::lock_guard lock(mutex_);
  const size_t target = used_ > bytes ? used_ - bytes : 0;
  for (auto it = lru_.end(); it != lru_.begin() && used_ > target;) {
    --it;
    if (it->device == device) it = drop(it);
  }
}

std::list<WeightCache::Key>::iterator WeightCache::drop(std::list<Key>::iterator age) {
  auto entry = entries_.find(*age);
  used_ -= entry->second.buffer->size();
  entries_.erase(entry);
  return lru_.erase(age);
}

std::unique_ptr<Buffer> WeightCache::take(const ContentHash& hash, size_t size, uint32_t device) {
  std::lock_guard lock(mutex_);
  auto it = entries_.find(Key{hash, device});
  if (it == entries_.end() || it->second.buffer->size() != size) return nullptr;
  std::unique_ptr<Buffer> b = std::move(it->second.buffer);
  lru_.erase(it->second.age);
  entries_.erase(it);
  used_ -= size;
  return b;
}

void WeightCache::give(const ContentHash& hash, uint32_t device, std::unique_ptr<Buffer> buffer) {
  std::lock_guard lock(mutex_);
  const Key key{hash, device};
  if (buffer->size() > budget_ || entries_.count(key)) return;
  while (used_ + buffer->size() > budget_ && !lru_.empty()) drop(std::prev(lru_.end()));
  lru_.push_front(key);
  used_ += buffer->size();
  entries_.emplace(key, Entry{std::move(buffer), lru_.begin()});
}

bool WeightCache::load(const ContentHash& hash, Buffer& b, uint64_t offset, size_t size) {
  if (folder_.empty()) return false;
  FILE* f = std::fopen(path_of(hash).c_str(), "rb");
  if (!f) return false;
  // Read in pieces into the buffer while hashing; a short, long or altered file is a miss
  // (the client then sends the bytes, which overwrite whatever was read).
  XXH3_state_t* state = XXH3_createState();
  XXH3_128bits_reset(state);
  std::vector<uint8_t> piece(std::min(size, kChunkBytes * 8));
  size_t done = 0;
  bool ok = true;
  while (ok && done < size) {
    const size_t n = std::min(piece.size(), size - done);
    ok = std::fread(piece.data(), 1, n, f) == n;
    if (!ok) break;
    Tensor t = range_of(b, offset + done);
    b.set(t, piece.data(), 0, n);
    XXH3_128bits_update(state, piece.data(), n);
    done += n;
  }
  ok = ok && std::fgetc(f) == EOF;
  std::fclose(f);
  const XXH128_hash_t h = XXH3_128bits_digest(state);
  XXH3_freeState(state);
  return ok && ContentHash{h.high64, h.low64} == hash;
}

void WeightCache::store(const ContentHash& hash, Buffer& b, uint64_t offset, size_t size) {
  if (folder_.empty()) return;
  const std::string path = path_of(hash);
  struct stat st;
  if (::stat(path.c_str(), &st) == 0 && static_cast<size_t>(st.st_size) == size) return;
  const std::string tmp = path + ".tmp" + std::to_string(::getpid());
  FILE* f = std::fopen(tmp.c_str(), "wb");
  if (!f) return;  // a cache that cannot be written is only slower
  std::vector<uint8_t> piece(std::min(size, kChunkBytes * 8));
  bool ok = true;
  for (size_t done = 0; ok && done < size;) {
    const size_t n = std::min(piece.size(), size - done);
    Tensor t = range_of(b, offset + done);
    b.get(t, piece.data(), 0, n);
    ok = std::fwrite(piece.data(), 1, n, f) == n;
    done += n;
  }
  if (std::fclose(f) == 0 && ok)
    std::rename(tmp.c_str(), path.c_str());
  else
    std::remove(tmp.c_str());
}

}  // namespace sd::rpc
