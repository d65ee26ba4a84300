#include "eval/report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <set>

#include "core/format_bytes.h"

namespace tern::eval {
namespace {

std::string escape_cell(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '|') out += "\\|";
    else if (c == '\n' || c == '\r') out += ' ';
    else out += c;
  }
  return out;
}

std::string base_name(const std::string& path) { return std::filesystem::path(path).filename().string(); }

std::string per_core(double tok_s, int threads) { return threads > 0 ? fmt(tok_s / threads, 2) : "n/a"; }

// The setup of a record: its own, else what a bench record carries, else none.
std::optional<RunSetup> setup_of(const ResultFile& f) {
  switch (f.kind) {
    case ResultKind::QuantEval: return f.quant.setup;
    case ResultKind::Serve: return f.serve.setup;
    case ResultKind::Bench: {
      if (f.bench.setup) return f.bench.setup;
      RunSetup s;  // the fields tern bench --json records at top level
      s.git_sha = f.bench.git_sha;
      s.compiler = f.bench.compiler;
      s.model = f.bench.model;
      s.model_hash = f.bench.model_hash;
      s.threads = f.bench.threads;
      return s;
    }
  }
  return std::nullopt;
}

std::string machine_line(const RunSetup& s) {
  if (s.cpu_model.empty() && s.n_cores == 0) return "";
  char buf[256];
  std::snprintf(buf, sizeof buf, "%s, %d logical cores, %.1f GiB RAM", s.cpu_model.empty() ? "unknown CPU" : s.cpu_model.c_str(),
                s.n_cores, s.ram_bytes / (1024.0 * 1024.0 * 1024.0));
  return buf;
}

void setup_section(std::string& md, const std::vector<ResultFile>& files, const ReportOptions& o) {
  md += "## Setup\n\n";
  std::vector<std::vector<std::string>> rows;
  bool any_machine = false;
  for (const auto& f : files) {
    const RunSetup s = setup_of(f).value_or(RunSetup{});
    const std::string machine = machine_line(s);
    any_machine |= !machine.empty();
    rows.push_back({base_name(f.path), machine.empty() ? "not recorded" : machine, s.git_sha.empty() ? "n/a" : s.git_sha,
                    s.compiler.empty() ? "n/a" : s.compiler, s.threads > 0 ? std::to_string(s.threads) : "n/a",
                    s.date_utc.empty() ? "n/a" : s.date_utc});
  }
  md += markdown_table({"result", "machine", "build", "compiler", "threads", "date (UTC)"}, rows, "llllrl");
  if (!any_machine)
    md += "\nThe inputs do not record their machine; this report was assembled on " + machine_line(o.assembler) + ".\n";
  md += "\nModels and command lines (run them again to reproduce a figure):\n\n";
  for (const auto& f : files) {
    const RunSetup s = setup_of(f).value_or(RunSetup{});
    md += "- `" + base_name(f.path) + "`";
    if (!s.model.empty()) md += ": model `" + s.model + "`" + (s.model_hash.empty() ? "" : " (hash " + s.model_hash + ")");
    md += "\n";
    if (!s.command.empty()) md += "\n  ```sh\n  " + s.command + "\n  ```\n";
  }
  md += "\n";
}

void add_chart(Report& r, const ReportOptions& o, const Chart& chart, const std::string& alt) {
  const std::string name = o.chart_prefix + "-" + std::to_string(r.charts.size() + 1) + ".svg";
  r.charts.emplace_back(name, render_svg(chart));
  r.markdown += "![" + alt + "](" + name + ")\n\n";
}

void quant_section(Report& r, const std::vector<const ResultFile*>& quants, const ReportOptions& o) {
  if (quants.empty()) return;
  r.markdown += "## Quantization: quality against speed\n\n"
                "KL is KL(base || quantized) per scored token in nats; top-1 is how often both pick the same "
                "next token; PPL ratio is the quantized model's perplexity over the base's on the same windows.\n\n";
  std::vector<const QuantEval*> evals;
  std::vector<std::string> names;
  for (const ResultFile* f : quants) {
    const QuantEval& q = f->quant;
    r.markdown += "### " + base_name(f->path) + "\n\n";
    char buf[512];
    std::snprintf(buf, sizeof buf,
                  "Text `%s`: %d windows of %d tokens, %lld tokens scored. Speed: pp%d and tg%d, %d repetitions, %d threads.\n\n",
                  q.text_path.c_str(), q.n_chunks, q.n_ctx, static_cast<long long>(q.n_tokens_scored), q.n_prompt, q.n_gen,
                  q.repetitions, q.setup.threads);
    r.markdown += buf;
    r.markdown += quant_table(q) + "\n";
    evals.push_back(&q);
    names.push_back(base_name(f->path));
    add_chart(r, o, quant_chart({&q}, {names.back()}, QualityMetric::Kl), "KL divergence against tg tok/s");
  }
  if (evals.size() > 1) {
    r.markdown += "### All evaluations\n\n";
    add_chart(r, o, quant_chart(evals, names, QualityMetric::PplRatio), "perplexity ratio against tg tok/s");
  }
}

