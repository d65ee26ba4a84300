// tern batch -m MODEL -f PROMPTS.jsonl [-o OUT.jsonl] [engine flags] — runs a
// file of requests through the serving engine concurrently (all arrive at
// once) and writes one result line per request, in input order. A line that
// cannot be used gets a result line with an "error" field; the others still
// run, and the exit code is 1. A summary goes to stderr.
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <optional>
#include <sstream>

#include "args.h"
#include "batch_line.h"
#include "commands.h"
#include "core/input_file.h"
#include "core/json.h"
#include "core/memory_info.h"
#include "engine_flags.h"
#include "eval/kl_divergence.h"
#include "output.h"
#include "tern/engine.h"

namespace tern::cli {
namespace {

using Clock = std::chrono::steady_clock;

struct Item : BatchLine {
  std::string error;             // a parse or validation error: no request was made
  // Filled by the engine thread.
  std::string text;
  RequestOutput final_output;
  bool done = false;
  std::vector<double> token_times_s;  // since the start of the run
};

double percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  return eval::percentile(v, q);
}

}  // namespace

int cmd_batch(int argc, char** argv) {
  std::string model_path, input, output, stats_json;
  EngineFlags flags;
  ArgParser args("batch", "tern batch -m MODEL -f PROMPTS.jsonl [-o OUT.jsonl] [--max-num-seqs N] "
                          "[--policy fcfs|priority|sjf|fair] [--kv-memory B] ...");
  args.add("-m,--model", &model_path, "GGUF model file");
  args.add("-f,--file", &input, "requests, one JSON object per line (regular file, up to 1 GiB)");
  args.add("-o,--output", &output, "results file, written whole or not at all via OUT.jsonl.tmp (default: stdout)");
  args.add("--stats-json", &stats_json, "write the engine's statistics and memory-use figures here");
  flags.add_to(args);
  if (auto s = args.parse(argc, argv); !s) return report(s);
  if (args.help_requested()) {
    std::fputs(args.help_text().c_str(), stdout);
    return 0;
  }
  if (model_path.empty() || input.empty())
    return report(error(ErrorKind::InvalidArgument, "batch: -m MODEL and -f PROMPTS.jsonl are required"));
  EngineConfig config;
  config.model_path = model_path;
  if (auto s = flags.apply(config); !s) return report(s);

  auto text = read_file(input);
  if (!text) return report(text.status().with_context("batch: -f"));
  std::vector<Item> items;
  std::istringstream in(std::move(text).value());
  std::string line;
  for (int64_t n = 0; std::getline(in, line); ++n) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;  // blank lines are not requests
    Item& it = items.emplace_back();
    it.id = n;
    it.error = parse_batch_line(line, it);
  }
  // Opened before the run so a bad -o fails in a second, not after the work.
  auto out = ResultOutput::open(output);
  if (!out) return report(out.status().with_context("batch: -o"));
  std::optional<AtomicFile> stats_out;
  if (!stats_json.empty()) {
    auto f = AtomicFile::create(stats_json);
    if (!f) return report(f.status().with_context("batch: --stats-json"));
    stats_out.emplace(std::move(f).value());
  }

  auto engine = Engine::create(config);
  if (!engine) return report(engine.status());
  std::mutex mu;
  std::condition_variable cv;
  size_t n_pending = 0;
  const auto t0 = Clock::now();
  for (Item& it : items) {
    if (!it.error.empty()) continue;
    Item* item = &it;
    auto id = (*engine)->add_request(it.request, [&, item](const RequestOutput& o) {
      const double t = std::chrono::duration<double>(Clock::now() - t0).count();
      std::lock_guard lock(mu);
      if (o.has_token) item->token_times_s.push_back(t);
      item->text += o.text;
      if (o.finish) {
        item->final_output = o;
        item->done = true;
        --n_pending;
        cv.notify_one();
      }
    });
    if (!id) {
      it.error = id.status().message();
      continue;
    }
    std::lock_guard lock(mu);
    ++n_pending;
  }
  {
    std::unique_lock lock(mu);
    cv.wait(lock, [&] { return n_pending == 0; });
  }
  const double duration_s = std::chrono::duration<double>(Clock::now() - t0).count();
  const EngineStats st = (*engine)->stats();
  (*engine)->shutdown();

  int n_failed = 0;
  int64_t n_out = 0, n_in = 0;
  std::vector<double> ttft, itl, e2e;
  for (const Item& it : items) {
    Json j;
    j["id"] = it.id;
    if (!it.error.empty()) {
      ++n_failed;
      j["error"] = it.error;
    } else {
      const RequestOutput& o = it.final_output;
      j["text"] = it.text;
      j["n_tokens_prompt"] = o.n_tokens_prompt;
      j["n_tokens_generated"] = o.n_tokens_generated;
      j["finish_reason"] = finish_reason_name(*o.finish);
      j["ttft_ms"] = o.ttft_ms;
      j["itl_ms_mean"] = o.itl_ms_mean;
      j["e2e_ms"] = o.e2e_ms;
      j["n_tokens_cached"] = o.n_tokens_cached;
      if (o.n_preemptions > 0) j["n_preemptions"] = o.n_preemptions;
      if (*o.finish == FinishReason::Error) {
        ++n_failed;
        j["error"] = o.error;
      }
      n_out += o.n_tokens_generated;
      n_in += o.n_tokens_prompt;
      ttft.push_back(o.ttft_ms);
      e2e.push_back(o.e2e_ms);
      for (size_t k = 1; k < it.token_times_s.size(); ++k)
        itl.push_back((it.token_times_s[k] - it.token_times_s[k - 1]) * 1e3);
    }
    if (auto s = out->write(j.dump() + "\n"); !s)
      return report(s.with_context("batch"));
  }
  if (auto s = out->finish(); !s) return report(s.with_context("batch"));

  const double kv_mib = static_cast<double>(st.kv_block_bytes) / (1024.0 * 1024.0);
  // KV waste: slots held but not filled, per step; contiguous allocation would
  // hold n_ctx slots per running sequence.
  const int32_t n_ctx = (*engine)->model_info().n_ctx;
  const double used = static_cast<double>(st.kv_positions_used_sum);
  const double waste_paged = st.kv_slots_allocated_sum > 0 ? 1.0 - used / st.kv_slots_allocated_sum : 0.0;
  const double contig_slots = static_cast<double>(st.n_running_sum) * n_ctx;
  const double waste_contig = contig_slots > 0 ? 1.0 - used / contig_slots : 0.0;
  const int64_t pool_slots = static_cast<int64_t>(st.kv_blocks_total) * st.block_size;
  const int64_t contiguous_capacity = n_ctx > 0 ? pool_slots / n_ctx : 0;
  if (!stats_json.empty()) {
    Json j;
    j["requests"] = items.size();
    j["failed"] = n_failed;
    j["duration_s"] = duration_s;
    j["output_tokens"] = n_out;
    j["prompt_tokens"] = n_in;
    j["output_tok_s"] = static_cast<double>(n_out) / duration_s;
    j["decode_steps"] = st.decode_steps;
    j["decode_tok_s"] = st.decode_time_s > 0 ? static_cast<double>(st.decode_tokens) / st.decode_time_s : 0.0;
    j["ttft_ms_p50"] = percentile(ttft, 0.5);
    j["ttft_ms_p99"] = percentile(ttft, 0.99);
    j["itl_ms_p50"] = percentile(itl, 0.5);
    j["itl_ms_p99"] = percentile(itl, 0.99);
    j["steps"] = st.n_steps;
    j["tokens_per_step"] = st.tokens_per_step;
    j["preemptions"] = st.n_preemptions;
    j["prefix_hit_tokens"] = st.prefix_hit_tokens;
    j["prefix_lookup_tokens"] = st.prefix_lookup_tokens;
    j["kv_blocks_total"] = st.kv_blocks_total;
    j["kv_blocks_peak"] = st.kv_blocks_peak;
    j["kv_blocks_evicted"] = st.kv_blocks_evicted;
    j["block_size"] = st.block_size;
    j["kv_block_bytes"] = st.kv_block_bytes;
    j["n_ctx"] = n_ctx;
    j["kv_waste_paged"] = waste_paged;
    j["kv_waste_contiguous"] = waste_contig;
    j["running_mean"] = st.n_steps > 0 ? static_cast<double>(st.n_running_sum) / st.n_steps : 0.0;
    j["running_peak"] = st.n_running_peak;
    j["contiguous_capacity"] = contiguous_capacity;
    j["spec_proposed"] = st.spec_proposed;
    j["spec_accepted"] = st.spec_accepted;
    j["spec_branch_accepted"] = st.spec_branch_accepted;
    j["state_slots_total"] = st.state_slots_total;
    j["state_slots_peak"] = st.state_slots_peak;
    j["state_slot_bytes"] = st.state_slot_bytes;
    j["state_bytes_total"] = st.state_bytes_total;
    j["rss_peak_bytes"] = peak_resident_bytes();  // the process's high-water mark (VmHWM), load included
    Status written = stats_out->write(j.dump(2) + "\n");
    if (written) written = stats_out->commit();
    if (!written) return report(written.with_context("batch"));
  }
  std::fprintf(stderr,
               "batch: %zu requests (%d failed) in %.2f s: %.2f req/s, %.1f output tok/s, %.1f total tok/s\n"
               "batch: ttft ms p50 %.1f p90 %.1f p99 %.1f | itl ms p50 %.2f p90 %.2f p99 %.2f | e2e ms p50 %.1f p99 %.1f\n"
               "batch: %lld steps, %.1f tokens/step, %lld preemptions, prefix cache %lld/%lld tokens hit (%.1f%%)\n"
               "batch: KV peak %d of %d blocks (%.1f of %.1f MiB, block %d tokens); waste %.1f%% paged vs %.1f%% "
               "contiguous at %d; peak %d sequences running (contiguous would fit %lld)\n",
               items.size(), n_failed, duration_s, static_cast<double>(items.size() - n_failed) / duration_s,
               static_cast<double>(n_out) / duration_s, static_cast<double>(n_out + n_in) / duration_s,
               percentile(ttft, 0.5), percentile(ttft, 0.9), percentile(ttft, 0.99), percentile(itl, 0.5),
               percentile(itl, 0.9), percentile(itl, 0.99), percentile(e2e, 0.5), percentile(e2e, 0.99),
               static_cast<long long>(st.n_steps), st.tokens_per_step, static_cast<long long>(st.n_preemptions),
               static_cast<long long>(st.prefix_hit_tokens), static_cast<long long>(st.prefix_lookup_tokens),
               100.0 * st.prefix_hit_rate, st.kv_blocks_peak, st.kv_blocks_total, st.kv_blocks_peak * kv_mib,
               st.kv_blocks_total * kv_mib, st.block_size, 100.0 * waste_paged, 100.0 * waste_contig, n_ctx,
               st.n_running_peak, static_cast<long long>(contiguous_capacity));
  if (st.state_slots_total > 0) {  // recurrent (state-space) layers: one fixed-size state per sequence
    const double mib = 1024.0 * 1024.0;
    std::fprintf(stderr,
                 "batch: recurrent state peak %d of %d slots (%.1f MiB in use at the peak, %.2f MiB per sequence; "
                 "%.1f MiB pool with prompt snapshots)\n",
                 st.state_slots_peak, st.state_slots_total, st.state_slots_peak * st.state_slot_bytes / mib,
                 st.state_slot_bytes / mib, st.state_bytes_total / mib);
  }
  if (st.spec_proposed > 0)
    std::fprintf(stderr, "batch: speculative: %lld proposed, %lld accepted (%.1f%%)\n",
                 static_cast<long long>(st.spec_proposed), static_cast<long long>(st.spec_accepted),
                 100.0 * static_cast<double>(st.spec_accepted) / static_cast<double>(st.spec_proposed));
  return n_failed > 0 ? 1 : 0;
}

}  // namespace tern::cli
