// tern calibrate -m MODEL -f TEXT -o CALIB.gguf [-c CTX] [--chunks N] [-t THREADS]
#include <unistd.h>

#include <cstdio>

#include "args.h"
#include "commands.h"
#include "engine/calibrate.h"

namespace tern::cli {

int cmd_calibrate(int argc, char** argv) {
  CalibrationOptions o;
  std::string out_path;
  ArgParser args("calibrate", "tern calibrate -m MODEL -f TEXT -o CALIB.gguf [-c CTX] [--chunks N] [-t THREADS]");
  args.add("-m,--model", &o.model_path, "GGUF model whose linear-layer inputs are recorded");
  args.add("-f,--file", &o.text_path,
           "calibration text (keep it disjoint from evaluation text: tern eval quant --calib refuses overlap)");
  args.add("-o,--output", &out_path, "calibration file to write (GGUF: per-column statistics, the text's identity)");
  args.add("-c,--ctx-size", &o.n_ctx, "window size in tokens (default 512)");
  args.add("--chunks", &o.n_chunks, "use only the first N windows (default all)");
  args.add("-t,--threads", &o.n_threads, "threads (default: all cores)");
  if (auto s = args.parse(argc, argv); !s) return report(s);
  if (args.help_requested()) {
    std::fputs(args.help_text().c_str(), stdout);
    return 0;
  }
  if (o.model_path.empty() || o.text_path.empty() || out_path.empty())
    return report(error(ErrorKind::InvalidArgument, "calibrate: -m MODEL, -f TEXT and -o CALIB.gguf are required"));
  if (o.n_threads < 0) return report(error(ErrorKind::InvalidArgument, "calibrate: -t must not be negative"));
  const bool tty = isatty(STDERR_FILENO);
  auto run = calibrate(o, [&](int w, int n) {
    if (tty) std::fprintf(stderr, "\rcalibrate: window %d/%d", w, n);
  });
  if (tty) std::fputc('\n', stderr);
  if (!run) return report(run.status());
  if (auto s = write_calibration(run->calibration, out_path); !s) return report(s);
  std::fprintf(stderr, "tern: wrote %s: %zu matrices, %lld tokens in %d windows of %d, calibration-text perplexity %.4f, %.1f s\n",
               out_path.c_str(), run->calibration.inputs.size(), static_cast<long long>(run->calibration.text.n_tokens),
               run->calibration.text.n_chunks, run->calibration.text.n_ctx, run->perplexity, run->seconds);
  return 0;
}

}  // namespace tern::cli
