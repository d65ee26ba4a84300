// tools/tern/engine_flags.h — the serving-engine flags shared by `tern batch`
// and `tern serve`, and the parsing of their compound values.
#pragma once

#include <string>

#include "args.h"
#include "core/status.h"
#include "tern/engine.h"

namespace tern::cli {

// Small-memory operation (shared with `tern run`): --max-rss, --mlock, --no-mmap.
struct MemoryFlags {
  std::string max_rss;  // "900M", "4G"
  bool mlock = false;
  bool no_mmap = false;
  void add_to(ArgParser& args);
  Status apply(EngineConfig& config) const;
};

struct EngineFlags {
  std::string kv_memory;        // "4G", "512M", "1073741824" or a fraction "0.3"
  std::string kv_type = "f16";
  std::string tenant_weights;   // "a=2,b=1"
  bool no_prefix_cache = false;
  int block_size = 16;
  int max_num_seqs = 64;
  int max_batched_tokens = 512;
  int n_ctx = 0;
  int n_threads = 0;
  std::string backend = "cpu";
  std::string policy = "fcfs";
  std::string preemption = "recompute";
  std::string swap_compression = "none";
  std::string draft;  // speculative decoding: "" / "none" off, "ngram" prompt lookup, else a draft GGUF
  int spec_k = 4;
  int spec_tree = 1;
  std::string streaming = "off";  // engine/streaming.h's text form
  std::string kv_evict = "off";   // the same file's eviction form
  MemoryFlags memory;

  static constexpr const char* kStreamingHelp = "generation past the context in constant KV memory: SINKS,WINDOW keeps the first SINKS positions and the last WINDOW (StreamingLLM, e.g. 4,1020), shift[:SINKS] drops the older half after the sinks when the context is full (context shift), off (default)";
  static constexpr const char* kKvEvictHelp = "lossy KV eviction by importance, in whole KV blocks: h2o:BUDGET,RECENT keeps at most BUDGET positions once the prompt is in, the last RECENT and the blocks attended to most (H2O heavy hitters); snapkv:BUDGET,WINDOW chooses once after the prompt by its last WINDOW queries (SnapKV); off (default)";

  static constexpr const char* kDraftHelp = "speculative decoding proposer: none (default), ngram (prompt lookup), a draft model's GGUF (same vocabulary) or self:TYPE (the model re-encoded, e.g. self:Q4_0)";
  static constexpr const char* kSpecKHelp = "most proposed tokens per sequence and step, 1..16 (default 4)";
  static constexpr const char* kSpecTreeHelp = "candidates per proposed position, 1..8 (default 1, a chain): W > 1 verifies a token tree (the draft's next W-1 choices at each position, or W different prompt-lookup continuations)";

  void add_to(ArgParser& args);
  // Fills `config` (model_path is left to the caller).
  Status apply(EngineConfig& config) const;
};

// --draft, --spec-k and --spec-tree into `config` (shared with `tern run`).
Status apply_spec_flags(const std::string& draft, int spec_k, int spec_tree, EngineConfig& config);

// "4G" / "512M" / "64K" / "123" (bytes, units of 1024) or, where allowed, "0.25" (a fraction).
struct SizeArg {
  int64_t bytes = 0;     // 0 when a fraction was given
  double fraction = 0;
};
Result<SizeArg> parse_size(const std::string& flag, const std::string& text, bool fraction_allowed);

// --kv-memory: bytes or a fraction of available RAM.
Status parse_kv_memory(const std::string& text, EngineConfig& config);

// --grammar-file F (GBNF), --json-schema-file F, --regex R, --json: at most
// one; files are read whole (regular files, up to 1 GiB).
Status constraint_from_flags(const std::string& grammar_file, const std::string& schema_file,
                             const std::string& regex, bool json_object, OutputConstraint& out);

}  // namespace tern::cli
