// tern quantize IN.gguf OUT.gguf TYPE [-t THREADS] [--pure] [--calib CALIB.gguf [--method imatrix|gptq|awq]]
#include <cstdio>

#include "args.h"
#include "commands.h"
#include "engine/calibrate.h"
#include "model/quantize.h"
#include "quant_report.h"

namespace tern::cli {

int cmd_quantize(int argc, char** argv) {
  std::string in_path, out_path, type_name;
  int n_threads = 0;
  bool pure = false;
  std::string calib_path, method_name, calib_text;
  float damp = 0.01f;
  uint64_t gptq_memory = 4ull << 30;
  ArgParser args("quantize", "tern quantize IN.gguf OUT.gguf TYPE [-t THREADS] [--pure] [--calib CALIB.gguf [--method imatrix|gptq|awq]]");
  args.add_positional("IN.gguf", &in_path, "model to read (any supported tensor types)");
  args.add_positional("OUT.gguf", &out_path, "model to write (atomically: OUT.gguf.tmp, then renamed)");
  args.add_positional("TYPE", &type_name, "block type or llama.cpp mix: " + quant_scheme_names());
  args.add("-t,--threads", &n_threads, "threads (default: all cores)");
  args.add_flag("--pure", &pure, "every matrix TYPE's base type: no mix upgrades (only the row-length fallback)");
  args.add("--calib", &calib_path, "calibration file from tern calibrate: rounding weighted by input statistics");
  args.add("--method", &method_name, "rtn (plain rounding), imatrix (default with --calib), gptq or awq");
  args.add("--calib-text", &calib_text, "gptq: the calibration text, if it moved since tern calibrate (checked by size and hash)");
  args.add("--gptq-damp", &damp, "gptq: damping, a fraction of H's mean diagonal (default 0.01)");
  args.add("--gptq-memory", &gptq_memory, "gptq: bytes of H held at once; more tensors need more passes (default 4 GiB)");
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
  if (method_name.empty()) method_name = calib_path.empty() ? "rtn" : "imatrix";
  auto method = parse_quant_method(method_name);
  if (!method) return report(method.status());
  o.method = *method;
  if (o.method != QuantMethod::Rtn && calib_path.empty())
    return report(error(ErrorKind::InvalidArgument, "quantize: --method " + method_name +
                                                        " needs --calib CALIB.gguf (write one with tern calibrate)"));
  if (o.method == QuantMethod::Rtn && !calib_path.empty())
    return report(error(ErrorKind::InvalidArgument, "quantize: --calib is not used by --method rtn"));
  if (!(damp > 0.0f && damp < 10.0f)) return report(error(ErrorKind::InvalidArgument, "quantize: --gptq-damp must be in (0, 10)"));
  o.gptq_damp = damp;
  std::unique_ptr<CalibrationSource> calib;
  if (o.method != QuantMethod::Rtn) {
    auto src = CalibrationSource::for_method(o.method, o.scheme, calib_path, in_path, calib_text, gptq_memory, n_threads);
    if (!src) return report(src.status());
    calib = std::move(*src);
    calib->on_pass = [&](int pass, int n) {
      std::fprintf(stderr, "\ntern: %s: H from the calibration text, pass %d of %d\n", method_name.c_str(), pass + 1, n);
    };
    o.inputs = [&](const std::string& key) { return calib->get(key); };
  }
  ThreadPool pool(n_threads > 0 ? n_threads : ThreadPool::default_threads());
  QuantReportPrinter printer;
  auto r = quantize_gguf(o, pool, [&](const QuantizeProgress& p) { printer.on_progress(p); });
  if (!r) return report(r.status());
  printer.print_summary("wrote " + out_path + " (" + std::string(scheme->name) + (pure ? ", pure" : "") +
                            (o.method != QuantMethod::Rtn ? std::string(", ") + quant_method_name(o.method) + ": " +
                                                                std::to_string(r->n_calibrated) + " tensors calibrated"
                                                          : std::string()) +
                            ")",
                        *r);
  return 0;
}

}  // namespace tern::cli
