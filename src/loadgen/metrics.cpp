#include "loadgen/metrics.h"

#include <algorithm>

namespace tern::loadgen {

int completion_tokens_of(const RequestResult& r) {
  return r.call.usage_completion_tokens ? *r.call.usage_completion_tokens : static_cast<int>(r.call.t_chunks.size());
}

int prompt_tokens_of(const RequestResult& r) {
  return r.call.usage_prompt_tokens ? *r.call.usage_prompt_tokens : r.n_prompt_tokens_expected;
}

RunMetrics compute_metrics(const std::vector<const RunResult*>& runs, const Slo& slo, const CostConfig& cost) {
  RunMetrics m;
  std::vector<double> ttft, tpot, itl, e2e;
  std::vector<SloSample> samples;
  for (const RunResult* run : runs) {
    m.duration_s += run->duration_s;
    for (const RequestResult& r : run->requests) {
      if (!r.sent) {
        ++m.not_sent;
        continue;
      }
      if (!r.call.ok()) {
        ++m.failed;
        ++m.errors[r.call.error_type];
        m.error_examples.emplace(r.call.error_type, r.call.error_message);
        continue;
      }
      ++m.completed;
      if (!r.call.usage_completion_tokens || !r.call.usage_prompt_tokens) ++m.n_usage_missing;
      const int n_out = completion_tokens_of(r);
      m.total_output_tokens += static_cast<size_t>(std::max(0, n_out));
      m.total_input_tokens += static_cast<size_t>(std::max(0, prompt_tokens_of(r)));
      SloSample s;
      s.e2e_ms = (r.call.t_end - r.call.t_start) * 1e3;
      // A stream without content (e.g. zero tokens) has no first token: TTFT = e2e.
      s.ttft_ms = ((r.call.t_first_token ? *r.call.t_first_token : r.call.t_end) - r.call.t_start) * 1e3;
      if (n_out >= 2) s.tpot_ms = (s.e2e_ms - s.ttft_ms) / (n_out - 1);
      ttft.push_back(s.ttft_ms);
      e2e.push_back(s.e2e_ms);
      if (s.tpot_ms) tpot.push_back(*s.tpot_ms);
      for (size_t k = 1; k < r.call.t_chunks.size(); ++k)
        itl.push_back((r.call.t_chunks[k] - r.call.t_chunks[k - 1]) * 1e3);
      samples.push_back(s);
    }
  }
  if (m.duration_s > 0) {
    m.request_throughput = static_cast<double>(m.completed) / m.duration_s;
    m.input_throughput = static_cast<double>(m.total_input_tokens) / m.duration_s;
    m.output_throughput = static_cast<double>(m.total_output_tokens) / m.duration_s;
  }
  m.goodput = goodput(samples, slo, m.duration_s);
  m.ttft_ms = summarize(ttft);
  m.tpot_ms = summarize(tpot);
  m.itl_ms = summarize(itl);
  m.e2e_ms = summarize(e2e);
  m.n_cores = std::max(1, cost.n_cores);
  m.output_throughput_per_core = m.output_throughput / m.n_cores;
  if (cost.price_per_hour && m.output_throughput > 0)
    m.cost_per_million_output_tokens = *cost.price_per_hour / (m.output_throughput * 3600.0) * 1e6;
  return m;
}

RunMetrics compute_metrics(const RunResult& run, const Slo& slo, const CostConfig& cost) {
  return compute_metrics(std::vector<const RunResult*>{&run}, slo, cost);
}

}  // namespace tern::loadgen
