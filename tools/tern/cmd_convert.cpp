// tern convert --from llama2c --model M.bin --vocab tok.bin -o OUT.gguf
// tern convert --from hf DIR -o OUT.gguf [--type F16|BF16|F32|Q8_0|Q4_K_M…] [-t THREADS]
#include <unistd.h>

#include <chrono>
#include <cstdio>

#include "args.h"
#include "commands.h"
#include "model/hf_model.h"
#include "model/llama2c.h"
#include "model/quant_rules.h"
#include "tokenizer/hf_tokenizer.h"
#include "quant_report.h"

namespace tern::cli {
namespace {

// Progress of a conversion on stderr: tensors and bytes read so far, and the
// read rate. A bar redrawn in place on a terminal; otherwise a plain line at
// every further 10% (logs, CI), so a long conversion still shows it is alive.
class ConvertProgress {
 public:
  ConvertProgress() : tty_(isatty(STDERR_FILENO) != 0), t0_(std::chrono::steady_clock::now()) {}

  void on_progress(const QuantizeProgress& p) {
    if (last_) bytes_done_ += last_->n_bytes_in;  // the previous tensor is written
    last_ = p.job;
    const double frac = p.n_elements_total ? static_cast<double>(p.n_elements_done) / p.n_elements_total : 1.0;
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
    const double gb = bytes_done_ / 1e9, rate = s > 0 ? gb / s : 0.0;
    const int pct = static_cast<int>(frac * 100.0);
    if (tty_) {
      constexpr int kWidth = 30;
      const int filled = static_cast<int>(frac * kWidth);
      std::fprintf(stderr, "\r\x1b[K[%4zu/%zu] [%s%s] %3d%% %.2f GB read, %.2f GB/s %s", std::min(p.i_tensor + 1, p.n_tensors),
                   p.n_tensors, std::string(filled, '=').c_str(), std::string(kWidth - filled, ' ').c_str(), pct, gb, rate,
                   p.job ? p.job->name.c_str() : "\n");
    } else if (pct >= next_pct_ || !p.job) {
      std::fprintf(stderr, "tern: convert: %zu/%zu tensors, %d%%, %.2f GB read, %.2f GB/s\n", p.i_tensor, p.n_tensors, pct, gb,
                   rate);
      next_pct_ = pct / 10 * 10 + 10;
    }
    std::fflush(stderr);
  }

 private:
  bool tty_;
  std::chrono::steady_clock::time_point t0_;
  const TensorJob* last_ = nullptr;
  uint64_t bytes_done_ = 0;
  int next_pct_ = 10;
};

int convert_hf(const std::string& dir, const std::string& out_path, const std::string& type_name, int n_threads) {
  const QuantScheme* scheme = find_quant_scheme(type_name);
  if (!scheme)
    return report(error(ErrorKind::InvalidArgument,
                        "convert: unknown --type '" + type_name + "' (known: " + quant_scheme_names() + ")"));
  if (n_threads < 0) return report(error(ErrorKind::InvalidArgument, "convert: -t must not be negative"));
  if (!hf::is_hf_dir(dir))
    return report(error(ErrorKind::InvalidArgument, "convert: '" + dir + "' is not a Hugging Face model directory (no config.json)"));
  auto tokenizer = read_hf_tokenizer(dir);  // required here: a GGUF without a vocabulary cannot run
  if (!tokenizer) return report(tokenizer.status());
  ThreadPool pool(n_threads > 0 ? n_threads : ThreadPool::default_threads());
  ConvertProgress progress;
  auto r = hf::convert_hf_model(dir, out_path, *scheme, std::move(tokenizer).value(), pool,
                                [&](const QuantizeProgress& p) { progress.on_progress(p); });
  if (!r) return report(r.status());
  QuantReportPrinter().print_summary("wrote " + out_path + " (" + std::string(scheme->name) + ")", *r);
  std::fprintf(stderr, "tern: convert: %.2f GB read in %.2f s, %.2f GB/s\n", r->n_bytes_in / 1e9, r->seconds,
               r->seconds > 0 ? r->n_bytes_in / 1e9 / r->seconds : 0.0);
  return 0;
}

}  // namespace

int cmd_convert(int argc, char** argv) {
  std::string from, dir, type_name = "F16";
  int n_threads = 0;
  Llama2cConvertOptions o;
  ArgParser args("convert",
                 "tern convert --from llama2c --model MODEL.bin --vocab TOKENIZER.bin -o OUT.gguf\n"
                 "       tern convert --from hf DIR -o OUT.gguf [--type F16|BF16|F32|Q8_0|Q4_K_M|...] [-t THREADS]");
  args.add("--from", &from, "source format: llama2c, hf (a Hugging Face model directory)");
  args.add_positional("DIR", &dir, "hf: the model directory (config.json, *.safetensors, tokenizer.json)", false);
  args.add("-m,--model", &o.model_path, "llama2c: source checkpoint");
  args.add("--vocab", &o.vocab_path, "llama2c: source tokenizer");
  args.add("-o,--output", &o.out_path, "GGUF file to write");
  args.add("--name", &o.name, "llama2c: general.name (default: the checkpoint's file name)");
  args.add("--type", &type_name, "hf: type of the matrices (default F16): " + quant_scheme_names());
  args.add("-t,--threads", &n_threads, "hf: threads (default: all cores)");
  if (auto s = args.parse(argc, argv); !s) return report(s);
  if (args.help_requested()) {
    std::fputs(args.help_text().c_str(), stdout);
    return 0;
  }
  if (from == "hf") {
    if (dir.empty() || o.out_path.empty()) return report(error(ErrorKind::InvalidArgument, "convert: --from hf needs DIR and -o"));
    return convert_hf(dir, o.out_path, type_name, n_threads);
  }
  if (from != "llama2c")
    return report(error(ErrorKind::InvalidArgument, from.empty() ? "convert: --from is required (llama2c, hf)"
                                                                  : "convert: unknown --from format '" + from + "' (llama2c, hf)"));
  if (!dir.empty()) return report(error(ErrorKind::InvalidArgument, "convert: --from llama2c takes --model, not a directory"));
  if (o.model_path.empty() || o.vocab_path.empty() || o.out_path.empty())
    return report(error(ErrorKind::InvalidArgument, "convert: --model, --vocab and -o are required"));
  if (auto s = convert_llama2c(o); !s) return report(s);
  std::fprintf(stderr, "tern: wrote %s\n", o.out_path.c_str());
  return 0;
}

}  // namespace tern::cli
