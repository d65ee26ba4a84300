#include <cstddef>
#include <new>
#include <string>
#include <vector>

#include "core/assert.h"
#include "core/format_bytes.h"
#include "kv/kv_cache.h"

namespace tern {
namespace {

class ContiguousKvCache final : public KvCache {
 public:
  ContiguousKvCache(KvShape shape, int n_seq_max, int32_t max_positions)
      : KvCache(shape), max_positions_(max_positions), slots_(n_seq_max) {}

  Status reserve(SeqId seq, int32_t n_positions) override {
    if (seq.value < 0 || seq.value >= static_cast<int>(slots_.size()))
      return error(ErrorKind::OutOfRange, "sequence id " + std::to_string(seq.value) + " is outside the cache's " +
                                              std::to_string(slots_.size()) + " slots");
    if (n_positions > max_positions_)
      return error(ErrorKind::OutOfRange, "context of " + std::to_string(n_positions) +
                                              " tokens exceeds the KV cache size of " + std::to_string(max_positions_) +
                                              " (raise the context size)");
    Slot& s = slots_[seq.value];
    if (s.keys.empty()) {
      const size_t n = contiguous_kv_bytes(shape_, max_positions_) / 2;
      try {  // max_positions is the user's -c: running out of memory is their error to fix, not an abort
        s.keys.assign(n, std::byte{0});
        s.values.assign(n, std::byte{0});
      } catch (const std::bad_alloc&) {
        s.keys = {};
        s.values = {};
        return error(ErrorKind::OutOfRange, "out of memory for a KV cache of " + std::to_string(max_positions_) +
                                                " positions (" + format_bytes(2 * n) + "); lower the context size");
      }
    }
    s.n_reserved = std::max(s.n_reserved, n_positions);
    return Status::ok();
  }

  int32_t n_positions(SeqId seq) const override {
    if (seq.value < 0 || seq.value >= static_cast<int>(slots_.size())) return 0;
    return slot(seq).n_valid;
  }
  void set_n_positions(SeqId seq, int32_t n) override {
    TERN_ASSERT(n <= slot(seq).n_reserved);
    slot(seq).n_valid = n;
  }
  void truncate(SeqId seq, int32_t n) override {
    Slot& s = slot(seq);
    if (n <= 0) {  // the slot is free again; its rows stay allocated for the next sequence (no re-zeroing)
      s.n_valid = 0;
      s.n_reserved = 0;
      return;
    }
    s.n_valid = std::min(s.n_valid, n);
  }

  void* key_row(int layer, SeqId seq, int32_t pos) override { return row(slot(seq).keys, layer, seq, pos); }
  void* value_row(int layer, SeqId seq, int32_t pos) override { return row(slot(seq).values, layer, seq, pos); }

  void rows(int layer, SeqId seq, int32_t begin, int32_t end, std::vector<KvRows>& out) override {
    if (begin >= end) return;
    out.push_back({key_row(layer, seq, begin), value_row(layer, seq, begin), begin, end - begin});
  }

  std::string dump() const override {
    std::string out = "contiguous kv cache: max_positions=" + std::to_string(max_positions_) + "\n";
    for (size_t i = 0; i < slots_.size(); ++i)
      if (!slots_[i].keys.empty())
        out += "  seq " + std::to_string(i) + ": n_valid=" + std::to_string(slots_[i].n_valid) +
               " n_reserved=" + std::to_string(slots_[i].n_reserved) + "\n";
    return out;
  }

 private:
  struct Slot {
    std::vector<std::byte> keys;    // [n_layer][max_positions][row_elems] of shape_.type
    std::vector<std::byte> values;  // [n_layer][max_positions][row_elems] of shape_.type
    int32_t n_valid = 0;
    int32_t n_reserved = 0;
  };

  Slot& slot(SeqId seq) {
    TERN_ASSERT(seq.value >= 0 && seq.value < static_cast<int>(slots_.size()));
    return slots_[seq.value];
  }
  const Slot& slot(SeqId seq) const { return const_cast<ContiguousKvCache*>(this)->slot(seq); }

  void* row(std::vector<std::byte>& buf, int layer, SeqId seq, int32_t pos) {
    TERN_ASSERT(pos >= 0 && pos < slot(seq).n_reserved && layer >= 0 && layer < shape_.n_layer);
    return buf.data() + (static_cast<size_t>(layer) * max_positions_ + pos) * shape_.row_bytes();
  }

  int32_t max_positions_;
  std::vector<Slot> slots_;
};

}  // namespace

uint64_t contiguous_kv_bytes(const KvShape& shape, int64_t n_positions) {
  return 2 * static_cast<uint64_t>(shape.n_layer) * static_cast<uint64_t>(n_positions) * shape.row_bytes();
}

std::unique_ptr<KvCache> make_contiguous_kv_cache(KvShape shape, int n_seq_max, int32_t max_positions) {
  return std::make_unique<ContiguousKvCache>(shape, n_seq_max, max_positions);
}

}  // namespace tern
