// tern perplexity --continuous: one long text as a single sequence, per
// segment, under several modes side by side (engine/continuous_perplexity.h).
//
//   tern perplexity -m MODEL -f TEXT --continuous [--modes "dense 4,508 0,508 recompute:511"]
//                   [--segment 1000] [--max-tokens N] [-c CTX] [--kv-type T] [--chart F.svg] [--json F]
#include "perplexity_continuous.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "core/atomic_file.h"
#include "core/json.h"
#include "engine/continuous_perplexity.h"
#include "eval/svg_chart.h"

namespace tern::cli {

Status run_continuous(const ContinuousOptions& o, EngineConfig config, const std::vector<TokenId>& all_tokens) {
  if (o.segment < 1) return error(ErrorKind::InvalidArgument, "perplexity: --segment must be >= 1");
  if (o.max_tokens < 0) return error(ErrorKind::InvalidArgument, "perplexity: --max-tokens must be >= 0");
  std::vector<ContinuousMode> modes;
  std::istringstream words(o.modes);
  for (std::string w; words >> w;) {
    auto m = parse_continuous_mode(w);
    TERN_RETURN_IF_ERROR(m.status());
    modes.push_back(*m);
  }
  if (modes.empty()) return error(ErrorKind::InvalidArgument, "perplexity: --modes names no mode");
  std::vector<TokenId> tokens = all_tokens;
  if (o.max_tokens > 0 && tokens.size() > static_cast<size_t>(o.max_tokens)) tokens.resize(static_cast<size_t>(o.max_tokens));

  std::vector<std::vector<double>> ppl;  // [mode][segment]
  std::vector<double> overall;
  for (const ContinuousMode& m : modes) {
    const auto t0 = std::chrono::steady_clock::now();
    auto nll = continuous_nll(config, tokens, m);
    TERN_RETURN_IF_ERROR(nll.status().with_context("mode " + m.name));
    double sum = 0;
    for (double x : *nll) sum += x;
    overall.push_back(std::exp(sum / static_cast<double>(nll->size())));
    ppl.push_back(segment_perplexities(*nll, static_cast<size_t>(o.segment)));
    std::fprintf(stderr, "tern: %s: %zu tokens scored in %.1f s\n", m.name.c_str(), nll->size(),
                 std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }

  // Markdown: one row per segment, one column per mode.
  std::printf("| scored tokens |");
  for (const ContinuousMode& m : modes) std::printf(" %s |", m.name.c_str());
  std::printf("\n|---|");
  for (size_t i = 0; i < modes.size(); ++i) std::printf("---:|");
  std::printf("\n");
  const size_t n_seg = ppl.front().size(), n_scored = tokens.size() - 1;
  for (size_t s = 0; s < n_seg; ++s) {
    std::printf("| %zu–%zu |", s * o.segment + 1, std::min(n_scored, (s + 1) * o.segment));
    for (const auto& p : ppl) std::printf(" %.3f |", p[s]);
    std::printf("\n");
  }
  std::printf("| all %zu |", n_scored);
  for (double p : overall) std::printf(" %.3f |", p);
  std::printf("\n");

  if (!o.chart_path.empty()) {
    eval::Chart chart;
    chart.title = "Perplexity per " + std::to_string(o.segment) + "-token segment, one sequence";
    chart.x_label = "position (end of segment)";
    chart.y_label = "perplexity";
    chart.y_log = true;
    for (size_t i = 0; i < modes.size(); ++i) {
      eval::ChartSeries series{modes[i].name, {}, true};
      for (size_t s = 0; s < ppl[i].size(); ++s)
        series.points.push_back({static_cast<double>(std::min(n_scored, (s + 1) * o.segment)), ppl[i][s], ""});
      chart.series.push_back(std::move(series));
    }
    TERN_RETURN_IF_ERROR(write_file_atomically(o.chart_path, eval::render_svg(chart)));
  }
  if (!o.json_path.empty()) {
    Json::Object root;
    root.emplace_back("tokens", Json(static_cast<int64_t>(tokens.size())));
    root.emplace_back("segment", Json(static_cast<int64_t>(o.segment)));
    Json::Array rows;
    for (size_t i = 0; i < modes.size(); ++i) {
      Json::Object row;
      row.emplace_back("mode", Json(modes[i].name));
      row.emplace_back("perplexity", Json(overall[i]));
      Json::Array segs;
      for (double p : ppl[i]) segs.emplace_back(p);
      row.emplace_back("segments", Json(std::move(segs)));
      rows.emplace_back(std::move(row));
    }
    root.emplace_back("modes", Json(std::move(rows)));
    TERN_RETURN_IF_ERROR(write_file_atomically(o.json_path, Json(std::move(root)).dump() + "\n"));
  }
  return Status::ok();
}

}  // namespace tern::cli
