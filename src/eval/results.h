// eval/results.h — the result records `tern report` assembles, as plain
// structs, with their JSON form:
//   - QuantEval: what `tern eval quant --json` writes (kind "tern.eval.quant");
//   - BenchRecord: what `tern bench --json` prints (keys pp, tg, batched, ...);
//   - ServeRecord: what `tern bench serve --json` writes (completed, failed,
//     request_throughput, ttft_ms/tpot_ms/itl_ms/e2e_ms {mean, median, p90, p95, p99}).
// Every record may carry a RunSetup (the machine, build and command line that
// produced it); our own JSON always does.
//
// parse_result_json() recognises the kind by its keys and returns a clear
// error for anything else. Missing numbers read as NaN ("n/a" in tables).
// Threading: pure functions, except collect_setup() which reads /proc.
#pragma once

#include <cmath>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace tern::eval {

inline constexpr double kNaN = NAN;

struct RunSetup {
  std::string cpu_model;     // /proc/cpuinfo "model name"
  int n_cores = 0;           // logical CPUs
  uint64_t ram_bytes = 0;    // MemTotal
  std::string git_sha, compiler;
  std::string command;       // the command line, shell-quoted
  std::string model, model_hash;
  int threads = 0;
  std::string date_utc;      // ISO 8601
};

// Machine, build and date of this process; command from argv. Model fields stay empty.
RunSetup collect_setup(int argc, char** argv, const std::string& program = "tern");

struct QuantEvalRow {
  std::string type;           // scheme name ("Q4_K_M") or "base (F32)"
  bool is_base = false;
  uint64_t file_bytes = 0;
  double bits_per_weight = kNaN;
  std::string tensor_types;   // what the file really holds, e.g. "Q8_0 x7, F32 x5"
  int n_fallback = 0;         // matrices that took a fallback type (row length)
  double ppl = kNaN, ppl_ratio = kNaN;
  double kl_mean = kNaN, kl_median = kNaN, kl_p99 = kNaN, kl_max = kNaN;
  double top1 = kNaN;         // agreement with the base, fraction
  double pp_tok_s = kNaN, tg_tok_s = kNaN;
  double pp_tok_s_per_core = kNaN, tg_tok_s_per_core = kNaN;
  double cost_per_mtok = kNaN;  // currency units per million generated tokens (with a price)
  // Automatic mixes (quantize --auto): on the calibration windows, the KL the
  // choice predicted (sum over tensors) and the KL the mix measured there.
  double auto_kl_predicted = kNaN, auto_kl_calib = kNaN;
  // The K/V cache the row ran with ("f32", "q8_0" …; "" in files from before --kv-types) and
  // its bytes per token of context (every layer's keys and values).
  std::string kv_type;
  double kv_bytes_per_token = kNaN;
};

struct QuantEval {
  RunSetup setup;
  std::string text_path;
  int n_ctx = 0, n_chunks = 0;
  int64_t n_tokens_scored = 0;
  int n_prompt = 0, n_gen = 0, repetitions = 0;
  double price_per_hour = kNaN;
  std::vector<QuantEvalRow> rows;  // base first
};

struct BenchRecord {
  std::optional<RunSetup> setup;
  std::string model, model_hash, weight_type, git_sha, compiler, cpu_flags;
  int threads = 0;
  int pp_tokens = 0, tg_tokens = 0;
  double pp_tok_s = kNaN, pp_std = kNaN, tg_tok_s = kNaN, tg_std = kNaN;
  std::vector<std::pair<int, double>> batched;  // (batch, tok/s)
  double price_per_hour = kNaN;
};

struct LatencyStats {
  double mean = kNaN, median = kNaN, p90 = kNaN, p95 = kNaN, p99 = kNaN;
};

struct ServeRecord {
  std::optional<RunSetup> setup;
  double completed = kNaN, failed = kNaN, duration_s = kNaN;
  double request_throughput = kNaN, input_throughput = kNaN, output_throughput = kNaN, goodput = kNaN;
  std::map<std::string, LatencyStats> latency;  // "ttft_ms", "tpot_ms", "itl_ms", "e2e_ms"
  std::string label;                             // request rate / concurrency when recorded
};

enum class ResultKind { QuantEval, Bench, Serve };

struct ResultFile {
  std::string path;
  ResultKind kind = ResultKind::Bench;
  QuantEval quant;
  BenchRecord bench;
  ServeRecord serve;
};

Result<ResultFile> parse_result_json(std::string_view text, const std::string& path);

// The JSON `tern eval quant --json` writes (pretty-printed).
std::string quant_eval_to_json(const QuantEval& eval);

}  // namespace tern::eval
