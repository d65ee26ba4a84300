// tern report RESULTS.json... -o REPORT.md [--title T]
// Assembles result files (tern eval quant --json, tern bench --json, tern
// bench serve --json) into one markdown report: setup, tables, and SVG charts
// written beside the report and embedded as images.
#include <cstdio>
#include <filesystem>

#include "args.h"
#include "commands.h"
#include "core/atomic_file.h"
#include "core/input_file.h"
#include "eval/report.h"

namespace tern::cli {

int cmd_report(int argc, char** argv) {
  std::string out_path, title = "tern results";
  ArgParser args("report", "tern report RESULTS.json... -o REPORT.md [--title TITLE]");
  args.add("-o,--output", &out_path, "markdown file to write; charts go beside it as <name>-<n>.svg");
  args.add("--title", &title, "the report's heading (default \"tern results\")");
  // The parser binds positionals one by one; result files are the arguments
  // that are neither flags nor flag values, collected before parsing.
  std::vector<std::string> inputs;
  std::vector<char*> flags;
  for (int i = 0; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "-o" || arg == "--output" || arg == "--title") {
      flags.push_back(argv[i]);
      if (i + 1 < argc) flags.push_back(argv[++i]);
    } else if (!arg.empty() && arg[0] == '-') {
      flags.push_back(argv[i]);
    } else {
      inputs.push_back(arg);
    }
  }
  if (auto s = args.parse(static_cast<int>(flags.size()), flags.data()); !s) return report(s);
  if (args.help_requested()) {
    std::fputs(args.help_text().c_str(), stdout);
    return 0;
  }
  if (inputs.empty() || out_path.empty())
    return report(error(ErrorKind::InvalidArgument, "report: give one or more RESULTS.json and -o REPORT.md"));

  std::vector<eval::ResultFile> files;
  for (const auto& path : inputs) {
    auto text = read_file(path);
    if (!text) return report(text.status());
    auto parsed = eval::parse_result_json(*text, path);
    if (!parsed) return report(parsed.status());
    files.push_back(std::move(*parsed));
  }
  const std::filesystem::path out(out_path);
  eval::ReportOptions o;
  o.title = title;
  o.chart_prefix = out.stem().string();
  o.assembler = eval::collect_setup(argc, argv, "tern report");
  const eval::Report r = eval::build_report(files, o);
  for (const auto& [name, svg] : r.charts)
    if (auto s = write_file_atomically((out.parent_path() / name).string(), svg); !s)
      return report(s.with_context("report"));
  if (auto s = write_file_atomically(out_path, r.markdown); !s) return report(s.with_context("report"));
  std::fprintf(stderr, "tern: wrote %s (%zu results, %zu charts)\n", out_path.c_str(), files.size(), r.charts.size());
  return 0;
}

}  // namespace tern::cli
