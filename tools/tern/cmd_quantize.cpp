// tern quantize IN.gguf OUT.gguf TYPE [-t THREADS] [--pure]
#include <cstdio>

#include "args.h"
#include "commands.h"
#include "model/quantize.h"
#include "quant_report.h"

namespace tern::cli {

int cmd_quantize(int argc, char** argv) {
  std::string in_path, out_path, type_name;
  int n_threads = 0;
  bool pure = false;
  ArgParser args("quantize", "tern quantize IN.gguf OUT.gguf TYPE [-t THREADS] [--pure]");
  args.add_positional("IN.gguf", &in_path, "model to read (any supported tensor types)");
  args.add_positional("OUT.gguf", &out_path, "model to write (atomically: OUT.gguf.tmp, then renamed)");
  args.add_positional("TYPE", &type_name, "block type or llama.cpp mix: " + quant_scheme_names());
  args.add("-t,--threads", &n_threads, "threads (default: all cores)");
  args.add_flag("--pure", &pure, "every matrix TYPE's base type: no mix upgrades (only the row-length fallback)");
  if (auto s = args.parse(argc, argv); !s) return report(s);
  if (args.help_requested()) {
    std::fputs(args.help_text().c_str(), stdout);
    return 0;
  }
  const QuantScheme* scheme = find_quant_scheme(type_name);
  if (!scheme)
    return report(error(ErrorKind::InvalidArgument,
                        "quantize: unknown type '" + type_name + "' (known: " + quant_scheme_names() + ")"));
  if (n_threads < 0) return report(error(ErrorKind::InvalidArgument, "quantize: -t must not be negative"));
  QuantizeOptions o{in_path, out_path, pure ? pure_scheme(*scheme) : *scheme};
  ThreadPool pool(n_threads > 0 ? n_threads : ThreadPool::default_threads());
  QuantReportPrinter printer;
  auto r = quantize_gguf(o, pool, [&](const QuantizeProgress& p) { printer.on_progress(p); });
  if (!r) return report(r.status());
  printer.print_summary("wrote " + out_path + " (" + std::string(scheme->name) + (pure ? ", pure" : "") + ")", *r);
  return 0;
}

}  // namespace tern::cli
