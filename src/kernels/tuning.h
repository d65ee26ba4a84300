// kernels/tuning.h — the per-machine tuning record: choices `tern bench
// --tune` measured best on this CPU, which the kernels read once, at their
// first use. Without a record (or with one made on another CPU, or one that
// does not parse) every choice keeps its built-in default, which is correct
// everywhere; a record only changes speed, never results.
//
// The record is a small text file, one fact a line ('#' starts a comment):
//
//   cpu AMD EPYC | AVX2 FMA F16C
//   act_block_bytes avx2 Q4_0 1048576
//
// `cpu` names the machine it was measured on (cpu_identity()); a record whose
// cpu differs is ignored. `act_block_bytes LEVEL TYPE BYTES`: the activation
// bytes the matmul driver passes over each row tile before the next columns
// (MatmulKernels::act_block_bytes) for weights of TYPE at kernel LEVEL.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "gguf/gguf_format.h"
#include "kernels/cpu_features.h"

namespace tern::kernels {

struct TuningRecord {
  std::string cpu;  // cpu_identity() of the machine it was measured on
  struct ActBlock {
    CpuLevel level;
    gguf::GgmlType type;
    size_t bytes;
  };
  std::vector<ActBlock> act_blocks;

  // The entry for (level, type), or nullptr.
  const ActBlock* find(CpuLevel level, gguf::GgmlType type) const;
  // Adds or replaces the entry for (level, type).
  void set(CpuLevel level, gguf::GgmlType type, size_t bytes);
  // Drops the entry for (level, type): that type's default again.
  void erase(CpuLevel level, gguf::GgmlType type);
};

// Bounds of an act_block_bytes entry: below a few blocks of a row, or past
// any cache, a value is a mistake, not a choice.
constexpr size_t kMinActBlockBytes = size_t{4} << 10;
constexpr size_t kMaxActBlockBytes = size_t{1} << 30;

// This machine as a record names it: the CPU's model name and its features.
std::string cpu_identity();

std::string format_tuning(const TuningRecord& record);
// InvalidFile naming the line for anything malformed: an unknown entry, level
// or type, a size out of bounds, a missing cpu line.
Result<TuningRecord> parse_tuning(std::string_view text);

// Where the record lives: $TERN_TUNING when set, else
// $XDG_CACHE_HOME/tern/tuning, else $HOME/.cache/tern/tuning ("" when none
// of these is set).
std::string tuning_path();

// What the kernels use. The first call loads tuning_path() (absent: defaults,
// silently; unreadable, malformed or another CPU's: defaults, with one line
// on stderr saying why). `source` says which: the path, or "" for defaults.
struct ActiveTuning {
  TuningRecord record;
  std::string source;
};
const ActiveTuning& active_tuning();
// Replaces the record in use (tern bench --tune, between measurements; not
// while matmuls run on other threads).
void set_active_tuning(TuningRecord record, std::string source);

// The activation block for weights of `type` at `level`: the record's entry,
// else `default_bytes` (the kernel table's own).
size_t tuned_act_block_bytes(CpuLevel level, gguf::GgmlType type, size_t default_bytes);

}  // namespace tern::kernels
