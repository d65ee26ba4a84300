// tern quantize IN.gguf OUT.gguf TYPE [-t THREADS] [--pure] [--calib CALIB.gguf [--method imatrix|gptq|awq]]
// tern quantize IN.gguf OUT.gguf --auto --target-bpw B --calib CALIB.gguf [--auto-types T,...] [--method rtn|imatrix|gptq]
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

#include "args.h"
#include "commands.h"
#include "engine/auto_mix.h"
#include "engine/calibrate.h"
#include "model/quantize.h"
#include "quant/quant.h"
#include "quant_report.h"

namespace tern::cli {
namespace {

std::string kl_text(double kl) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6f", kl);
  return buf;
}

// stdout: one row per matrix (its options' measured KL, the chosen one in bold);
// stderr: the summary with the predicted and measured KL of the mix.
void print_auto(const AutoMixReport& r, const AutoMixOptions& o) {
  std::printf("| tensor | type | KL alone | options: KL with only this tensor as that type |\n|---|---|---:|---|\n");
  for (const auto& t : r.tensors) {
    std::string opts;
    for (size_t j = 0; j < t.types.size(); ++j) {
      const std::string item = std::string(gguf::type_name(t.types[j])) + " " + kl_text(t.kl[j]);
      opts += (opts.empty() ? "" : ", ") + (static_cast<int>(j) == t.chosen ? "**" + item + "**" : item);
    }
    std::printf("| %s | %s | %s | %s |\n", t.name.c_str(), std::string(gguf::type_name(t.types[t.chosen])).c_str(),
                kl_text(t.kl[t.chosen]).c_str(), opts.c_str());
  }
  std::fprintf(stderr,
               "tern: quantize --auto: %zu matrices, %d sensitivity passes over %d windows (%lld tokens scored) of the "
               "calibration text; target %.3f bits/weight, written %.3f; KL predicted %s (sum over tensors), measured %s "
               "(top-1 %.2f%%)\n",
               r.tensors.size(), r.n_passes, r.n_windows, static_cast<long long>(r.n_scored), o.target_bpw,
               r.written.bits_per_weight(), kl_text(r.predicted_kl).c_str(), kl_text(r.measured_kl).c_str(),
               100.0 * r.measured_top1);
}

int quantize_auto_cmd(AutoMixOptions o, const std::string& types_text, int n_threads) {
  auto candidates = parse_quant_schemes(types_text);  // empty: the method's defaults
  if (!candidates) return report(candidates.status().with_context("quantize --auto-types"));
  o.candidates = std::move(*candidates);
  ThreadPool pool(n_threads > 0 ? n_threads : ThreadPool::default_threads());
  const bool tty = isatty(STDERR_FILENO) != 0;
  auto r = quantize_auto(o, pool, [&](const std::string& what) {
    if (tty) std::fprintf(stderr, "\r\x1b[K%s", what.c_str());
  });
  if (tty) std::fprintf(stderr, "\r\x1b[K");
  if (!r) return report(r.status());
  print_auto(*r, o);
  QuantReportPrinter().print_summary("wrote " + o.out_path + " (auto mix, " + quant_method_name(o.method) + ")",
                                     r->written);
  return 0;
}

}  // namespace

