#include "engine/calibrate.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <thread>
#include <tuple>

#include "backend/forwarding_backend.h"
#include "core/input_file.h"
#include "core/thread_pool.h"
#include "engine/perplexity.h"
#include "gguf/reader.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

namespace tern {
namespace {

using backend::Backend;
using kernels::WeightView;

// Forwards every op to `inner`; on each matmul it first adds the input rows to
// the statistics of the matrix (or matrices) applied.
class CaptureBackend final : public backend::ForwardingBackend {
 public:
  CaptureBackend(std::shared_ptr<Backend> inner, std::set<std::string> hessians, int n_threads)
      : ForwardingBackend(std::move(inner)), hessians_(std::move(hessians)),
        pool_(n_threads > 0 ? n_threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()))) {}

  // Names the matrices by where their bytes lie in the model's file.
  void bind(const gguf::GgufFile& file) {
    for (const gguf::TensorInfo& t : file.tensors()) {
      const int64_t n_expert = t.n_dims == 3 ? static_cast<int64_t>(t.dims[2]) : 0;
      ranges_.push_back({t.data, t.data + t.n_bytes, t.name, n_expert, n_expert ? t.n_bytes / n_expert : 0});
    }
    std::sort(ranges_.begin(), ranges_.end(), [](const Range& a, const Range& b) { return a.begin < b.begin; });
  }

  // Block influence: the residual stream entering layer l is the input of
  // the norm `norms[l]` (Model::block_input_norms); the stream leaving the
  // last layer is the one the output head gathers its rows from.
  void bind_blocks(std::vector<const float*> norms, int64_t n_embd) {
    norms_ = std::move(norms);
    n_embd_ = n_embd;
    block_cos_.assign(norms_.size(), 0.0);
    block_rows_.assign(norms_.size(), 0);
  }
  // Per layer, mean cos(x_in, x_out) over the tokens measured, and their count.
  std::pair<std::vector<double>, std::vector<int64_t>> take_blocks() {
    for (size_t l = 0; l < block_cos_.size(); ++l)
      if (block_rows_[l] > 0) block_cos_[l] /= static_cast<double>(block_rows_[l]);
    return {std::move(block_cos_), std::move(block_rows_)};
  }

  void rms_norm(const float* x, const float* weight, float* y, int64_t n_rows, int64_t n, float eps) override {
    if (n == n_embd_)
      if (auto it = std::find(norms_.begin(), norms_.end(), weight); it != norms_.end())
        enter_block(static_cast<int>(it - norms_.begin()), x, n_rows);
    inner().rms_norm(x, weight, y, n_rows, n, eps);
  }
  void gather_rows(const float* x, std::span<const int32_t> rows, float* out, int64_t n) override {
    if (!norms_.empty() && pending_ == static_cast<int>(norms_.size()) - 1 && x == pending_x_ && n == n_embd_)
      enter_block(static_cast<int>(norms_.size()), x, pending_rows_);
    inner().gather_rows(x, rows, out, n);
  }

  std::map<std::string, std::shared_ptr<InputStats>> take() {
    for (auto& [key, s] : inputs_)
      if (!s->h.empty())  // only the lower triangle was accumulated
        for (int64_t i = 0; i < s->n_cols; ++i)
          for (int64_t j = i + 1; j < s->n_cols; ++j) s->h[i * s->n_cols + j] = s->h[j * s->n_cols + i];
    return std::move(inputs_);
  }

