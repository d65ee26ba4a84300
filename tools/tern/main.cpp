// tern — command-line entry point: dispatches to one subcommand.
#include <cstdio>
#include <cstring>
#include <new>

#include "commands.h"
#include "output.h"

namespace tern::cli {

int report(const Status& status) {
  std::fprintf(stderr, "tern: %s\n", status.message().c_str());
  return status.kind() == ErrorKind::InvalidArgument ? 2 : 1;
}

namespace {

struct Command {
  const char* name;
  int (*fn)(int, char**);
  const char* summary;
};

constexpr Command kCommands[] = {
    {"run", cmd_run, "generate text from a prompt"},
    {"tokenize", cmd_tokenize, "print the token ids of a text"},
    {"info", cmd_info, "print a GGUF file's metadata and tensors"},
    {"perplexity", cmd_perplexity, "perplexity of a model on a text file"},
    {"convert", cmd_convert, "convert a llama2.c checkpoint to GGUF"},
    {"quantize", cmd_quantize, "re-encode a GGUF model's tensors (Q4_K_M, Q8_0, F16, ...)"},
    {"calibrate", cmd_calibrate, "record a model's linear-layer input statistics on text (for quantize --calib)"},
    {"train", cmd_train, "train a Llama-family model on a text (AdamW, checkpoints, a loss curve)"},
    {"distill", cmd_distill, "train a student to match a teacher's output distributions (KL with temperature)"},
    {"prune", cmd_prune, "zero a fraction of the linear layers' weights (magnitude, wanda, sparsegpt; N:M patterns)"},
    {"synth", cmd_synth, "write a random-weight model of given shapes (benchmarks)"},
    {"serve", cmd_serve, "OpenAI-compatible HTTP server with a web playground and Prometheus metrics"},
    {"tune", cmd_tune, "search serving settings for the best goodput under SLOs; writes a serve --config file"},
    {"bench", cmd_bench, "measure pp/tg/batched throughput against the machine's limits"},
    {"batch", cmd_batch, "run a JSONL file of requests through the serving engine"},
    {"eval", cmd_eval, "eval quant: quantize a model to several types, table of quality (PPL, KL) and speed"},
    {"report", cmd_report, "assemble result JSON files into a markdown report with tables and SVG charts"},
};

void print_usage(FILE* out) {
  std::fprintf(out, "usage: tern <command> [options]   (tern <command> --help for details)\n\ncommands:\n");
  for (const auto& c : kCommands) std::fprintf(out, "  %-12s %s\n", c.name, c.summary);
}

}  // namespace
}  // namespace tern::cli

int main(int argc, char** argv) {
  using namespace tern::cli;
  if (argc < 2) {
    print_usage(stderr);
    return 2;
  }
  if (!std::strcmp(argv[1], "-h") || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "help")) {
    print_usage(stdout);
    return 0;
  }
  for (const auto& c : kCommands) {
    if (std::strcmp(argv[1], c.name) != 0) continue;
    int rc = 1;
    try {
      rc = c.fn(argc - 2, argv + 2);
    } catch (const std::bad_alloc&) {
      // An allocation the limits did not foresee (ulimit -v, a container's
      // memory limit): one clear line and exit 1, not an abort.
      std::fprintf(stderr, "tern: %s: out of memory\n", c.name);
      return 1;
    }
    // Output that never reached its destination is a failure even when the
    // command itself succeeded (tern info > /dev/full must not exit 0). A
    // command that failed has already said why; one message is enough.
    const tern::Status closed = close_stdout();
    return rc == 0 && !closed ? report(closed) : rc;
  }
  std::fprintf(stderr, "tern: unknown command '%s'\n", argv[1]);
  print_usage(stderr);
  return 2;
}
