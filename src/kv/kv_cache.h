// kv/kv_cache.h — the key/value cache seen by the model's attention.
//
// Contract: a cache stores, per layer and per sequence, one key row and one
// value row (n_kv_head head slices encoded as shape().type: core/kv_format.h) per
// position 0..n-1 of that sequence. The model calls reserve() for the positions a batch will write
// before it runs, writes rows through key_row()/value_row(), and attention
// reads the rows of positions [begin, end) of one sequence. Positions of a
// sequence are dense and start at 0. The paged cache of the serving engine
// implements this same interface over a block table.
// Not thread-safe for concurrent reserve/remove; row pointers may be written
// and read from many threads once reserve() has returned.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/ids.h"
#include "core/status.h"
#include "kv/kv_pool.h"

namespace tern {


// Positions [pos0, pos0 + n) of one sequence and layer stored contiguously:
// k, v: [n] rows of n_kv_head head slices in the cache's KvType.
struct KvRows {
  const void* k;
  const void* v;
  int32_t pos0;
  int32_t n;
};

struct KvShape {
  int n_layer = 0;
  int n_kv_head = 0;
  int head_dim = 0;
  KvType type = KvType::F32;
  int row_elems() const { return n_kv_head * head_dim; }
  size_t row_bytes() const { return kv_row_bytes(type, n_kv_head, head_dim); }
};

class KvCache {
 public:
  virtual ~KvCache() = default;

  const KvShape& shape() const { return shape_; }

  // Makes room for positions [0, n_positions) of `seq`, keeping what is stored.
  // OutOfRange when the cache cannot hold that many (names the limit).
  virtual Status reserve(SeqId seq, int32_t n_positions) = 0;
  // Positions of `seq` written so far (the next position to write); 0 for a
  // sequence the cache has never seen, including ids it cannot hold.
  virtual int32_t n_positions(SeqId seq) const = 0;
  // Marks positions [0, n) as valid after the model wrote them.
  virtual void set_n_positions(SeqId seq, int32_t n) = 0;
  // Drops positions >= n of `seq` (n = 0 frees the sequence).
  virtual void truncate(SeqId seq, int32_t n) = 0;

  // [n_kv_head][head_dim] rows of shape().type; pos must be < the reserved size.
  virtual void* key_row(int layer, SeqId seq, int32_t pos) = 0;
  virtual void* value_row(int layer, SeqId seq, int32_t pos) = 0;
  // Writes one position's key and value rows (f32, converted to the cache type).
  void store(int layer, SeqId seq, int32_t pos, const float* k, const float* v);

  // Appends to `out` the contiguous runs that hold positions [begin, end) of
  // `seq` in `layer`, in position order (attention reads through these).
  virtual void rows(int layer, SeqId seq, int32_t begin, int32_t end, std::vector<KvRows>& out) = 0;

  // A human picture of the cache state (for debugging and `dump` commands).
  virtual std::string dump() const = 0;

 protected:
  explicit KvCache(KvShape shape) : shape_(shape) {}
  KvShape shape_;
};


}  // namespace tern
