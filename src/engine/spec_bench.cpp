#include "engine/spec_bench.h"

#include <chrono>


#include "engine/bench.h"
#include "engine/inline_engine.h"

namespace tern {
namespace {

struct Run {
  double seconds = 0;
  std::vector<std::vector<TokenId>> tokens;
};

Result<Run> run_batch(InlineEngine& e, const std::vector<std::string>& prompts, int batch, int n_gen, uint64_t& next_id) {
  Run run;
  run.tokens.resize(static_cast<size_t>(batch));
  std::vector<PreparedRequest> prepared;
  for (int i = 0; i < batch; ++i) {
    GenerationRequest g;
    g.prompt = prompts[static_cast<size_t>(i) % prompts.size()];
    g.max_tokens = n_gen;
    g.ignore_eos = true;
    g.sampling.temperature = 0.0f;
    auto p = e.prepare(std::move(g));
    TERN_RETURN_IF_ERROR(p.status());
    prepared.push_back(std::move(p).value());
  }
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < batch; ++i)
    e.add(RequestId(++next_id), prepared[static_cast<size_t>(i)], [&run, i](const RequestOutput& o) {
      if (o.has_token) run.tokens[static_cast<size_t>(i)].push_back(o.token);
    });
  while (e.has_work()) TERN_RETURN_IF_ERROR(e.step());
  run.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return run;
}

}  // namespace

Result<std::vector<SpecBenchRow>> bench_speculative(const EngineConfig& plain_cfg, const EngineConfig& spec_cfg,
                                                   const std::vector<std::string>& prompts, const SpecBenchOptions& o,
                                                   const std::function<void(const std::string&)>& status) {
  if (prompts.empty() || o.n_gen < 1 || o.repetitions < 1)
    return error(ErrorKind::InvalidArgument, "bench: speculative runs need prompts, -n >= 1 and -r >= 1");
  auto plain = InlineEngine::create(plain_cfg);
  TERN_RETURN_IF_ERROR(plain.status());
  auto spec = InlineEngine::create(spec_cfg);
  TERN_RETURN_IF_ERROR(spec.status());
  uint64_t next_id = 0;
  std::vector<SpecBenchRow> rows;
  for (int batch : o.batches) {
    SpecBenchRow row;
    row.batch = batch;
    std::vector<double> plain_rates, spec_rates;
    double spec_seconds = 0;
    for (int rep = 0; rep <= o.repetitions; ++rep) {  // rep 0 warms up
      if (status) status("batch " + std::to_string(batch) + ", repetition " + std::to_string(rep));
      const EngineStats before = (*spec)->stats();
      auto a = run_batch(**plain, prompts, batch, o.n_gen, next_id);
      TERN_RETURN_IF_ERROR(a.status());
      auto b = run_batch(**spec, prompts, batch, o.n_gen, next_id);
      TERN_RETURN_IF_ERROR(b.status());
      const EngineStats after = (*spec)->stats();
      if (a->tokens != b->tokens) row.same_output = false;
      if (rep == 0) continue;
      const double n = static_cast<double>(batch) * o.n_gen;
      plain_rates.push_back(n / a->seconds);
      spec_rates.push_back(n / b->seconds);
      spec_seconds += b->seconds;
      row.proposed += after.spec_proposed - before.spec_proposed;
      row.accepted += after.spec_accepted - before.spec_accepted;
      row.verifies += after.spec_verifies - before.spec_verifies;
      row.draft_share += after.spec_draft_time_s - before.spec_draft_time_s;
    }
    const SampleStats plain_st = sample_stats(plain_rates), spec_st = sample_stats(spec_rates);
    row.plain_tok_s = plain_st.mean, row.plain_std = plain_st.std;
    row.spec_tok_s = spec_st.mean, row.spec_std = spec_st.std;
    row.draft_share = spec_seconds > 0 ? row.draft_share / spec_seconds : 0.0;
    rows.push_back(row);
  }
  return rows;
}

}  // namespace tern
