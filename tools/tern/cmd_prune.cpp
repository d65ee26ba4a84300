// tern prune IN.gguf OUT.gguf --method magnitude|wanda|sparsegpt (--sparsity S | --pattern N:M)
//            [--calib CALIB.gguf [--calib-text T]] [--damp D] [--block-cols B] [-t THREADS]
// tern prune IN.gguf OUT.gguf --structured heads=F,ffn=F,layers=N --calib CALIB.gguf [-t THREADS]
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "args.h"
#include "commands.h"
#include "engine/calibrate.h"
#include "engine/head_ablation.h"
#include "gguf/reader.h"
#include "model/prune.h"
#include "model/prune_structured.h"
#include "quant/prune.h"
#include "quant_report.h"

namespace tern::cli {
namespace {

// stdout: one row per pruned matrix; the share of zeros before and after.
void print_tensors(const PruneReport& r) {
  std::printf("| tensor | weights | zero before | zero after | sparsity |\n|---|---:|---:|---:|---:|\n");
  for (const auto& t : r.tensors)
    std::printf("| %s | %llu | %llu | %llu | %.4f |\n", t.name.c_str(), static_cast<unsigned long long>(t.n_weights),
                static_cast<unsigned long long>(t.n_zero_before), static_cast<unsigned long long>(t.n_zero_after),
                t.n_weights ? static_cast<double>(t.n_zero_after) / t.n_weights : 0.0);
}

// stdout: one row per input layer, what it keeps.
void print_plan(const StructuredPlan& p) {
  std::printf("| layer | kept | K/V heads kept | FFN channels kept | influence |\n|---:|---|---|---:|---:|\n");
  for (int il = 0; il < p.n_layer_in; ++il) {
    const bool kept = std::binary_search(p.layers.begin(), p.layers.end(), il);
    std::string heads;
    for (int h : p.kv_heads[static_cast<size_t>(il)]) heads += (heads.empty() ? "" : " ") + std::to_string(h);
    const double infl = p.layer_influence.empty() ? NAN : p.layer_influence[static_cast<size_t>(il)];
    std::printf("| %d | %s | %s | %zu of %d | %s |\n", il, kept ? "yes" : "removed", kept ? heads.c_str() : "-",
                kept ? p.ffn[static_cast<size_t>(il)].size() : size_t{0}, p.n_ff_in,
                std::isnan(infl) ? "-" : std::to_string(infl).c_str());
  }
}

struct StructuredArgs {
  std::string spec, heads_by = "ablation", calib_text;
  int head_windows = 8;
};

int structured_prune(const std::string& in_path, const std::string& out_path, const StructuredArgs& a,
                     const std::string& calib_path, int n_threads) {
  const std::string& spec_text = a.spec;
  auto spec = parse_structured_spec(spec_text);
  if (!spec) return report(spec.status().with_context("prune"));
  if (calib_path.empty())
    return report(error(ErrorKind::InvalidArgument, "prune --structured ranks heads, channels and layers by their "
                                                    "activations: give --calib CALIB.gguf (write one with tern calibrate)"));
  auto calib = read_calibration(calib_path);
  if (!calib) return report(calib.status());
  auto file = gguf::GgufFile::open(in_path);
  if (!file) return report(file.status());
  if (a.heads_by != "ablation" && a.heads_by != "activation")
    return report(error(ErrorKind::InvalidArgument, "prune: --heads-by is ablation or activation, not '" + a.heads_by + "'"));
  if (a.head_windows < 1) return report(error(ErrorKind::InvalidArgument, "prune: --head-windows must be at least 1"));
  std::vector<std::vector<double>> head_scores;
  if (spec->heads > 0 && a.heads_by == "ablation") {
    HeadAblationOptions ho;
    ho.model_path = in_path;
    ho.text_path = a.calib_text.empty() ? calib->text.path : a.calib_text;
    ho.expect_text = &calib->text;
    ho.n_ctx = calib->text.n_ctx;
    ho.n_windows = a.head_windows;
    ho.n_threads = n_threads;
    auto ab = ablate_head_groups(ho);
    if (!ab) return report(ab.status().with_context("prune --structured heads (ranking head groups by ablation)"));
    head_scores = ab->rise;
    std::fprintf(stderr, "tern: head groups ranked by the loss rise without each: %zu passes over %d windows of %d tokens, %.1f s\n",
                 1 + ab->rise.size() * (ab->rise.empty() ? 0 : ab->rise[0].size()), ab->n_windows, ho.n_ctx, ab->seconds);
  }
  auto plan = plan_structured(*file, *calib, *spec, head_scores.empty() ? nullptr : &head_scores);
  if (!plan) return report(plan.status().with_context(in_path));
  ThreadPool pool(n_threads > 0 ? n_threads : ThreadPool::default_threads());
  QuantReportPrinter printer;
  auto r = prune_structured_gguf(in_path, out_path, *spec, *plan, pool, [&](const QuantizeProgress& p) { printer.on_progress(p); });
  if (!r) return report(r.status());
  print_plan(*plan);
  std::fprintf(stderr,
               "tern: wrote %s (structured %s): %zu of %d layers, %d of %d query heads (%d of %d K/V), %d of %d FFN "
               "channels; %llu of %llu weights (%.2f%%), %.1f s\n",
               out_path.c_str(), spec->text().c_str(), plan->layers.size(), plan->n_layer_in, plan->n_head(),
               plan->n_head_in, plan->n_head_kv(), plan->n_head_kv_in, plan->n_ff(), plan->n_ff_in,
               static_cast<unsigned long long>(r->n_weights_out), static_cast<unsigned long long>(r->n_weights_in),
               r->n_weights_in ? 100.0 * r->n_weights_out / r->n_weights_in : 0.0, r->written.seconds);
  return 0;
}

}  // namespace

int cmd_prune(int argc, char** argv) {
  std::string in_path, out_path, method_name, pattern_text, calib_path, calib_text;
  StructuredArgs st;
  float sparsity = -1.0f, damp = 0.01f;
  int64_t block_cols = 128;
  uint64_t h_memory = 4ull << 30;
  int n_threads = 0;
  ArgParser args("prune", "tern prune IN.gguf OUT.gguf --method magnitude|wanda|sparsegpt (--sparsity S | --pattern N:M) "
                          "[--calib CALIB.gguf] [-t THREADS]\n"
                          "       tern prune IN.gguf OUT.gguf --structured heads=F,ffn=F,layers=N --calib CALIB.gguf");
  args.add_positional("IN.gguf", &in_path, "model to read (its linear layers F32, F16 or BF16)");
  args.add_positional("OUT.gguf", &out_path, "model to write (atomically: OUT.gguf.tmp, then renamed)");
  args.add("--method", &method_name,
           "magnitude (smallest |w| of each matrix), wanda (|w|·‖x‖ per row) or sparsegpt (per row, the kept weights "
           "absorb the error); default magnitude, or sparsegpt with --calib");
  args.add("--sparsity", &sparsity, "fraction of each linear layer's weights set to zero, in [0, 1)");
  args.add("--pattern", &pattern_text, "N:M: at most N nonzero weights in every M consecutive ones of a row (e.g. 2:4)");
  args.add("--structured", &st.spec,
           "heads=F,ffn=F,layers=N: remove that fraction of each layer's K/V head groups and FFN channels and N whole "
           "layers, the least important on --calib's activations; writes a smaller dense model");
  args.add("--calib", &calib_path, "calibration file from tern calibrate (wanda, sparsegpt)");
  args.add("--heads-by", &st.heads_by,
           "--structured heads: ablation (the calibration loss rise with each K/V head group removed alone; one pass "
           "over --head-windows windows per group, the default) or activation (E[x²]·‖W_o col‖², no passes)");
  args.add("--head-windows", &st.head_windows, "--structured heads by ablation: calibration windows per pass (default 8)");
  args.add("--calib-text", &calib_text,
           "sparsegpt, --structured heads: the calibration text, if it moved since tern calibrate (checked by size and hash)");
  args.add("--damp", &damp, "sparsegpt: damping, a fraction of H's mean diagonal (default 0.01)");
  args.add("--block-cols", &block_cols, "sparsegpt: columns whose mask is chosen together (default 128)");
  args.add("--h-memory", &h_memory, "sparsegpt: bytes of H held at once; more tensors need more passes (default 4 GiB)");
  args.add("-t,--threads", &n_threads, "threads (default: all cores)");
  if (auto s = args.parse(argc, argv); !s) return report(s);
  if (args.help_requested()) {
    std::fputs(args.help_text().c_str(), stdout);
    return 0;
  }
  if (n_threads < 0) return report(error(ErrorKind::InvalidArgument, "prune: -t must not be negative"));
  if (!st.spec.empty()) {
    if (!method_name.empty() || !pattern_text.empty() || sparsity >= 0.0f)
      return report(error(ErrorKind::InvalidArgument,
                          "prune: --structured removes whole heads, channels and layers; --method, --sparsity and "
                          "--pattern zero single weights: run them as two tern prune commands"));
    st.calib_text = calib_text;
    return structured_prune(in_path, out_path, st, calib_path, n_threads);
  }
  PruneModelOptions o;
  o.in_path = in_path;
  o.out_path = out_path;
  if (method_name.empty()) method_name = calib_path.empty() ? "magnitude" : "sparsegpt";
  auto method = quant::parse_prune_method(method_name);
  if (!method) return report(method.status().with_context("prune"));
  o.prune.method = *method;
  if (!pattern_text.empty()) {
    auto p = quant::parse_nm_pattern(pattern_text);
    if (!p) return report(p.status().with_context("prune --pattern"));
    o.prune.pattern = *p;
    if (sparsity >= 0.0f && std::abs(sparsity - p->sparsity()) > 1e-6)
      return report(error(ErrorKind::InvalidArgument, "prune: --pattern " + pattern_text + " zeroes " +
                                                          std::to_string(p->sparsity()) +
                                                          " of the weights; leave out --sparsity or make them agree"));
    o.prune.sparsity = p->sparsity();
  } else {
    if (sparsity < 0.0f)
      return report(error(ErrorKind::InvalidArgument, "prune: give --sparsity S (a fraction in [0, 1)) or --pattern N:M"));
    if (!(sparsity < 1.0f)) return report(error(ErrorKind::InvalidArgument, "prune: --sparsity must be in [0, 1)"));
    o.prune.sparsity = sparsity;
  }
  if (!(damp > 0.0f && damp < 10.0f)) return report(error(ErrorKind::InvalidArgument, "prune: --damp must be in (0, 10)"));
  o.prune.damp = damp;
  if (block_cols < 1) return report(error(ErrorKind::InvalidArgument, "prune: --block-cols must be at least 1"));
  o.prune.block_cols = block_cols;
  const bool calibrated = quant::prune_needs_calibration(o.prune.method);
  if (calibrated && calib_path.empty())
    return report(error(ErrorKind::InvalidArgument, "prune: --method " + method_name +
                                                        " needs --calib CALIB.gguf (write one with tern calibrate)"));
  if (!calibrated && !calib_path.empty())
    return report(error(ErrorKind::InvalidArgument, "prune: --calib is not used by --method magnitude"));
  std::unique_ptr<CalibrationSource> calib;
  if (calibrated) {
    std::vector<GptqTensor> plan;
    const bool need_h = o.prune.method == quant::PruneMethod::SparseGpt;
    if (need_h) {
      auto file = gguf::GgufFile::open(in_path);
      if (!file) return report(file.status());
      plan = prune_plan(*file);
    }
    auto src = CalibrationSource::open(calib_path, in_path, need_h, std::move(plan), calib_text, h_memory, n_threads);
    if (!src) return report(src.status());
    calib = std::move(*src);
    calib->on_pass = [&](int pass, int n) {
      std::fprintf(stderr, "%stern: sparsegpt: H from the calibration text, pass %d of %d\n",
                   isatty(STDERR_FILENO) ? "\n" : "", pass + 1, n);
    };
    o.inputs = [&](const std::string& key) { return calib->get(key); };
  }
  ThreadPool pool(n_threads > 0 ? n_threads : ThreadPool::default_threads());
  QuantReportPrinter printer;
  auto r = prune_gguf(o, pool, [&](const QuantizeProgress& p) { printer.on_progress(p); });
  if (!r) return report(r.status());
  print_tensors(*r);
  int by_magnitude = 0;
  for (const auto& t : r->tensors) by_magnitude += t.n_by_magnitude;
  const uint64_t n = r->n_weights_pruned_tensors(), z = r->n_zero_after();
  std::fprintf(stderr,
               "tern: wrote %s (%s, %s): %zu matrices pruned, %llu of their %llu weights zero (%.2f%%), %.2f%% of all "
               "%llu weights in the file%s, %.1f s\n",
               out_path.c_str(), method_name.c_str(),
               o.prune.pattern.active() ? ("pattern " + o.prune.pattern.text()).c_str()
                                        : ("sparsity " + std::to_string(o.prune.sparsity)).c_str(),
               r->tensors.size(), static_cast<unsigned long long>(z), static_cast<unsigned long long>(n),
               n ? 100.0 * z / n : 0.0, r->n_weights_all ? 100.0 * z / r->n_weights_all : 0.0,
               static_cast<unsigned long long>(r->n_weights_all),
               by_magnitude ? (", " + std::to_string(by_magnitude) + " expert matrices by magnitude (no calibration rows)").c_str() : "",
               r->written.seconds);
  return 0;
}

}  // namespace tern::cli
