#include "engine/auto_mix.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <memory>

#include "backend/backend.h"
#include "core/assert.h"
#include "core/input_file.h"
#include "core/work_dir.h"
#include "engine/calibrate.h"
#include "engine/mix_knapsack.h"
#include "engine/perplexity.h"
#include "eval/kl_divergence.h"
#include "gguf/reader.h"
#include "gguf/writer.h"
#include "model/model.h"
#include "quant/block_codec.h"
#include "quant/k_grid.h"
#include "tokenizer/tokenizer.h"

namespace tern {
namespace {

namespace fs = std::filesystem;
using gguf::GgmlType;

std::string type_text(GgmlType t) { return std::string(gguf::type_name(t)); }
bool is_float(GgmlType t) { return t == GgmlType::F32 || t == GgmlType::F16 || t == GgmlType::BF16; }

// The base model's distributions over the windows, and the KL of other models from them.
class KlProbe {
 public:
  KlProbe(std::vector<TokenId> tokens, PerplexityOptions po, int n_threads)
      : tokens_(std::move(tokens)), po_(po), n_threads_(n_threads) {}

  Status record_base(gguf::GgufFile file) {
    auto model = Model::from_gguf(std::move(file), backend::make_backend(backend::BackendKind::Cpu, n_threads_));
    if (!model) return model.status();
    // Bounded before the pass: rows x vocabulary floats are held for the whole run.
    const int64_t n_windows_max = static_cast<int64_t>(tokens_.size()) / po_.n_ctx;
    const int64_t n_windows = po_.max_windows > 0 ? std::min<int64_t>(n_windows_max, po_.max_windows) : n_windows_max;
    const int64_t rows = n_windows * (po_.n_ctx - 1 - po_.n_ctx / 2);
    n_vocab_ = (*model)->hparams().n_vocab;
    if (rows * n_vocab_ * static_cast<int64_t>(sizeof(float)) > (int64_t{1} << 30))
      return error(ErrorKind::InvalidArgument,
                   "auto mix: " + std::to_string(n_windows) + " windows of this vocabulary need more than 1 GiB of base "
                   "distributions; use fewer (--auto-chunks)");
    std::vector<double> lp(n_vocab_);
    auto r = compute_perplexity(**model, tokens_, po_, {}, [&](std::span<const float> logits, TokenId) -> Status {
      eval::log_softmax(logits, lp);
      for (double v : lp) base_lp_.push_back(static_cast<float>(v));
      base_top1_.push_back(eval::argmax(logits));
      return Status::ok();
    });
    if (!r) return r.status();
    base_nll_ = r->nll_mean;
    n_windows_ = r->n_windows;
    n_scored_ = r->n_scored;
    return Status::ok();
  }

  Result<eval::KlSummary> measure(gguf::GgufFile file) const {
    auto model = Model::from_gguf(std::move(file), backend::make_backend(backend::BackendKind::Cpu, n_threads_));
    if (!model) return model.status();
    eval::KlAccumulator acc;
    std::vector<double> base(n_vocab_);
    size_t row = 0;
    auto r = compute_perplexity(**model, tokens_, po_, {}, [&](std::span<const float> logits, TokenId target) -> Status {
      const float* b = base_lp_.data() + row * n_vocab_;
      for (int64_t v = 0; v < n_vocab_; ++v) base[v] = b[v];
      acc.add(base, base_top1_[row], logits, target);
      ++row;
      return Status::ok();
    });
    if (!r) return r.status();
    return acc.summary(base_nll_);
  }

  int n_windows() const { return n_windows_; }
  int64_t n_scored() const { return n_scored_; }

