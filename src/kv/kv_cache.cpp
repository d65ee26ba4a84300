#include "kv/kv_cache.h"

#include "kv/cache_spec.h"

#include <cstring>

#include "core/fp16.h"

namespace tern {

const char* kv_type_name(KvType t) { return t == KvType::F16 ? "f16" : "f32"; }
size_t kv_type_size(KvType t) { return t == KvType::F16 ? 2 : 4; }

const char* cache_kind_name(CacheKind k) {
  switch (k) {
    case CacheKind::FullAttention: return "full attention";
    case CacheKind::SlidingWindow: return "sliding window";
    case CacheKind::Recurrent: return "recurrent";
  }
  return "?";
}

namespace {
void store_row(void* dst, const float* src, int n, KvType type) {
  if (type == KvType::F32) {
    std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
    return;
  }
  auto* h = static_cast<uint16_t*>(dst);
  for (int i = 0; i < n; ++i) h[i] = float_to_fp16(src[i]);
}
}  // namespace

void KvCache::store(int layer, SeqId seq, int32_t pos, const float* k, const float* v) {
  store_row(key_row(layer, seq, pos), k, shape_.row_elems(), shape_.type);
  store_row(value_row(layer, seq, pos), v, shape_.row_elems(), shape_.type);
}

}  // namespace tern