  void matmul(const WeightView& w, const float* x, float* y, int64_t n_rows) override {
    const WeightView* ws[] = {&w};
    observe(ws, x, n_rows);
    inner().matmul(w, x, y, n_rows);
  }
  void matmul_group(std::span<const backend::MatmulJob> jobs, const float* x, int64_t n_rows) override {
    std::vector<const WeightView*> ws;
    for (const auto& j : jobs) ws.push_back(j.w);
    observe(ws, x, n_rows);
    inner().matmul_group(jobs, x, n_rows);
  }
  void matmul_experts(std::span<const backend::ExpertJob> jobs) override {
    // Jobs reading the same rows (an expert's gate and up) share one record.
    for (size_t i = 0; i < jobs.size(); ++i) {
      bool seen = false;
      for (size_t k = 0; k < i; ++k) seen = seen || jobs[k].x == jobs[i].x;
      if (seen) continue;
      std::vector<const WeightView*> ws;
      for (size_t k = i; k < jobs.size(); ++k)
        if (jobs[k].x == jobs[i].x) ws.push_back(jobs[k].w);
      observe(ws, jobs[i].x, jobs[i].n_rows);
    }
    inner().matmul_experts(jobs);
  }

 private:
  struct Range {
    const uint8_t* begin;
    const uint8_t* end;
    std::string name;
    int64_t n_expert;
    uint64_t expert_bytes;
  };

  // The calibration key of a matrix, and the tensor it lies in.
  std::pair<std::string, const Range*> key_of(const WeightView& w) const {
    const auto* p = static_cast<const uint8_t*>(w.data);
    auto it = std::upper_bound(ranges_.begin(), ranges_.end(), p,
                               [](const uint8_t* v, const Range& r) { return v < r.begin; });
    if (it == ranges_.begin() || p >= std::prev(it)->end) return {"?", nullptr};  // not from the file: never happens for a GGUF model
    const Range& r = *std::prev(it);
    if (r.n_expert == 0) return {r.name, &r};
    return {r.name + "#" + std::to_string(static_cast<uint64_t>(p - r.begin) / r.expert_bytes), &r};
  }

  void observe(std::span<const WeightView* const> ws, const float* x, int64_t n_rows) {
    if (n_rows <= 0 || ws.empty()) return;
    const int64_t n = ws[0]->n_cols;
    std::shared_ptr<InputStats> s;
    bool want_h = false;
    std::vector<std::string> keys;
    for (const WeightView* w : ws) {
      auto [key, range] = key_of(*w);
      if (auto it = inputs_.find(key); it != inputs_.end() && !s) s = it->second;
      want_h = want_h || (range && hessians_.count(range->name));
      keys.push_back(std::move(key));
    }
    if (!s) {
      s = std::make_shared<InputStats>();
      s->n_cols = n;
      s->sum_x2.assign(n, 0.0);
      s->sum_abs.assign(n, 0.0);
      s->max_abs.assign(n, 0.0f);
      if (want_h) s->h.assign(static_cast<size_t>(n * n), 0.0);
    }
    for (const std::string& k : keys) inputs_.emplace(k, s);

    host_.resize(static_cast<size_t>(n_rows * n));
    inner().to_host(x, host_.data(), n_rows * n);
    s->count += n_rows;
    for (int64_t t = 0; t < n_rows; ++t) {
      const float* row = &host_[t * n];
      for (int64_t i = 0; i < n; ++i) {
        const double v = row[i];
        s->sum_x2[i] += v * v;
        s->sum_abs[i] += std::fabs(v);
        s->max_abs[i] = std::max(s->max_abs[i], std::fabs(row[i]));
      }
    }
    if (s->h.empty()) return;
    // H += XᵀX, lower triangle, rows of H split over the pool (a row's sum is
    // over tokens in order, so the result does not depend on the thread count).
    double* h = s->h.data();
    const float* xs = host_.data();
    pool_.parallel_for(static_cast<size_t>(n), [&](size_t begin, size_t end, int) {
      for (size_t i = begin; i < end; ++i) {
        double* hi = h + i * n;
        for (int64_t t = 0; t < n_rows; ++t) {
          const float* row = xs + t * n;
          const double xi = row[i];
          if (xi == 0.0) continue;
          for (size_t j = 0; j <= i; ++j) hi[j] += xi * static_cast<double>(row[j]);
        }
      }
    });
  }

