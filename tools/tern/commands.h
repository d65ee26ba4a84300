// tools/tern/commands.h — one function per `tern` subcommand. Each takes the
// arguments after the subcommand name and returns the process exit code.
#pragma once

#include <string>
#include <vector>

#include "core/status.h"

namespace tern::cli {

int cmd_run(int argc, char** argv);
int cmd_tokenize(int argc, char** argv);
int cmd_info(int argc, char** argv);
int cmd_perplexity(int argc, char** argv);
int cmd_convert(int argc, char** argv);
int cmd_bench(int argc, char** argv);
int cmd_bench_serve(int argc, char** argv);  // tern bench serve: serving load generator
int cmd_bench_sweep(int argc, char** argv);
int cmd_bench_spec(int argc, char** argv);
// tern bench's -b: comma-separated batch sizes in [1, 4096].
Result<std::vector<int>> parse_batch_list(const std::string& text);   // tern bench --draft: speculative decoding's speed-up  // tern bench sweep: the same over rates/concurrencies
int cmd_serve(int argc, char** argv);
int cmd_tune(int argc, char** argv);  // tern tune: successive halving over tern serve configurations
int cmd_quantize(int argc, char** argv);
int cmd_calibrate(int argc, char** argv);
int cmd_prune(int argc, char** argv);
int cmd_train(int argc, char** argv);
int cmd_distill(int argc, char** argv);
int cmd_synth(int argc, char** argv);
int cmd_batch(int argc, char** argv);
int cmd_eval(int argc, char** argv);
int cmd_report(int argc, char** argv);

// Prints "tern: <message>" to stderr and returns the exit code for its kind
// (2 for usage errors, 1 otherwise).
int report(const Status& status);

}  // namespace tern::cli
