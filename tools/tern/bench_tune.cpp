// tern bench --tune: measures prompt processing on a model under each
// candidate activation block (the matmul driver's column blocking,
// MatmulKernels::act_block_bytes), interleaved over rounds because the
// machine is noisy, and writes the best as this CPU's tuning record
// (kernels/tuning.h) for the model's weight types, keeping the record's other
// entries. Decode is not tuned: one column never spans a block.
#include "bench_tune.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <set>

#include "core/atomic_file.h"
#include "kernels/matmul_kernels.h"
#include "kernels/tuning.h"

namespace tern::cli {

Result<TuneResult> run_bench_tune(const Model& m, const BenchOptions& base, int rounds,
                                  const std::function<void(const std::string&)>& progress) {
  using kernels::TuningRecord;
  const kernels::CpuLevel level = kernels::best_cpu_level();
  if (base.n_prompt <= 0) return error(ErrorKind::InvalidArgument, "bench --tune: needs a prompt (-p > 0) to time");
  const std::string path = kernels::tuning_path();
  if (path.empty())
    return error(ErrorKind::InvalidArgument, "bench --tune: no place for the record: set TERN_TUNING, XDG_CACHE_HOME or HOME");

  TuneResult out;
  out.path = path;
  out.level = level;
  // The matrices' types (the ones the driver runs: they have kernels).
  std::set<uint32_t> ids;
  for (const auto& t : m.file().tensors())
    if (t.n_dims >= 2 && kernels::matmul_kernels(t.type)) ids.insert(static_cast<uint32_t>(t.type));
  for (uint32_t id : ids) out.types.push_back(static_cast<gguf::GgmlType>(id));
  if (out.types.empty()) return error(ErrorKind::Unsupported, "bench --tune: the model has no matrices to tune");

  // Candidates: the defaults (first), powers of two around L2/L3 sizes.
  std::set<size_t> cands = {size_t{256} << 10, size_t{512} << 10, size_t{1} << 20,
                            size_t{2} << 20,   size_t{4} << 20,   size_t{16} << 20};

  // The record to extend: the one in use when it is this CPU's, else a new one.
  const kernels::ActiveTuning before = kernels::active_tuning();
  TuningRecord base_rec = before.record;
  base_rec.cpu = kernels::cpu_identity();

  BenchOptions po = base;
  po.n_gen = 0;
  po.depths.clear();
  po.batches.clear();
  // The record with the model's types at `bytes` (0: their defaults).
  auto with = [&](size_t bytes) {
    TuningRecord rec = base_rec;
    for (gguf::GgmlType t : out.types) {
      if (bytes) rec.set(level, t, bytes);
      else rec.erase(level, t);
    }
    return rec;
  };
  out.candidates.push_back({0, {}, 0.0});
  for (size_t c : cands) out.candidates.push_back({c, {}, 0.0});
  for (int round = 0; round < rounds; ++round)
    for (TuneCandidate& c : out.candidates) {
      const TuningRecord rec = with(c.act_block_bytes);
      kernels::set_active_tuning(rec, "bench --tune");
      if (progress)
        progress("tuning: act block " + (c.act_block_bytes ? std::to_string(c.act_block_bytes >> 10) + " KiB" : "default") + ", round " +
                 std::to_string(round + 1) + "/" + std::to_string(rounds));
      auto r = run_bench(m, po, {});
      if (!r) {
        kernels::set_active_tuning(before.record, before.source);
        return r.status();
      }
      c.pp_tok_s.push_back(r->pp.tok_s);
    }
  for (TuneCandidate& c : out.candidates) {
    double sum = 0;
    for (double v : c.pp_tok_s) sum += v;
    c.mean = sum / static_cast<double>(c.pp_tok_s.size());
  }
  const auto best = std::max_element(out.candidates.begin(), out.candidates.end(),
                                     [](const TuneCandidate& a, const TuneCandidate& b) { return a.mean < b.mean; });
  out.best_bytes = best->mean > out.candidates[0].mean * kMinGain ? best->act_block_bytes : 0;

  const TuningRecord rec = with(out.best_bytes);
  std::error_code ec;
  const std::filesystem::path dir = std::filesystem::path(path).parent_path();
  if (!dir.empty()) std::filesystem::create_directories(dir, ec);
  if (ec) return error(ErrorKind::IoError, "bench --tune: cannot create " + dir.string() + ": " + ec.message());
  if (auto s = write_file_atomically(path, kernels::format_tuning(rec)); !s) return s;
  kernels::set_active_tuning(rec, path);
  return out;
}

}  // namespace tern::cli
