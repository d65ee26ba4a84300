#include "engine/perplexity.h"

#include <algorithm>
#include <cmath>

#include "model/batch_runner.h"

namespace tern {

Result<PerplexityResult> compute_perplexity(const Model& model, const std::vector<TokenId>& tokens,
                                            const PerplexityOptions& o,
                                            const std::function<void(int, double)>& progress,
                                            const PerplexityRowFn& on_row) {
  if (o.n_ctx < 4) return error(ErrorKind::InvalidArgument, "context must be at least 4 tokens for perplexity");
  if (o.add_bos && o.bos < 0) return error(ErrorKind::InvalidArgument, "the vocabulary adds BOS but has no BOS id");
  int n_windows = static_cast<int>(tokens.size() / o.n_ctx);
  if (n_windows == 0)
    return error(ErrorKind::InvalidArgument, "the text has " + std::to_string(tokens.size()) +
                                                 " tokens, fewer than one window of " + std::to_string(o.n_ctx));
  if (o.max_windows > 0) n_windows = std::min(n_windows, o.max_windows);

  const int n_vocab = model.hparams().n_vocab;
  const int first = o.n_ctx / 2;
  auto runner = BatchRunner::create(model, 1, o.n_ctx, o.kv_type);
  TERN_RETURN_IF_ERROR(runner.status());
  BatchRunner& kv = *runner.value();
  std::vector<float> logits, window_logits;
  Batch batch;
  double nll = 0.0;
  int64_t n_scored = 0;
  for (int w = 0; w < n_windows; ++w) {
    const size_t start = static_cast<size_t>(w) * o.n_ctx;
    kv.truncate(SeqId(0), 0);
    window_logits.clear();
    for (int i = 0; i < o.n_ctx; i += o.n_batch) {
      batch.clear();
      const int end = std::min(o.n_ctx, i + o.n_batch);
      for (int j = i; j < end; ++j) {
        const TokenId t = (j == 0 && o.add_bos) ? o.bos : tokens[start + j];
        batch.add(t, j, SeqId(0), j >= first && j < o.n_ctx - 1);
      }
      TERN_RETURN_IF_ERROR(kv.forward(batch, logits));
      window_logits.insert(window_logits.end(), logits.begin(), logits.end());
    }
    // window_logits: [n_ctx - 1 - first][n_vocab]; row r predicts token start + first + r + 1.
    for (int r = 0; r < o.n_ctx - 1 - first; ++r) {
      const float* row = window_logits.data() + static_cast<size_t>(r) * n_vocab;
      const float max = *std::max_element(row, row + n_vocab);
      double sum = 0.0;
      for (int v = 0; v < n_vocab; ++v) sum += std::exp(static_cast<double>(row[v]) - max);
      const TokenId target = tokens[start + first + r + 1];
      nll += std::log(sum) + max - row[target];
      ++n_scored;
      if (on_row) TERN_RETURN_IF_ERROR(on_row(std::span<const float>(row, n_vocab), target));
    }
    if (progress) progress(w, std::exp(nll / n_scored));
  }
  PerplexityResult res;
  res.n_windows = n_windows;
  res.n_scored = n_scored;
  res.nll_mean = nll / n_scored;
  res.perplexity = std::exp(res.nll_mean);
  return res;
}

}  // namespace tern
