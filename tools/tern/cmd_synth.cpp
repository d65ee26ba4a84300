// tern synth --arch A --dim D --layers L --heads H --kv-heads KV --ffn F
//            --vocab-from VOCAB.gguf --type T -o OUT.gguf [--head-dim N] [--window N] [--ctx N] [--seed S]
//            [-t THREADS]
#include <cstdio>

#include "args.h"
#include "commands.h"
#include "model/synth.h"
#include "model/synth_embed.h"
#include "quant_report.h"

namespace tern::cli {

int cmd_synth(int argc, char** argv) {
  SynthOptions o;
  std::string type_name;
  int n_threads = 0;
  std::string embed_path;
  bool pure = false;
  ArgParser args("synth",
                 "tern synth --arch llama|llama3|qwen3|phi3|gemma2|gemma3|mixtral|qwen2moe|qwen3moe|mamba|mamba2|nemotron_h --dim D --layers L --heads H --kv-heads KV "
                 "--ffn F --vocab-from VOCAB.gguf --type T -o OUT.gguf [--head-dim N] [--window N] [--ctx N] [--seed S] "
                 "[--experts N --experts-used K [--expert-ffn F] [--shared-ffn F]] [-t THREADS]\n       tern synth --embed SMALL.gguf --dim D --layers L --heads H --kv-heads KV --ffn F "
                 "--type T -o OUT.gguf");
  args.add("--arch", &o.arch,
           "architecture: llama, llama3 (llama with Llama 3.1 rope_freqs), qwen3, phi3, gemma2, gemma3, mixtral "
           "(written as llama with experts), qwen2moe, qwen3moe, mamba (Mamba-1: no --heads/--ffn), mamba2 (Mamba-2: --ssm-head-dim, --ssm-groups), nemotron_h (Mamba-2, "
           "attention and FFN layers: --layer-pattern)");
  args.add("--dim", &o.n_embd, "embedding width");
  args.add("--layers", &o.n_layer, "number of blocks");
  args.add("--heads", &o.n_head, "attention heads (must divide --dim unless --head-dim is given)");
  args.add("--kv-heads", &o.n_head_kv, "key/value heads (must divide --heads; default --heads)");
  args.add("--head-dim", &o.head_dim, "head size (default --dim / --heads; Qwen3 uses 128, Gemma 256; mamba2: 64)");
  args.add("--ffn", &o.n_ff, "feed-forward width");
  args.add("--experts", &o.n_expert, "mixtral/qwen2moe/qwen3moe: experts per layer (expert_count)");
  args.add("--experts-used", &o.n_expert_used, "experts each token is routed to (expert_used_count)");
  args.add("--expert-ffn", &o.n_ff_exp,
           "qwen2moe/qwen3moe: one expert's width (expert_feed_forward_length; default --ffn / --experts-used); "
           "mixtral's experts are --ffn wide");
  args.add("--shared-ffn", &o.n_ff_shexp, "qwen2moe: the shared expert's width (default --ffn)");
  args.add("--ssm-state", &o.d_state, "mamba, mamba2, nemotron_h: state values per channel (ssm.state_size, default 16 / 128)");
  args.add("--ssm-groups", &o.n_group, "mamba2, nemotron_h: groups of heads sharing B and C (ssm.group_count, default 1)");
  args.add("--ssm-head-dim", &o.ssm_head_dim, "mamba2, nemotron_h: the mixer's head width (default 64; mamba2 also reads --head-dim)");
  args.add("--layer-pattern", &o.layer_pattern,
           "nemotron_h: one character per layer: M Mamba-2 mixer, * attention, - FFN (default M-M*- repeated)");
  args.add("--window", &o.window, "gemma2/3: sliding window of the local layers (default 4096 gemma2, 1024 gemma3)");
  args.add("--vocab-from", &o.vocab_path, "GGUF whose tokenizer.* keys (and vocabulary size) are copied");
  args.add("--type", &type_name, "tensor type or mix, as for tern quantize: " + quant_scheme_names());
  args.add_flag("--pure", &pure, "every matrix the type's base type (no mix upgrades)");
  args.add("-o,--output", &o.out_path, "GGUF file to write");
  args.add("--embed", &embed_path,
           "SMALL.gguf: a model of the given shape that predicts exactly what SMALL does (its weights padded with "
           "zeros, extra layers that add nothing; see docs/spec.md). Replaces --arch and --vocab-from");
  args.add("--ctx", &o.n_ctx, "context_length (default 4096)");
  args.add("--weight-std", &o.weight_std, "standard deviation of the random matrices (default 0.02)");
  args.add("--seed", &o.seed, "random seed (default 0); the same seed gives the same bytes");
  args.add("--name", &o.name, "general.name (default synth-<arch>-<dim>x<layers>)");
  args.add("-t,--threads", &n_threads, "threads (default: all cores)");
  if (auto s = args.parse(argc, argv); !s) return report(s);
  if (args.help_requested()) {
    std::fputs(args.help_text().c_str(), stdout);
    return 0;
  }
  if (type_name.empty()) return report(error(ErrorKind::InvalidArgument, "synth: --type is required"));
  const QuantScheme* scheme = find_quant_scheme(type_name);
  if (!scheme)
    return report(error(ErrorKind::InvalidArgument,
                        "synth: unknown type '" + type_name + "' (known: " + quant_scheme_names() + ")"));
  o.scheme = pure ? pure_scheme(*scheme) : *scheme;
  if (n_threads < 0) return report(error(ErrorKind::InvalidArgument, "synth: -t must not be negative"));
  if (!embed_path.empty()) {
    if (o.out_path.empty()) return report(error(ErrorKind::InvalidArgument, "synth: -o is required"));
    EmbedOptions e{embed_path, o.out_path, o.name, o.n_embd, o.n_layer, o.n_head, o.n_head_kv, o.n_ff, o.scheme};
    ThreadPool pool(n_threads > 0 ? n_threads : ThreadPool::default_threads());
    QuantReportPrinter printer;
    auto r = synth_embed_model(e, pool, [&](const QuantizeProgress& p) { printer.on_progress(p); });
    if (!r) return report(r.status());
    printer.print_summary("wrote " + o.out_path + " (" + std::string(scheme->name) + ", " + embed_path + " embedded)", *r);
    return 0;
  }
  if (auto s = validate_synth_options(o); !s) return report(s);
  ThreadPool pool(n_threads > 0 ? n_threads : ThreadPool::default_threads());
  QuantReportPrinter printer;
  auto r = synth_model(o, pool, [&](const QuantizeProgress& p) { printer.on_progress(p); });
  if (!r) return report(r.status());
  printer.print_summary("wrote " + o.out_path + " (" + std::string(scheme->name) + ", seed " + std::to_string(o.seed) + ")", *r);
  return 0;
}

}  // namespace tern::cli
