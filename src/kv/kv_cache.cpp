#include "kv/kv_cache.h"

#include "kv/cache_spec.h"

namespace tern {

const char* cache_kind_name(CacheKind k) {
  switch (k) {
    case CacheKind::FullAttention: return "full attention";
    case CacheKind::SlidingWindow: return "sliding window";
    case CacheKind::Recurrent: return "recurrent";
  }
  return "?";
}

void KvCache::store(int layer, SeqId seq, int32_t pos, const float* k, const float* v) {
  kv_encode_row(shape_.type, k, shape_.n_kv_head, shape_.head_dim, key_row(layer, seq, pos));
  kv_encode_row(shape_.type, v, shape_.n_kv_head, shape_.head_dim, value_row(layer, seq, pos));
}

}  // namespace tern
