// eval/report.h — markdown tables, charts and the report document built from
// result records (eval/results.h). Pure: the CLI reads the files and writes
// what these return.
//
// A report reads top to bottom the way a results chapter should: what was
// measured and on what (setup: machine, build, model, the exact command lines,
// so anyone can rerun it), then one section per kind of result, each a table
// with units in the headers followed by its chart.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "eval/results.h"
#include "eval/svg_chart.h"

namespace tern::eval {

// A GitHub-flavoured markdown table; cells are escaped ('|' and newlines).
// align: one char per column, 'l' or 'r' (default left).
std::string markdown_table(const std::vector<std::string>& header, const std::vector<std::vector<std::string>>& rows,
                           const std::string& align = "");

// "%.*f" or "n/a" for non-finite values.
std::string fmt(double v, int decimals);
// Significant digits for values spanning magnitudes (KL): "0.000123", "1.52".
std::string fmt_sig(double v, int digits = 3);

// The `tern eval quant` table: type, file size, bits/weight, tensor types,
// PPL, PPL ratio, KL mean/median/p99, top-1, pp/tg tok/s and per core,
// cost per million generated tokens when a price was given.
std::string quant_table(const QuantEval& eval);

enum class QualityMetric { Kl, PplRatio };
// Quality (y: KL, log scale, or PPL ratio) against tg tok/s (x). With one
// evaluation, one series per quant type; with several, one series per
// evaluation (named by `names`) with the types as point labels.
Chart quant_chart(const std::vector<const QuantEval*>& evals, const std::vector<std::string>& names,
                  QualityMetric metric);

struct ReportOptions {
  std::string title = "tern results";
  std::string chart_prefix = "report";  // chart files: <prefix>-<n>.svg, beside the report
  RunSetup assembler;                   // this machine and command: used when inputs lack a setup
};

struct Report {
  std::string markdown;
  std::vector<std::pair<std::string, std::string>> charts;  // (file name, SVG document)
};

Report build_report(const std::vector<ResultFile>& files, const ReportOptions& options);

}  // namespace tern::eval
