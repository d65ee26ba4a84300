#include "kv/state_pool.h"

#include <string>

#include "core/format_bytes.h"

namespace tern {

Result<std::unique_ptr<StatePool>> StatePool::create(const KvCacheSpec& spec, int n_slots) {
  if (spec.kind != CacheKind::Recurrent || spec.n_layer < 1 || spec.state_floats < 1 || n_slots < 1)
    return error(ErrorKind::InvalidArgument,
                 "state pool: needs a recurrent group with a state and >= 1 slot");
  std::unique_ptr<StatePool> p(new StatePool());
  KvPoolView& v = p->view_;
  v.n_blocks = n_slots;
  v.type = KvType::F32;
  v.n_layer = spec.n_layer;
  v.block_size = 1;
  v.row_bytes = spec.row_bytes();
  v.block_bytes = static_cast<size_t>(spec.n_layer) * v.row_bytes;
  const size_t bytes = v.block_bytes * static_cast<size_t>(n_slots);
  p->mem_.reset(static_cast<std::byte*>(std::calloc(bytes, 1)));
  if (!p->mem_)
    return error(ErrorKind::IoError, "cannot allocate " + format_bytes(bytes) + " for " +
                                         std::to_string(n_slots) + " recurrent states; lower --max-num-seqs");
  v.base = p->mem_.get();
  return p;
}

}  // namespace tern