  // The stream `x` (n_rows tokens) enters layer il (il == n_layer: leaves the
  // last layer). When layer il - 1's input of the same pass was kept, each
  // token's cosine between the two is added to layer il - 1's sum.
  void enter_block(int il, const float* x, int64_t n_rows) {
    cur_.resize(static_cast<size_t>(n_rows * n_embd_));
    inner().to_host(x, cur_.data(), n_rows * n_embd_);
    if (il > 0 && pending_ == il - 1 && pending_rows_ == n_rows) {
      for (int64_t t = 0; t < n_rows; ++t) {
        const float* a = &prev_[static_cast<size_t>(t * n_embd_)];
        const float* b = &cur_[static_cast<size_t>(t * n_embd_)];
        double ab = 0, aa = 0, bb = 0;
        for (int64_t i = 0; i < n_embd_; ++i) {
          ab += static_cast<double>(a[i]) * b[i];
          aa += static_cast<double>(a[i]) * a[i];
          bb += static_cast<double>(b[i]) * b[i];
        }
        if (aa == 0.0 || bb == 0.0) continue;  // no direction to compare
        block_cos_[static_cast<size_t>(il - 1)] += ab / std::sqrt(aa * bb);
        ++block_rows_[static_cast<size_t>(il - 1)];
      }
    }
    pending_ = il < static_cast<int>(norms_.size()) ? il : -1;
    pending_x_ = x;
    pending_rows_ = n_rows;
    std::swap(prev_, cur_);
  }

  std::vector<const float*> norms_;
  int64_t n_embd_ = 0;
  std::vector<double> block_cos_;
  std::vector<int64_t> block_rows_;
  int pending_ = -1;  // the layer whose input prev_ holds
  const float* pending_x_ = nullptr;
  int64_t pending_rows_ = 0;
  std::vector<float> prev_, cur_;

  std::set<std::string> hessians_;
  ThreadPool pool_;
  std::vector<Range> ranges_;
  std::map<std::string, std::shared_ptr<InputStats>> inputs_;
  std::vector<float> host_;
};

}  // namespace

Result<CalibrationRun> calibrate(const CalibrationOptions& o, const CalibrationProgressFn& progress) {
  const auto t0 = std::chrono::steady_clock::now();
  auto text = read_file(o.text_path);
  if (!text) return text.status();
  const uint64_t hash = fnv1a64(*text);
  if (o.expect_text)
    if (auto s = check_calibration_text(*o.expect_text, *text, o.text_path); !s) return s;
  if (o.n_ctx < 8) return error(ErrorKind::InvalidArgument, "calibrate: -c must be at least 8");
  if (o.n_chunks < 0) return error(ErrorKind::InvalidArgument, "calibrate: --chunks must not be negative");

  auto capture = std::make_shared<CaptureBackend>(
      std::shared_ptr<Backend>(backend::make_backend(BackendKind::Cpu, o.n_threads)), o.hessians, o.n_threads);
  auto model = Model::load(o.model_path, capture);
  if (!model) return model.status();
  capture->bind((*model)->file());
  capture->bind_blocks((*model)->block_input_norms(), (*model)->hparams().n_embd);
  auto tok = Tokenizer::from_gguf((*model)->file());
  if (!tok) return tok.status().with_context(o.model_path);
  const std::vector<TokenId> tokens = (*tok)->encode(*text, true, false);
  if (static_cast<int64_t>(tokens.size()) < o.n_ctx)
    return error(ErrorKind::InvalidArgument, "calibration text '" + o.text_path + "' has " +
                                                 std::to_string(tokens.size()) + " tokens, less than one window of " +
                                                 std::to_string(o.n_ctx));
  PerplexityOptions po;
  po.n_ctx = o.n_ctx;
  po.max_windows = o.n_chunks;
  po.add_bos = (*tok)->add_bos();
  po.bos = (*tok)->bos_id();
  const int n_windows_all = static_cast<int>(tokens.size() / static_cast<size_t>(o.n_ctx));
  const int n_windows = o.n_chunks > 0 ? std::min(o.n_chunks, n_windows_all) : n_windows_all;
  auto ppl = compute_perplexity(**model, tokens, po, [&](int w, double) {
    if (progress) progress(w + 1, n_windows);
  });
  if (!ppl) return ppl.status();

  CalibrationRun run;
  run.perplexity = ppl->perplexity;
  Calibration& c = run.calibration;
  c.text = {o.text_path, text->size(), hash, o.n_ctx, ppl->n_windows, static_cast<int64_t>(ppl->n_windows) * o.n_ctx};
  c.inputs = capture->take();
  std::tie(c.block_cos, c.block_rows) = capture->take_blocks();
  c.fingerprints = text_fingerprints(*text);
  run.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return run;
}

}  // namespace tern