void bench_section(Report& r, const std::vector<const ResultFile*>& benches, const ReportOptions& o) {
  if (benches.empty()) return;
  r.markdown += "## Throughput (tern bench)\n\n";
  bool priced = false;
  for (const ResultFile* f : benches) priced |= std::isfinite(f->bench.price_per_hour);
  std::vector<std::string> header = {"result", "model", "weights", "threads", "pp tok/s", "tg tok/s",
                                     "pp tok/s/core", "tg tok/s/core"};
  if (priced) header.push_back("cost / M tg tokens");
  std::vector<std::vector<std::string>> rows;
  Chart chart;
  chart.title = "Batched decode throughput";
  chart.x_label = "sequences per step";
  chart.y_label = "tok/s";
  chart.x_log = true;
  for (const ResultFile* f : benches) {
    const BenchRecord& b = f->bench;
    std::vector<std::string> row = {base_name(f->path), base_name(b.model), b.weight_type.empty() ? "n/a" : b.weight_type,
                                    std::to_string(b.threads),
                                    fmt(b.pp_tok_s, 2) + (std::isfinite(b.pp_std) ? " ± " + fmt(b.pp_std, 2) : ""),
                                    fmt(b.tg_tok_s, 2) + (std::isfinite(b.tg_std) ? " ± " + fmt(b.tg_std, 2) : ""),
                                    per_core(b.pp_tok_s, b.threads), per_core(b.tg_tok_s, b.threads)};
    if (priced) row.push_back(fmt(b.price_per_hour / (b.tg_tok_s * 3600.0) * 1e6, 4));
    rows.push_back(row);
    if (!b.batched.empty()) {
      ChartSeries s{base_name(f->path), {}, true};
      for (const auto& [batch, tok_s] : b.batched) s.points.push_back({static_cast<double>(batch), tok_s, ""});
      chart.series.push_back(s);
    }
  }
  r.markdown += markdown_table(header, rows, "lllrrrrrr") + "\n";
  if (!chart.series.empty()) add_chart(r, o, chart, "batched decode throughput");
}

void serve_section(Report& r, const std::vector<const ResultFile*>& serves, const ReportOptions& o) {
  if (serves.empty()) return;
  r.markdown += "## Serving (tern bench serve)\n\n";
  std::vector<std::vector<std::string>> rows;
  for (const ResultFile* f : serves) {
    const ServeRecord& s = f->serve;
    rows.push_back({base_name(f->path), s.label.empty() ? "" : s.label, fmt(s.completed, 0), fmt(s.failed, 0),
                    fmt(s.duration_s, 1), fmt(s.request_throughput, 2), fmt(s.input_throughput, 1),
                    fmt(s.output_throughput, 1), fmt(s.goodput, 2)});
  }
  r.markdown += markdown_table({"result", "load", "completed", "failed", "duration s", "req/s", "input tok/s",
                                "output tok/s", "goodput req/s"},
                               rows, "llrrrrrrr") + "\n";
  for (const ResultFile* f : serves) {
    r.markdown += "Latency of `" + base_name(f->path) + "` (ms):\n\n";
    std::vector<std::vector<std::string>> lat;
    for (const auto& [name, st] : f->serve.latency)
      lat.push_back({name, fmt(st.mean, 1), fmt(st.median, 1), fmt(st.p90, 1), fmt(st.p95, 1), fmt(st.p99, 1)});
    r.markdown += markdown_table({"metric", "mean", "median", "p90", "p95", "p99"}, lat, "lrrrrr") + "\n";
  }
  if (serves.size() < 2) return;
  Chart chart;  // latency–throughput curve over the runs (e.g. request rates)
  chart.title = "Latency against throughput";
  chart.x_label = "output tok/s";
  chart.y_label = "median latency, ms";
  chart.y_log = true;
  for (const char* metric : {"ttft_ms", "tpot_ms", "itl_ms", "e2e_ms"}) {
    ChartSeries s{std::string(metric) + " median", {}, true};
    for (const ResultFile* f : serves)
      if (auto it = f->serve.latency.find(metric); it != f->serve.latency.end())
        s.points.push_back({f->serve.output_throughput, it->second.median, f->serve.label});
    if (!s.points.empty()) chart.series.push_back(s);
  }
  add_chart(r, o, chart, "median latency against output throughput");
}

}  // namespace

std::string markdown_table(const std::vector<std::string>& header, const std::vector<std::vector<std::string>>& rows,
                           const std::string& align) {
  std::string md = "|";
  for (const auto& h : header) md += " " + escape_cell(h) + " |";
  md += "\n|";
  for (size_t c = 0; c < header.size(); ++c) md += c < align.size() && align[c] == 'r' ? " ---: |" : " --- |";
  md += "\n";
  for (const auto& row : rows) {
    md += "|";
    for (size_t c = 0; c < header.size(); ++c) md += " " + (c < row.size() ? escape_cell(row[c]) : std::string()) + " |";
    md += "\n";
  }
  return md;
}

