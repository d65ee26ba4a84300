#include "kv/paged_kv_cache.h"

#include <lz4.h>
#include <sys/mman.h>
#include <zstd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <limits>
#include <new>
#include <unordered_map>

#include "core/assert.h"
#include "core/format_bytes.h"
#include "core/hash.h"

namespace tern {

Result<SwapCompression> parse_swap_compression(std::string_view name) {
  if (name == "none") return SwapCompression::None;
  if (name == "lz4") return SwapCompression::Lz4;
  if (name == "zstd") return SwapCompression::Zstd;
  return error(ErrorKind::InvalidArgument,
               "unknown swap compression '" + std::string(name) + "' (expected none, lz4 or zstd)");
}

size_t paged_kv_block_bytes(const KvShape& shape, int block_size) {
  return static_cast<size_t>(shape.n_layer) * 2 * static_cast<size_t>(block_size) * shape.row_bytes();
}

int paged_kv_blocks_for_bytes(const KvShape& shape, int block_size, int64_t bytes) {
  const size_t block_bytes = paged_kv_block_bytes(shape, block_size);
  if (block_bytes == 0 || bytes <= 0) return 0;
  const uint64_t n = static_cast<uint64_t>(bytes) / block_bytes;
  return static_cast<int>(std::min<uint64_t>(n, std::numeric_limits<int>::max()));
}

namespace {

const char* compression_name(SwapCompression c) {
  switch (c) {
    case SwapCompression::None:
      return "none";
    case SwapCompression::Lz4:
      return "lz4";
    case SwapCompression::Zstd:
      return "zstd";
  }
  return "?";
}

}  // namespace

namespace {

// The pool as address space only (MAP_NORESERVE): pages become memory when a
// block is first written, so a large --kv-memory costs nothing idle. The
// mapping can still fail (RLIMIT_AS, vm.overcommit_memory=2), and the size is
// the user's choice, so that is an error to report, not an invariant.
Result<std::byte*> map_pool(size_t pool_bytes, int n_blocks) {
  if (pool_bytes == 0) return static_cast<std::byte*>(nullptr);
  void* p =
      mmap(nullptr, pool_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED)
    return error(ErrorKind::IoError, "cannot map a KV pool of " + format_bytes(pool_bytes) + " (" +
                                         std::to_string(n_blocks) + " blocks): " + std::strerror(errno) +
                                         "; lower --kv-memory");
  return static_cast<std::byte*>(p);
}

}  // namespace

struct PagedKvCache::Impl {
  Impl(const KvShape& shape, int n_blocks, int block_size_, bool prefix_caching, std::byte* pool_)
      : bm(n_blocks, block_size_, prefix_caching),
        block_size(block_size_),
        row_bytes(shape.row_bytes()),
        n_layer(shape.n_layer),
        block_bytes(paged_kv_block_bytes(shape, block_size_)),
        pool_bytes(block_bytes * static_cast<size_t>(n_blocks)),
        pool(pool_) {}
  ~Impl() {
    if (pool) munmap(pool, pool_bytes);
  }
  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;

  std::byte* block_data(BlockId b) const { return pool + static_cast<size_t>(b.value) * block_bytes; }
  // Row `slot` of K (kv = 0) or V (kv = 1) of `layer` in block b.
  std::byte* row(BlockId b, int layer, int kv, int32_t slot) const {
    return block_data(b) + ((static_cast<size_t>(layer) * 2 + kv) * block_size + slot) * row_bytes;
  }
  std::byte* seq_row(int layer, SeqId seq, int32_t pos, int kv) const {
    const auto table = bm.block_table(seq);
    TERN_ASSERT(layer >= 0 && layer < n_layer && pos >= 0 &&
                pos / block_size < static_cast<int32_t>(table.size()));
    return row(table[pos / block_size], layer, kv, pos % block_size);
  }

  Status compress_block(const std::byte* src, SwapCompression c, SwappedKv& out) const;
  Status decompress_block(const std::byte* src, size_t n, SwapCompression c, std::byte* dst) const;

