#include "grammar/mask_cache.h"

namespace tern::grammar {

MaskCache::Bits MaskCache::find(const std::string& key) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = map_.find(key);
  if (it == map_.end()) return nullptr;
  ++hits_;
  return it->second;
}

void MaskCache::insert(const std::string& key, Bits bits) {
  const size_t cost = key.size() + bits->size() * sizeof(uint64_t);
  std::lock_guard<std::mutex> lock(mu_);
  if (!map_.emplace(key, std::move(bits)).second) return;
  order_.push_back(key);
  bytes_ += cost;
  while (bytes_ > max_bytes_ && order_.size() > 1) {
    auto old = map_.find(order_.front());
    bytes_ -= order_.front().size() + old->second->size() * sizeof(uint64_t);
    map_.erase(old);
    order_.pop_front();
  }
}

size_t MaskCache::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return map_.size();
}

size_t MaskCache::hits() const {
  std::lock_guard<std::mutex> lock(mu_);
  return hits_;
}

}  // namespace tern::grammar