std::string fmt(double v, int decimals) {
  if (!std::isfinite(v)) return "n/a";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

std::string fmt_sig(double v, int digits) {
  if (!std::isfinite(v)) return "n/a";
  if (v == 0.0) return "0";
  const int mag = static_cast<int>(std::floor(std::log10(std::abs(v))));
  return fmt(v, std::max(0, digits - 1 - mag));
}

std::string quant_table(const QuantEval& q) {
  const bool priced = std::isfinite(q.price_per_hour);
  std::vector<std::string> header = {"type", "file size", "bits/weight", "tensor types", "PPL", "PPL ratio", "KL mean",
                                     "KL median", "KL p99", "top-1 %", "pp tok/s", "tg tok/s", "pp tok/s/core",
                                     "tg tok/s/core"};
  if (priced) header.push_back("cost / M tg tokens");
  // K/V cache columns only when some row ran with another cache than f32 (eval quant --kv-types).
  const bool kv = std::any_of(q.rows.begin(), q.rows.end(), [](const QuantEvalRow& r) {
    return !r.kv_type.empty() && r.kv_type != "f32";
  });
  if (kv) header.insert(header.begin() + 4, {"KV cache", "KV bytes/token"});
  std::vector<std::vector<std::string>> rows;
  for (const auto& r : q.rows) {
    std::string types = r.tensor_types;
    if (r.n_fallback > 0) types += " (" + std::to_string(r.n_fallback) + " fallback)";
    if (std::isfinite(r.auto_kl_predicted))
      types += "; calibration KL predicted " + fmt_sig(r.auto_kl_predicted) + ", measured " + fmt_sig(r.auto_kl_calib);
    std::vector<std::string> row = {r.type, format_bytes(r.file_bytes), fmt(r.bits_per_weight, 2), types, fmt(r.ppl, 4),
                                    fmt(r.ppl_ratio, 4), fmt_sig(r.kl_mean), fmt_sig(r.kl_median), fmt_sig(r.kl_p99),
                                    fmt(100.0 * r.top1, 2), fmt(r.pp_tok_s, 1), fmt(r.tg_tok_s, 1),
                                    fmt(r.pp_tok_s_per_core, 1), fmt(r.tg_tok_s_per_core, 1)};
    if (priced) row.push_back(fmt(r.cost_per_mtok, 4));
    if (kv) row.insert(row.begin() + 4, {r.kv_type.empty() ? "f32" : r.kv_type, fmt(r.kv_bytes_per_token, 0)});
    rows.push_back(row);
  }
  return markdown_table(header, rows, kv ? "lrrllrrrrrrrrrrrr" : "lrrlrrrrrrrrrrr");
}

Chart quant_chart(const std::vector<const QuantEval*>& evals, const std::vector<std::string>& names,
                  QualityMetric metric) {
  Chart c;
  const bool kl = metric == QualityMetric::Kl;
  c.title = kl ? "Quantization: KL divergence against generation speed" : "Quantization: perplexity ratio against generation speed";
  c.x_label = "tg tok/s";
  c.y_label = kl ? "mean KL(base || quantized), nats" : "PPL / base PPL";
  c.y_log = kl;  // KL spans decades from Q8_0 to Q2_K; the base (0) is left out on a log axis
  auto y_of = [kl](const QuantEvalRow& r) { return kl ? r.kl_mean : r.ppl_ratio; };
  if (evals.size() == 1) {
    for (const auto& r : evals[0]->rows) c.series.push_back({r.type, {{r.tg_tok_s, y_of(r), r.type}}, false});
    return c;
  }
  for (size_t i = 0; i < evals.size(); ++i) {
    ChartSeries s{i < names.size() ? names[i] : "evaluation " + std::to_string(i + 1), {}, false};
    for (const auto& r : evals[i]->rows) s.points.push_back({r.tg_tok_s, y_of(r), r.type});
    c.series.push_back(s);
  }
  return c;
}

Report build_report(const std::vector<ResultFile>& files, const ReportOptions& o) {
  Report r;
  r.markdown = "# " + o.title + "\n\n";
  if (!o.assembler.date_utc.empty())
    r.markdown += "Assembled " + o.assembler.date_utc + " with `" + o.assembler.command + "`.\n\n";
  setup_section(r.markdown, files, o);
  std::vector<const ResultFile*> quants, benches, serves;
  for (const auto& f : files)
    (f.kind == ResultKind::QuantEval ? quants : f.kind == ResultKind::Bench ? benches : serves).push_back(&f);
  quant_section(r, quants, o);
  bench_section(r, benches, o);
  serve_section(r, serves, o);
  return r;
}

}  // namespace tern::eval