  BlockManager bm;
  int block_size;
  size_t row_bytes;
  int n_layer;
  size_t block_bytes;
  size_t pool_bytes;
  std::byte* pool = nullptr;  // [n_blocks][n_layer][K|V][block_size][n_kv_head][head_dim], mmap'ed
  std::unordered_map<SeqId, int32_t> n_valid;  // positions written (absent = 0)
};

PagedKvCache::PagedKvCache(KvShape shape, int n_blocks, int block_size, bool prefix_caching, std::byte* pool)
    : KvCache(shape), impl_(std::make_unique<Impl>(shape, n_blocks, block_size, prefix_caching, pool)) {}

PagedKvCache::PagedKvCache(KvShape shape, int n_blocks, int block_size, bool prefix_caching)
    : PagedKvCache(shape, n_blocks, block_size, prefix_caching, [&] {
        auto pool = map_pool(paged_kv_block_bytes(shape, block_size) * static_cast<size_t>(n_blocks), n_blocks);
        TERN_ASSERT_MSG(pool.is_ok(), "paged kv cache: mmap of a fixed-size block pool failed");
        return pool.value();
      }()) {}

Result<std::unique_ptr<PagedKvCache>> PagedKvCache::create(KvShape shape, int n_blocks, int block_size,
                                                          bool prefix_caching) {
  const size_t pool_bytes = paged_kv_block_bytes(shape, block_size) * static_cast<size_t>(n_blocks);
  auto pool = map_pool(pool_bytes, n_blocks);
  if (!pool) return pool.status();
  try {  // the block manager's per-block bookkeeping is sized by the user too
    return std::unique_ptr<PagedKvCache>(new PagedKvCache(shape, n_blocks, block_size, prefix_caching, pool.value()));
  } catch (const std::bad_alloc&) {
    if (pool.value()) munmap(pool.value(), pool_bytes);
    return error(ErrorKind::IoError, "out of memory for the bookkeeping of " + std::to_string(n_blocks) +
                                         " KV blocks; lower --kv-memory");
  }
}

PagedKvCache::~PagedKvCache() = default;

KvPoolView PagedKvCache::view() const {
  const Impl& m = *impl_;
  KvPoolView v;
  v.base = m.pool;
  v.n_blocks = m.bm.n_blocks_total();
  v.type = shape_.type;
  v.n_layer = shape_.n_layer;
  v.block_size = m.block_size;
  v.n_kv_head = shape_.n_kv_head;
  v.head_dim = shape_.head_dim;
  v.row_bytes = m.row_bytes;
  v.block_bytes = m.block_bytes;
  return v;
}

BlockManager& PagedKvCache::blocks() { return impl_->bm; }
const BlockManager& PagedKvCache::blocks() const { return impl_->bm; }
int PagedKvCache::block_size() const { return impl_->block_size; }

Status PagedKvCache::reserve(SeqId seq, int32_t n_positions) {
  Impl& m = *impl_;
  if (n_positions < 0) return error(ErrorKind::OutOfRange, "negative position count");
  if (!m.bm.allocate(seq, n_positions)) {
    return error(ErrorKind::OutOfRange, "KV cache full: sequence " + std::to_string(seq.value) + " needs " +
                                            std::to_string(m.bm.n_blocks_needed(seq, n_positions)) +
                                            " more blocks, " + std::to_string(m.bm.n_blocks_free()) +
                                            " free");
  }
  // Copy-on-write for every block the coming positions touch (shared after a
  // fork, or cached and so immutable).
  const int32_t first = this->n_positions(seq);
  if (first >= n_positions) return Status::ok();
  for (int32_t i_block = first / m.block_size; i_block <= (n_positions - 1) / m.block_size; ++i_block) {
    bool out_of_blocks = false;
    const auto copy = m.bm.prepare_write(seq, i_block * m.block_size, &out_of_blocks);
    if (out_of_blocks)
      return error(ErrorKind::OutOfRange, "KV cache full: sequence " + std::to_string(seq.value) +
                                              " needs 1 more block (copy-on-write), 0 free");
    if (copy) std::memcpy(m.block_data(copy->dst), m.block_data(copy->src), m.block_bytes);
  }
  return Status::ok();
}

int32_t PagedKvCache::n_positions(SeqId seq) const {
  auto it = impl_->n_valid.find(seq);
  return it == impl_->n_valid.end() ? 0 : it->second;
}

void PagedKvCache::set_n_positions(SeqId seq, int32_t n) {
  Impl& m = *impl_;
  TERN_ASSERT(n >= 0 && n <= static_cast<int32_t>(m.bm.block_table(seq).size()) * m.block_size);
  if (n == 0)
    m.n_valid.erase(seq);
  else
    m.n_valid[seq] = n;
}

void PagedKvCache::truncate(SeqId seq, int32_t n) {
  impl_->bm.truncate(seq, n);
  const int32_t kept = std::min(n_positions(seq), std::max(n, 0));
  if (kept == 0)
    impl_->n_valid.erase(seq);
  else
    impl_->n_valid[seq] = kept;
}

void* PagedKvCache::key_row(int layer, SeqId seq, int32_t pos) { return impl_->seq_row(layer, seq, pos, 0); }
void* PagedKvCache::value_row(int layer, SeqId seq, int32_t pos) {
  return impl_->seq_row(layer, seq, pos, 1);
}

void PagedKvCache::rows(int layer, SeqId seq, int32_t begin, int32_t end, std::vector<KvRows>& out) {
  const Impl& m = *impl_;
  if (begin >= end) return;
  const auto table = m.bm.block_table(seq);
  TERN_ASSERT(layer >= 0 && layer < m.n_layer && begin >= 0 &&
              (end - 1) / m.block_size < static_cast<int32_t>(table.size()));
  // One run per block: blocks of one layer are block_bytes apart, never adjacent.
  for (int32_t pos = begin; pos < end;) {
    const BlockId b = table[pos / m.block_size];
    const int32_t slot = pos % m.block_size;
    const int32_t n = std::min(end - pos, m.block_size - slot);
    out.push_back({m.row(b, layer, 0, slot), m.row(b, layer, 1, slot), pos, n});
    pos += n;
  }
}

int32_t PagedKvCache::attach_cached_prefix(SeqId seq, std::span<const TokenId> tokens, uint64_t salt) {
  Impl& m = *impl_;
  TERN_ASSERT(m.bm.block_table(seq).empty());
  const int32_t n = m.bm.find_cached_prefix(tokens, salt);
  // Attaching only moves cached blocks out of the LRU, so it cannot run short.
  const bool ok = m.bm.allocate(seq, n, tokens, n, salt);
  TERN_ASSERT(ok);
  set_n_positions(seq, n);
  return n;
}

void PagedKvCache::cache_blocks(SeqId seq, std::span<const TokenId> tokens, uint64_t salt, int32_t limit) {
  const int32_t n = std::min({n_positions(seq), static_cast<int32_t>(tokens.size()), limit});
  impl_->bm.cache_blocks(seq, tokens, n, salt);
}

void PagedKvCache::fork(SeqId src, SeqId dst) {
  const int32_t n = n_positions(src);
  impl_->bm.fork(src, dst, n);
  set_n_positions(dst, n);
}

// ---- swap ------------------------------------------------------------------

namespace {
std::atomic<bool> g_corrupt_swaps{false};
}  // namespace

void corrupt_swaps_for_testing(bool on) { g_corrupt_swaps.store(on); }
bool swaps_corrupted_for_testing() { return g_corrupt_swaps.load(); }

Status PagedKvCache::Impl::compress_block(const std::byte* src, SwapCompression c, SwappedKv& out) const {
  out.checksums.push_back(checksum64(src, block_bytes));
  const size_t at = out.data.size();
  size_t n = 0;
  switch (c) {
    case SwapCompression::None:
      out.data.insert(out.data.end(), src, src + block_bytes);
      n = block_bytes;
      break;
    case SwapCompression::Lz4: {
      if (block_bytes > static_cast<size_t>(LZ4_MAX_INPUT_SIZE))
        return error(ErrorKind::Unsupported, "KV block too large for lz4");
      const int bound = LZ4_compressBound(static_cast<int>(block_bytes));
      out.data.resize(at + static_cast<size_t>(bound));
      const int r = LZ4_compress_default(reinterpret_cast<const char*>(src),
                                         reinterpret_cast<char*>(out.data.data() + at),
                                         static_cast<int>(block_bytes), bound);
      if (r <= 0) return error(ErrorKind::Internal, "lz4 compression of a KV block failed");
      n = static_cast<size_t>(r);
      break;
    }
    case SwapCompression::Zstd: {
      const size_t bound = ZSTD_compressBound(block_bytes);
      out.data.resize(at + bound);
      const size_t r = ZSTD_compress(out.data.data() + at, bound, src, block_bytes, 1);
      if (ZSTD_isError(r))
        return error(ErrorKind::Internal,
                     std::string("zstd compression of a KV block failed: ") + ZSTD_getErrorName(r));
      n = r;
      break;
    }
  }
  if (n > std::numeric_limits<uint32_t>::max())
    return error(ErrorKind::Unsupported, "KV block too large to swap");
  out.data.resize(at + n);
  out.block_sizes.push_back(static_cast<uint32_t>(n));
  if (g_corrupt_swaps.load() && n > 0) out.data[at + n / 2] ^= std::byte{0x10};
  return Status::ok();
}

Status PagedKvCache::Impl::decompress_block(const std::byte* src, size_t n, SwapCompression c,
                                            std::byte* dst) const {
  switch (c) {
    case SwapCompression::None:
      if (n != block_bytes) break;
      std::memcpy(dst, src, n);
      return Status::ok();
    case SwapCompression::Lz4: {
      if (n > static_cast<size_t>(std::numeric_limits<int>::max())) break;
      // _safe never writes past dst + block_bytes nor reads past src + n, whatever the input.
      const int r = LZ4_decompress_safe(reinterpret_cast<const char*>(src), reinterpret_cast<char*>(dst),
                                        static_cast<int>(n), static_cast<int>(block_bytes));
      if (r >= 0 && static_cast<size_t>(r) == block_bytes) return Status::ok();
      break;
    }
    case SwapCompression::Zstd: {
      const size_t r = ZSTD_decompress(dst, block_bytes, src, n);
      if (!ZSTD_isError(r) && r == block_bytes) return Status::ok();
      break;
    }
  }
  return error(ErrorKind::Internal, std::string("swapped KV data is corrupt (") + compression_name(c) +
                                        " block of " + std::to_string(n) + " bytes does not restore " +
                                        std::to_string(block_bytes) + " bytes)");
}

Result<SwappedKv> PagedKvCache::swap_out(SeqId seq, SwapCompression compression) {
  Impl& m = *impl_;
  SwappedKv out;
  out.n_positions = n_positions(seq);
  out.compression = compression;
  const auto table = m.bm.block_table(seq);
  const size_t n_blocks = static_cast<size_t>((out.n_positions + m.block_size - 1) / m.block_size);
  TERN_ASSERT(n_blocks <= table.size());
  out.raw_bytes = n_blocks * m.block_bytes;
  if (compression == SwapCompression::None) out.data.reserve(out.raw_bytes);
  out.block_sizes.reserve(n_blocks);
  for (size_t i = 0; i < n_blocks; ++i)
    TERN_RETURN_IF_ERROR(m.compress_block(m.block_data(table[i]), compression, out));
  truncate(seq, 0);
  return out;
}

Status PagedKvCache::swap_in(SeqId seq, const SwappedKv& swapped) {
  Impl& m = *impl_;
  TERN_ASSERT(m.bm.block_table(seq).empty());
  // Check the envelope before taking blocks, so bad data changes nothing.
  const int32_t n_pos = swapped.n_positions;
  const size_t n_blocks = n_pos > 0 ? static_cast<size_t>((n_pos + m.block_size - 1) / m.block_size) : 0;
  size_t n_stored = 0;
  for (uint32_t s : swapped.block_sizes) n_stored += s;
  const bool known = swapped.compression == SwapCompression::None ||
                     swapped.compression == SwapCompression::Lz4 ||
                     swapped.compression == SwapCompression::Zstd;
  if (n_pos < 0 || !known || swapped.block_sizes.size() != n_blocks || n_stored != swapped.data.size() ||
      swapped.checksums.size() != n_blocks || swapped.raw_bytes != n_blocks * m.block_bytes)
    return error(ErrorKind::Internal, "swapped KV data is corrupt (" +
                                          std::to_string(swapped.block_sizes.size()) + " blocks, " +
                                          std::to_string(swapped.data.size()) + " bytes for " +
                                          std::to_string(n_pos) + " positions)");
  if (!m.bm.allocate(seq, n_pos))
    return error(ErrorKind::OutOfRange, "KV cache full: sequence " + std::to_string(seq.value) + " needs " +
                                            std::to_string(n_blocks) + " blocks to swap in, " +
                                            std::to_string(m.bm.n_blocks_free()) + " free");
  const auto table = m.bm.block_table(seq);
  size_t at = 0;
  for (size_t i = 0; i < n_blocks; ++i) {
    Status st = m.decompress_block(swapped.data.data() + at, swapped.block_sizes[i], swapped.compression,
                                   m.block_data(table[i]));
    // Restored bytes that differ from what was swapped out would decode as wrong tokens.
    if (st.is_ok() && checksum64(m.block_data(table[i]), m.block_bytes) != swapped.checksums[i])
      st = error(ErrorKind::Internal, "swapped KV data is corrupt (block " + std::to_string(i) + " of " +
                                          std::to_string(n_blocks) + " fails its checksum)");
    if (!st.is_ok()) {
      m.bm.truncate(seq, 0);
      return st;
    }
    at += swapped.block_sizes[i];
  }
  set_n_positions(seq, n_pos);
  return Status::ok();
}

std::string PagedKvCache::dump() const {
  const Impl& m = *impl_;
  std::string out = "paged kv cache: " + std::string(kv_type_name(shape_.type)) +
                    " n_layer=" + std::to_string(m.n_layer) +
                    " block_bytes=" + std::to_string(m.block_bytes) +
                    " pool_bytes=" + std::to_string(m.pool_bytes) + "\n  positions:";
  std::vector<std::pair<SeqId, int32_t>> seqs(m.n_valid.begin(), m.n_valid.end());
  std::sort(seqs.begin(), seqs.end());
  for (const auto& [s, n] : seqs) out += " seq" + std::to_string(s.value) + "=" + std::to_string(n);
  return out + "\n" + m.bm.dump();
}

}  // namespace tern