 private:
  std::vector<TokenId> tokens_;
  PerplexityOptions po_;
  int n_threads_;
  int64_t n_vocab_ = 0;
  std::vector<float> base_lp_;  // [rows][n_vocab] log-probabilities
  std::vector<int32_t> base_top1_;
  double base_nll_ = 0.0;
  int n_windows_ = 0;
  int64_t n_scored_ = 0;
};

// The files a view's tensors point into, kept alive with the view.
struct Files {
  std::vector<std::shared_ptr<const gguf::GgufFile>> all;
};

// `base` with tensor i replaced by replace[i] where that is not null.
Result<gguf::GgufFile> view_with(const gguf::GgufFile& base, const std::vector<const gguf::TensorInfo*>& replace,
                                 const std::shared_ptr<const Files>& keep) {
  std::vector<gguf::TensorInfo> tensors = base.tensors();
  for (size_t i = 0; i < tensors.size(); ++i) {
    if (!replace[i]) continue;
    tensors[i].type = replace[i]->type;
    tensors[i].data = replace[i]->data;
    tensors[i].n_bytes = replace[i]->n_bytes;
    tensors[i].in_memory = replace[i]->in_memory;
  }
  return gguf::GgufFile::from_view(base.metadata(), std::move(tensors), keep, base.file_backed());
}

// The method can write `t` (quantize_gguf refuses a type it does not cover).
bool method_covers(QuantMethod m, GgmlType t) {
  if (is_float(t) || m == QuantMethod::Rtn) return true;
  if (m == QuantMethod::Gptq) return quant::block_codec(t) != nullptr || quant::k_grid_supported(t);
  return quant::supports_weighted(t);
}

}  // namespace

std::string default_auto_candidates(QuantMethod method) {
  switch (method) {
    case QuantMethod::Gptq: return "Q4_0,IQ4_NL,Q5_0,Q8_0,F16";
    case QuantMethod::Imatrix: return "IQ4_NL,Q4_0,Q4_K,Q5_0,Q5_K,Q6_K,Q8_0,F16";
    default: return "Q2_K,Q3_K,Q4_0,Q4_K,Q5_0,Q5_K,Q6_K,Q8_0,F16";
  }
}

Result<AutoMixReport> quantize_auto(const AutoMixOptions& o, ThreadPool& pool, const AutoMixProgressFn& progress) {
  const auto say = [&](const std::string& s) {
    if (progress) progress(s);
  };
  if (o.method == QuantMethod::SmoothQuant)
    return error(ErrorKind::InvalidArgument, "quantize --auto: --method smoothquant makes W8A8 files; use rtn, imatrix or gptq");
  if (o.method == QuantMethod::Awq)
    return error(ErrorKind::InvalidArgument, "quantize --auto: --method awq changes the norms every tensor reads, so "
                                             "tensors cannot be measured one at a time; use rtn, imatrix or gptq");
  if (!(o.target_bpw > 0.0 && o.target_bpw <= 32.0))
    return error(ErrorKind::InvalidArgument, "quantize --auto: --target-bpw must be in (0, 32]");
  if (o.n_chunks < 1) return error(ErrorKind::InvalidArgument, "quantize --auto: --auto-chunks must be at least 1");
  std::vector<const QuantScheme*> candidates = o.candidates;
  if (candidates.empty()) {
    auto d = parse_quant_schemes(default_auto_candidates(o.method));
    TERN_ASSERT(d);  // the table's own names
    candidates = std::move(*d);
  }
  for (const QuantScheme* s : candidates)
    if (!method_covers(o.method, s->base))
      return error(ErrorKind::InvalidArgument, "quantize --auto: candidate " + std::string(s->name) + " is not a type " +
                                                   quant_method_name(o.method) + " writes (default candidates for it: " +
                                                   default_auto_candidates(o.method) + ")");
  if (same_file(o.in_path, o.out_path))
    return error(ErrorKind::InvalidArgument, "quantize: the output '" + o.out_path + "' is the input file '" +
                                                 o.in_path + "'; write the quantized model to a new path");
  auto base_file = gguf::GgufFile::open(o.in_path);
  if (!base_file) return base_file.status();
  auto base = std::make_shared<const gguf::GgufFile>(std::move(*base_file));

  // The calibration text, never the evaluation text: the calibration file names it.
  auto calib = read_calibration(o.calib_path);
  if (!calib) return calib.status();
  const std::string text_path = o.calib_text.empty() ? calib->text.path : o.calib_text;
  auto text = read_file(text_path);
  if (!text) return text.status().with_context("the calibration text (--calib-text to give its new path)");
  if (auto s = check_calibration_text(calib->text, *text, text_path); !s) return s;
  auto tok = Tokenizer::from_gguf(*base);
  if (!tok) return tok.status().with_context(o.in_path);
  PerplexityOptions po;
  po.n_ctx = calib->text.n_ctx;
  po.max_windows = o.n_chunks;
  po.add_bos = (*tok)->add_bos();
  po.bos = (*tok)->bos_id();
  KlProbe probe((*tok)->encode(*text, true, false), po, pool.n_threads());
  text->clear();
  say("auto: base distributions");
  if (auto s = probe.record_base(*base); !s) return s.with_context(o.in_path);

  // 1. One file per candidate type.
  auto work = WorkDir::make(o.work_dir, o.out_path + ".auto-" + std::to_string(::getpid()));
  if (!work) return work.status().with_context("quantize --auto");
  const fs::path& dir = work->path();
  auto files = std::make_shared<Files>();
  files->all.push_back(base);
  for (size_t c = 0; c < candidates.size(); ++c) {
    const QuantScheme scheme = pure_scheme(*candidates[c]);
    say("auto: writing every matrix as " + std::string(scheme.name) + " (" + std::to_string(c + 1) + " of " +
        std::to_string(candidates.size()) + ")");
    const std::string path = (dir / (std::string(scheme.name) + ".gguf")).string();
    QuantizeOptions qo{o.in_path, path, scheme, o.method};
    qo.gptq_damp = o.gptq_damp;
    std::unique_ptr<CalibrationSource> src;
    if (o.method != QuantMethod::Rtn) {
      auto s = CalibrationSource::for_method(o.method, scheme, o.calib_path, o.in_path, o.calib_text, o.gptq_memory,
                                             pool.n_threads());
      if (!s) return s.status();
      src = std::move(*s);
      qo.inputs = [&](const std::string& key) { return src->get(key); };
    }
    auto q = quantize_gguf(qo, pool);
    if (!q) return q.status().with_context(std::string(scheme.name));
    auto f = gguf::GgufFile::open(path);
    if (!f) return f.status();
    files->all.push_back(std::make_shared<const gguf::GgufFile>(std::move(*f)));
  }

  // 2. Each tensor's options and their KL, one tensor replaced at a time.
  auto info = quant_model_info(*base);
  if (!info) return info.status().with_context(o.in_path);
  AutoMixReport rep;
  const auto& tensors = base->tensors();
  std::vector<const gguf::TensorInfo*> replace(tensors.size(), nullptr);
  std::vector<std::vector<const gguf::TensorInfo*>> sources;  // [quantizable][option]
  std::vector<size_t> index_of;                              // [quantizable] index in the file
  uint64_t all_elements = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const gguf::TensorInfo& t = tensors[i];
    all_elements += t.n_elements;
    if (!is_quantizable(t.name, t.n_dims)) {
      rep.fixed_bytes += t.n_bytes;
      continue;
    }
    AutoMixTensor m;
    m.name = t.name;
    m.n_elements = t.n_elements;
    m.base_type = t.type;
    std::vector<const gguf::TensorInfo*> src;
    for (size_t f = 1; f < files->all.size(); ++f) {
      const gguf::TensorInfo* q = files->all[f]->find_tensor(t.name);
      if (!q) return error(ErrorKind::Internal, "auto mix: tensor '" + t.name + "' missing from a candidate file");
      if (std::find(m.types.begin(), m.types.end(), q->type) != m.types.end()) continue;
      m.types.push_back(q->type);
      m.bytes.push_back(q->n_bytes);
      m.kl.push_back(0.0);
      src.push_back(q->type == t.type ? nullptr : q);  // the base's own type: the base's bytes
    }
    rep.tensors.push_back(std::move(m));
    sources.push_back(std::move(src));
    index_of.push_back(i);
  }
  // 3. The budget, checked before the passes: the smallest options alone must fit.
  const double budget_all = o.target_bpw * static_cast<double>(all_elements) / 8.0;
  uint64_t least = rep.fixed_bytes;
  for (const auto& m : rep.tensors) least += *std::min_element(m.bytes.begin(), m.bytes.end());
  if (budget_all < static_cast<double>(least)) {
    char bpw[64];
    std::snprintf(bpw, sizeof bpw, "%.3f; the smallest mix takes %.3f", o.target_bpw,
                  8.0 * static_cast<double>(least) / static_cast<double>(all_elements));
    return error(ErrorKind::InvalidArgument, std::string("quantize --auto: no mix of the candidate types fits --target-bpw ") +
                                                 bpw + " (add a smaller type to --auto-types or raise --target-bpw)");
  }
  rep.budget_bytes = static_cast<uint64_t>(std::floor(budget_all)) - rep.fixed_bytes;