namespace tern {

Result<std::unique_ptr<CalibrationSource>> CalibrationSource::open(const std::string& calib_path,
                                                                   const std::string& model_path, bool need_h,
                                                                   std::vector<GptqTensor> plan,
                                                                   const std::string& text_path, uint64_t budget_bytes,
                                                                   int n_threads) {
  auto file = read_calibration(calib_path);
  if (!file) return file.status();
  std::unique_ptr<CalibrationSource> s(new CalibrationSource());
  s->file_ = std::move(*file);
  s->need_h_ = need_h;
  if (!need_h) return s;
  s->base_.model_path = model_path;
  s->base_.text_path = text_path.empty() ? s->file_.text.path : text_path;
  s->base_.n_ctx = s->file_.text.n_ctx;
  s->base_.n_chunks = s->file_.text.n_chunks;
  s->base_.n_threads = n_threads;
  s->base_.expect_text = &s->file_.text;
  s->plan_ = std::move(plan);
  uint64_t used = 0;
  int group = 0;
  for (const GptqTensor& t : s->plan_) {
    const uint64_t bytes = static_cast<uint64_t>(t.n_cols) * t.n_cols * sizeof(double) * std::max<int64_t>(1, t.n_expert);
    if (used > 0 && used + bytes > budget_bytes) {
      ++group;
      used = 0;
    }
    used += bytes;
    s->group_of_.push_back(group);
  }
  return s;
}

Result<std::unique_ptr<CalibrationSource>> CalibrationSource::for_method(QuantMethod method, const QuantScheme& scheme,
                                                                         const std::string& calib_path,
                                                                         const std::string& model_path,
                                                                         const std::string& text_path,
                                                                         uint64_t budget_bytes, int n_threads) {
  const bool need_h = method == QuantMethod::Gptq || method == QuantMethod::Awq;
  std::vector<GptqTensor> plan;
  if (need_h) {
    auto file = gguf::GgufFile::open(model_path);
    if (!file) return file.status();
    if (method == QuantMethod::Awq) {
      plan = awq_plan(*file);
    } else {
      auto p = gptq_plan(*file, scheme);
      if (!p) return p.status().with_context(model_path);
      plan = std::move(*p);
    }
  }
  return open(calib_path, model_path, need_h, std::move(plan), text_path, budget_bytes, n_threads);
}

Result<std::shared_ptr<const InputStats>> CalibrationSource::get(const std::string& key) {
  const std::string tensor = key.substr(0, key.find('#'));
  size_t i = 0;
  while (need_h_ && i < plan_.size() && plan_[i].name != tensor) ++i;
  if (!need_h_ || i == plan_.size()) {
    auto it = file_.inputs.find(key);
    return it == file_.inputs.end() ? nullptr : std::shared_ptr<const InputStats>(it->second);
  }
  if (group_of_[i] != current_) {
    pass_ = {};  // the previous group's H is no longer needed
    CalibrationOptions o = base_;
    for (size_t k = 0; k < plan_.size(); ++k)
      if (group_of_[k] == group_of_[i]) o.hessians.insert(plan_[k].name);
    if (on_pass) on_pass(group_of_[i], n_groups());
    auto run = calibrate(o);
    if (!run) return run.status().with_context("gptq: recomputing H");
    pass_ = std::move(run->calibration);
    current_ = group_of_[i];
    ++passes_;
  }
  auto it = pass_.inputs.find(key);
  return it == pass_.inputs.end() ? nullptr : std::shared_ptr<const InputStats>(it->second);
}

}  // namespace tern