int cmd_quantize(int argc, char** argv) {
  std::string in_path, out_path, type_name;
  int n_threads = 0;
  bool pure = false;
  std::string calib_path, method_name, calib_text;
  float damp = 0.01f;
  std::string sq_alpha_text;
  uint64_t gptq_memory = 4ull << 30;
  bool automatic = false;
  float target_bpw = 0;
  std::string auto_types;
  int auto_chunks = 16;
  ArgParser args("quantize", "tern quantize IN.gguf OUT.gguf TYPE [-t THREADS] [--pure] [--calib CALIB.gguf [--method imatrix|gptq|awq]]\n"
                             "       tern quantize IN.gguf OUT.gguf W8A8 [--calib CALIB.gguf [--sq-alpha A]]   (SmoothQuant)\n"
                             "       tern quantize IN.gguf OUT.gguf F8_E4M3|F8_E5M2   (FP8 weights, per-row scales)\n"
                             "       tern quantize IN.gguf OUT.gguf --auto --target-bpw B --calib CALIB.gguf [--auto-types T,...] [--method rtn|imatrix|gptq]");
  args.add_positional("IN.gguf", &in_path, "model to read (any supported tensor types)");
  args.add_positional("OUT.gguf", &out_path, "model to write (atomically: OUT.gguf.tmp, then renamed)");
  args.add_positional("TYPE", &type_name, "block type or llama.cpp mix: " + quant_scheme_names(), false);
  args.add_flag("--auto", &automatic, "choose each matrix's type by measured sensitivity (KL on the calibration text) within --target-bpw");
  args.add("--target-bpw", &target_bpw, "--auto: bits per weight of the whole file's tensor data");
  args.add("--auto-types", &auto_types, "--auto: candidate types (default per method; rtn: " + default_auto_candidates(QuantMethod::Rtn) + ")");
  args.add("--auto-chunks", &auto_chunks, "--auto: calibration windows per sensitivity measurement (default 16)");
  args.add("-t,--threads", &n_threads, "threads (default: all cores)");
  args.add_flag("--pure", &pure, "every matrix TYPE's base type: no mix upgrades (only the row-length fallback)");
  args.add("--calib", &calib_path, "calibration file from tern calibrate: rounding weighted by input statistics");
  args.add("--method", &method_name, "rtn (plain rounding), imatrix (default with --calib), gptq, awq, or smoothquant (W8A8; its default with --calib)");
  args.add("--sq-alpha", &sq_alpha_text, "smoothquant: migration strength alpha in [0, 1] for every layer (default 0.5), or 'search' (per layer, by a rounding-noise model)");
  args.add("--calib-text", &calib_text, "gptq: the calibration text, if it moved since tern calibrate (checked by size and hash)");
  args.add("--gptq-damp", &damp, "gptq: damping, a fraction of H's mean diagonal (default 0.01)");
  args.add("--gptq-memory", &gptq_memory, "gptq: bytes of H held at once; more tensors need more passes (default 4 GiB)");
  if (auto s = args.parse(argc, argv); !s) return report(s);
  if (args.help_requested()) {
    std::fputs(args.help_text().c_str(), stdout);
    return 0;
  }
  if (n_threads < 0) return report(error(ErrorKind::InvalidArgument, "quantize: -t must not be negative"));
  if (automatic) {
    if (!type_name.empty())
      return report(error(ErrorKind::InvalidArgument, "quantize: --auto chooses the types; give no TYPE (candidates: --auto-types)"));
    if (calib_path.empty())
      return report(error(ErrorKind::InvalidArgument, "quantize: --auto needs --calib CALIB.gguf: sensitivity is measured on "
                                                      "its text (write one with tern calibrate)"));
    if (target_bpw <= 0) return report(error(ErrorKind::InvalidArgument, "quantize: --auto needs --target-bpw B (bits per weight)"));
    if (pure) return report(error(ErrorKind::InvalidArgument, "quantize: --pure has no meaning with --auto"));
    AutoMixOptions o;
    o.in_path = in_path;
    o.out_path = out_path;
    o.target_bpw = target_bpw;
    auto method = parse_quant_method(method_name.empty() ? "imatrix" : method_name);
    if (!method) return report(method.status());
    o.method = *method;
    o.calib_path = calib_path;
    o.calib_text = calib_text;
    o.n_chunks = auto_chunks;
    if (!(damp > 0.0f && damp < 10.0f)) return report(error(ErrorKind::InvalidArgument, "quantize: --gptq-damp must be in (0, 10)"));
    o.gptq_damp = damp;
    o.gptq_memory = gptq_memory;
    return quantize_auto_cmd(std::move(o), auto_types, n_threads);
  }
  if (type_name.empty())
    return report(error(ErrorKind::InvalidArgument, "quantize: missing TYPE (a block type or mix; or --auto --target-bpw B)"));
  const QuantScheme* scheme = find_quant_scheme(type_name);
  if (!scheme)
    return report(error(ErrorKind::InvalidArgument,
                        "quantize: unknown type '" + type_name + "' (known: " + quant_scheme_names() + ")"));
  QuantizeOptions o{in_path, out_path, pure ? pure_scheme(*scheme) : *scheme};
  // With --calib, each scheme's calibrated method: W8A8 smoothquant, FP8 none (rtn), block types imatrix.
  if (method_name.empty())
    method_name = calib_path.empty()                        ? "rtn"
                  : scheme->base == gguf::GgmlType::I8      ? "smoothquant"
                  : quant::has_row_scale(scheme->base)      ? "rtn"
                                                            : "imatrix";
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
  if (!sq_alpha_text.empty() && o.method != QuantMethod::SmoothQuant)
    return report(error(ErrorKind::InvalidArgument, "quantize: --sq-alpha is for --method smoothquant"));
  if (sq_alpha_text == "search") {
    o.sq_alpha.reset();
  } else if (!sq_alpha_text.empty()) {
    char* end = nullptr;
    const float a = std::strtof(sq_alpha_text.c_str(), &end);
    if (end == sq_alpha_text.c_str() || *end != '\0' || !(a >= 0.0f && a <= 1.0f))
      return report(error(ErrorKind::InvalidArgument, "quantize: --sq-alpha must be a number in [0, 1] or 'search'"));
    o.sq_alpha = a;
  }
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