  int n_runs = 0;
  for (const auto& s : sources)
    n_runs += static_cast<int>(std::count_if(s.begin(), s.end(), [](auto* p) { return p != nullptr; }));
  for (size_t k = 0; k < rep.tensors.size(); ++k) {
    AutoMixTensor& m = rep.tensors[k];
    for (size_t j = 0; j < m.types.size(); ++j) {
      if (!sources[k][j]) continue;
      say("auto: sensitivity " + std::to_string(rep.n_passes + 1) + " of " + std::to_string(n_runs) + ": " + m.name +
          " as " + type_text(m.types[j]));
      replace[index_of[k]] = sources[k][j];
      auto view = view_with(*base, replace, files);
      replace[index_of[k]] = nullptr;
      if (!view) return view.status();
      auto kl = probe.measure(std::move(*view));
      if (!kl) return kl.status().with_context(m.name + " as " + type_text(m.types[j]));
      m.kl[j] = kl->kl_mean;
      ++rep.n_passes;
    }
  }
  rep.n_windows = probe.n_windows();
  rep.n_scored = probe.n_scored();

  std::vector<MixItem> items;
  for (const auto& m : rep.tensors) {
    MixItem item;
    for (size_t j = 0; j < m.types.size(); ++j) item.push_back({m.bytes[j], m.kl[j]});
    items.push_back(std::move(item));
  }
  auto choice = choose_mix(items, rep.budget_bytes);
  if (!choice) return choice.status();
  rep.predicted_kl = choice->cost;
  for (size_t k = 0; k < rep.tensors.size(); ++k) {
    rep.tensors[k].chosen = choice->pick[k];
    replace[index_of[k]] = sources[k][choice->pick[k]];
  }

