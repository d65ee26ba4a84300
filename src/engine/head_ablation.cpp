#include "engine/head_ablation.h"

#include <algorithm>
#include <chrono>

#include "backend/forwarding_backend.h"
#include "core/input_file.h"
#include "engine/perplexity.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

namespace tern {
namespace {

// Forwards every op; in the target layer, multiplies the attention output by
// a mask that is 0 on the target group's query heads (1 elsewhere).
class AblationBackend final : public backend::ForwardingBackend {
 public:
  using ForwardingBackend::ForwardingBackend;

  // norms: Model::block_input_norms(), which tell the layer a pass is in.
  void bind(std::vector<const float*> norms, int n_head, int n_head_kv, int head_dim) {
    norms_ = std::move(norms);
    width_ = int64_t{n_head} * head_dim;
    const int group = n_head / n_head_kv;
    for (int g = 0; g < n_head_kv; ++g) {
      std::vector<float> m(static_cast<size_t>(width_), 1.0f);
      std::fill(m.begin() + int64_t{g} * group * head_dim, m.begin() + int64_t{g + 1} * group * head_dim, 0.0f);
      masks_.push_back(std::move(m));
      mask_dev_.push_back(upload(masks_.back()));
    }
  }
  void target(int layer, int group) {
    layer_ = layer;
    group_ = group;
  }

  void rms_norm(const float* x, const float* weight, float* y, int64_t n_rows, int64_t n, float eps) override {
    if (auto it = std::find(norms_.begin(), norms_.end(), weight); it != norms_.end()) {
      layer_now_ = static_cast<int>(it - norms_.begin());
      rows_now_ = n_rows;
    }
    inner().rms_norm(x, weight, y, n_rows, n, eps);
  }
  void attention(const kernels::AttentionShape& shape, const backend::AttentionInput& in, const float* q,
                 float* out) override {
    inner().attention(shape, in, q, out);
    if (group_ >= 0 && layer_now_ == layer_) inner().mul(out, mask_dev_[static_cast<size_t>(group_)], rows_now_, width_);
  }

 private:
  std::vector<const float*> norms_;
  int64_t width_ = 0;
  std::vector<std::vector<float>> masks_;  // kept alive: a host backend may point into them
  std::vector<const float*> mask_dev_;
  int layer_ = -1, group_ = -1;
  int layer_now_ = -1;
  int64_t rows_now_ = 0;
};

}  // namespace

Result<HeadAblation> ablate_head_groups(const HeadAblationOptions& o, const HeadAblationProgressFn& progress) {
  const auto t0 = std::chrono::steady_clock::now();
  auto text = read_file(o.text_path);
  if (!text) return text.status();
  if (o.expect_text)
    if (auto s = check_calibration_text(*o.expect_text, *text, o.text_path); !s) return s;
  if (o.n_ctx < 8) return error(ErrorKind::InvalidArgument, "head ablation: windows must be at least 8 tokens");
  if (o.n_windows < 1) return error(ErrorKind::InvalidArgument, "head ablation: use at least one window");

  auto be = std::make_shared<AblationBackend>(
      std::shared_ptr<backend::Backend>(backend::make_backend(BackendKind::Cpu, o.n_threads)));
  auto model = Model::load(o.model_path, be);
  if (!model) return model.status();
  const HParams& hp = (*model)->hparams();
  for (const LayerHParams& l : hp.layers)
    if (!l.has_kv() || l.n_head_kv != hp.n_head_kv)
      return error(ErrorKind::Unsupported, o.model_path + ": head ablation needs attention with the same K/V head "
                                                          "count in every layer");
  be->bind((*model)->block_input_norms(), hp.n_head, hp.n_head_kv, hp.head_dim);
  auto tok = Tokenizer::from_gguf((*model)->file());
  if (!tok) return tok.status().with_context(o.model_path);
  const std::vector<TokenId> tokens = (*tok)->encode(*text, true, false);
  if (static_cast<int64_t>(tokens.size()) < o.n_ctx)
    return error(ErrorKind::InvalidArgument, "text '" + o.text_path + "' has " + std::to_string(tokens.size()) +
                                                 " tokens, less than one window of " + std::to_string(o.n_ctx));
  PerplexityOptions po;
  po.n_ctx = o.n_ctx;
  po.max_windows = o.n_windows;
  po.add_bos = (*tok)->add_bos();
  po.bos = (*tok)->bos_id();

  HeadAblation out;
  const int n_passes = 1 + hp.n_layer * hp.n_head_kv;
  auto pass = [&](int i) -> Result<double> {
    if (progress) progress(i, n_passes);
    auto r = compute_perplexity(**model, tokens, po);
    if (!r) return r.status();
    out.n_windows = r->n_windows;
    return r->nll_mean;
  };
  be->target(-1, -1);
  auto base = pass(0);
  if (!base) return base.status();
  out.base_nll = *base;
  out.rise.assign(static_cast<size_t>(hp.n_layer), std::vector<double>(static_cast<size_t>(hp.n_head_kv), 0.0));
  for (int il = 0; il < hp.n_layer; ++il)
    for (int g = 0; g < hp.n_head_kv; ++g) {
      be->target(il, g);
      auto nll = pass(1 + il * hp.n_head_kv + g);
      if (!nll) return nll.status();
      out.rise[static_cast<size_t>(il)][static_cast<size_t>(g)] = *nll - out.base_nll;
    }
  if (progress) progress(n_passes, n_passes);
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return out;
}

}  // namespace tern
