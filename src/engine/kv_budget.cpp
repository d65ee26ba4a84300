#include "engine/kv_budget.h"

#include "core/format_bytes.h"
#include "core/log.h"
#include "core/memory_info.h"

namespace tern {

Status check_kv_fits_memory(uint64_t kv_bytes, const std::string& what, const std::string& remedy) {
  const int64_t available = available_memory_bytes();
  if (available <= 0 || kv_bytes <= static_cast<uint64_t>(available)) return Status::ok();
  return error(ErrorKind::InvalidArgument, what + " (" + format_bytes(kv_bytes) + ") is more than the " +
                                               format_bytes(static_cast<uint64_t>(available)) +
                                               " of memory available now (MemAvailable); " + remedy);
}

void warn_past_training_context(const HParams& hp, int64_t n_ctx) {
  if (n_ctx <= hp.n_ctx_train) return;
  TERN_LOG_WARN("engine: context of %lld tokens is past the %d the model was trained on; output past %d tokens "
                "may degrade",
                static_cast<long long>(n_ctx), hp.n_ctx_train, hp.n_ctx_train);
}

}  // namespace tern
