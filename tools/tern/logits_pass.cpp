#include "logits_pass.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "core/assert.h"
#include "eval/logits_file.h"

namespace tern::cli {
namespace {

// The tokens the windows feed the model: [n_windows][n_ctx], BOS first when asked.
std::vector<TokenId> window_tokens(const std::vector<TokenId>& tokens, int n_windows, const PerplexityOptions& o) {
  std::vector<TokenId> fed(tokens.begin(), tokens.begin() + static_cast<size_t>(n_windows) * o.n_ctx);
  if (o.add_bos)
    for (int w = 0; w < n_windows; ++w) fed[static_cast<size_t>(w) * o.n_ctx] = o.bos;
  return fed;
}

}  // namespace

Result<LogitsPassResult> run_logits_pass(const Model& model, const std::vector<TokenId>& tokens,
                                         const LogitsPassOptions& options,
                                         const std::function<void(int, double)>& progress) {
  const PerplexityOptions& o = options.ppl;
  if (o.n_ctx < 4) return error(ErrorKind::InvalidArgument, "context must be at least 4 tokens for perplexity");
  if (o.add_bos && o.bos < 0) return error(ErrorKind::InvalidArgument, "the vocabulary adds BOS but has no BOS id");
  const int n_vocab = model.hparams().n_vocab;
  const int n_available = static_cast<int>(tokens.size() / o.n_ctx);
  int n_windows = o.max_windows > 0 ? std::min(n_available, o.max_windows) : n_available;

  std::optional<eval::LogitsReader> base;
  if (!options.kl_path.empty()) {
    auto r = eval::LogitsReader::open(options.kl_path);
    if (!r) return r.status();
    base.emplace(std::move(*r));
    if (o.max_windows == 0) n_windows = std::min<int>(n_available, static_cast<int>(base->header().n_chunks));
  }
  if (n_windows == 0)
    return error(ErrorKind::InvalidArgument, "the text has " + std::to_string(tokens.size()) +
                                                 " tokens, fewer than one window of " + std::to_string(o.n_ctx));
  const std::vector<TokenId> fed = window_tokens(tokens, n_windows, o);  // [n_windows][n_ctx]
  const uint64_t hash = eval::hash_tokens(fed, o.n_ctx);
  const int first = o.n_ctx / 2, n_rows = o.n_ctx - 1 - first;  // scored rows per window
  if (base) {
    TERN_RETURN_IF_ERROR(base->check_matches(n_vocab, o.n_ctx, hash));
    if (base->header().n_chunks != static_cast<uint32_t>(n_windows))
      return error(ErrorKind::InvalidArgument, options.kl_path + ": holds " + std::to_string(base->header().n_chunks) +
                                                   " windows, this run scores " + std::to_string(n_windows) +
                                                   " — pass the same --chunks as when saving");
  }
  std::optional<eval::LogitsWriter> save;
  if (!options.save_path.empty()) {
    eval::LogitsFileHeader h;
    h.n_vocab = n_vocab;
    h.n_ctx = o.n_ctx;
    h.n_chunks = n_windows;
    h.n_rows_per_chunk = n_rows;
    h.tokens_hash = hash;
    auto w = eval::LogitsWriter::create(options.save_path, h);
    if (!w) return w.status();
    save.emplace(std::move(*w));
  }

  std::vector<double> base_lp(n_vocab);
  eval::KlAccumulator acc;
  PerplexityOptions windows = o;
  windows.max_windows = n_windows;
  auto ppl = compute_perplexity(model, tokens, windows, progress,
                                [&](std::span<const float> lr, TokenId target) -> Status {
                                  if (save) TERN_RETURN_IF_ERROR(save->write_row(lr));
                                  if (base) {
                                    int32_t top1 = 0;
                                    TERN_RETURN_IF_ERROR(base->read_row(base_lp, top1));
                                    acc.add(base_lp, top1, lr, target);
                                  }
                                  return Status::ok();
                                });
  TERN_RETURN_IF_ERROR(ppl.status());
  TERN_ASSERT(ppl->n_scored == static_cast<int64_t>(n_windows) * n_rows);
  LogitsPassResult res;
  res.n_windows = ppl->n_windows;
  res.n_scored = ppl->n_scored;
  res.nll_mean = ppl->nll_mean;
  res.perplexity = ppl->perplexity;
  if (save) TERN_RETURN_IF_ERROR(save->finish(res.nll_mean));
  if (base) res.kl = acc.summary(base->header().base_nll_mean);
  return res;
}

void print_kl_summary(const eval::KlSummary& kl) {
  std::printf("KL divergence vs base (%lld tokens):\n", static_cast<long long>(kl.n_tokens));
  std::printf("  mean      %10.6f ± %.6f\n", kl.kl_mean, kl.kl_mean_stderr);
  std::printf("  median    %10.6f\n", kl.kl_median);
  std::printf("  p99       %10.6f\n", kl.kl_p99);
  std::printf("  max       %10.6f\n", kl.kl_max);
  std::printf("top-1 agreement: %.3f%%\n", 100.0 * kl.top1_agreement);
  std::printf("perplexity: model %.4f, base %.4f, ratio %.6f\n", kl.ppl_model, kl.ppl_base, kl.ppl_ratio);
}

}  // namespace tern::cli
