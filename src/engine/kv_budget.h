// engine/kv_budget.h — the checks on the KV memory and context a run asks for,
// shared by single-sequence generation (`tern run`) and the serving engine
// (`tern batch`, `tern serve`) so both refuse with the same words.
//
// Why check at all: a KV cache is address space until it is written, so an
// impossible size is accepted at start and only fails later — as an abort
// (std::bad_alloc) or as the OOM killer ending a busy server. Refusing up
// front, naming the size and the memory available, turns that into a flag to fix.
#pragma once

#include <cstdint>
#include <string>

#include "core/status.h"
#include "model/hparams.h"

namespace tern {

// InvalidArgument when kv_bytes exceeds MemAvailable: "<what> (<size>) is more
// than the <avail> of memory available now (MemAvailable); <remedy>". OK when
// the available memory is unknown.
Status check_kv_fits_memory(uint64_t kv_bytes, const std::string& what, const std::string& remedy);

// A warning on stderr (the log) when n_ctx is past the model's training
// context: allowed, but the model was never trained on such positions.
void warn_past_training_context(const HParams& hp, int64_t n_ctx);

}  // namespace tern