  // 5. Written from the chosen bytes, then measured as written.
  std::map<GgmlType, uint64_t> bytes_of;
  for (const auto& m : rep.tensors) bytes_of[m.types[m.chosen]] += m.bytes[m.chosen];
  const GgmlType main = std::max_element(bytes_of.begin(), bytes_of.end(), [](auto& a, auto& b) {
                          return a.second < b.second;
                        })->first;
  const QuantScheme* main_scheme = find_quant_scheme(gguf::type_name(main));
  gguf::GgufStreamWriter writer;
  for (const auto& [key, value] : base->metadata()) writer.set(key, value);
  if (main_scheme) writer.set("general.file_type", gguf::Value::of_u32(main_scheme->file_type));
  writer.set("general.quantization_version", gguf::Value::of_u32(2));
  std::vector<TensorJob> jobs;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const gguf::TensorInfo& t = replace[i] ? *replace[i] : tensors[i];
    TensorJob job;
    job.name = tensors[i].name;
    job.dims.assign(tensors[i].dims.begin(), tensors[i].dims.begin() + tensors[i].n_dims);
    job.type = t.type;
    job.bytes = {t.data, t.n_bytes};
    job.n_bytes_in = tensors[i].n_bytes;
    jobs.push_back(std::move(job));
  }
  say("auto: writing " + o.out_path);
  auto written = write_tensor_jobs(writer, o.out_path, jobs, pool);
  if (!written) return written.status().with_context(o.out_path);
  rep.written = *written;
  rep.written.n_converted = 0;
  for (size_t i = 0; i < tensors.size(); ++i) rep.written.n_converted += replace[i] ? 1 : 0;
  auto out = gguf::GgufFile::open(o.out_path);
  if (!out) return out.status();
  say("auto: measuring the mix");
  auto kl = probe.measure(std::move(*out));
  if (!kl) return kl.status().with_context(o.out_path);
  rep.measured_kl = kl->kl_mean;
  rep.measured_top1 = kl->top1_agreement;
  return rep;
}

}  // namespace tern
