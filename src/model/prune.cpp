#include "model/prune.h"

#include <algorithm>
#include <array>
#include <memory>

#include "core/input_file.h"
#include "gguf/reader.h"
#include "quant/quant.h"

namespace tern {
namespace {

using gguf::GgmlType;

constexpr std::array<std::string_view, 16> kPrunableStems = {
    "attn_q",        "attn_k",        "attn_v",         "attn_qkv",       "attn_output",   "ffn_gate",
    "ffn_up",        "ffn_down",      "ffn_gate_exps",  "ffn_up_exps",    "ffn_down_exps", "ffn_gate_shexp",
    "ffn_up_shexp",  "ffn_down_shexp", "ssm_in",        "ssm_out"};

bool is_float_type(GgmlType t) { return t == GgmlType::F32 || t == GgmlType::F16 || t == GgmlType::BF16; }

uint64_t count_zeros(const float* w, size_t n) {
  uint64_t z = 0;
  for (size_t i = 0; i < n; ++i) z += w[i] == 0.0f ? 1 : 0;
  return z;
}

// Decodes one matrix (or each expert of a 3-D tensor), prunes it and encodes it back into its type.
struct PruneJob {
  const quant::TypeTraits* tr;
  const uint8_t* data;
  int64_t n_cols, n_rows, n_expert;  // n_expert 1 for a 2-D tensor
  bool expert_keys;
  std::string name;
  quant::PruneOptions prune;
  InputStatsFn inputs;
  std::shared_ptr<PrunedTensor> report;

  Status operator()(std::vector<uint8_t>& out, ThreadPool& pool) const {
    const size_t row = quant::row_bytes(*tr, n_cols);
    out.resize(row * static_cast<size_t>(n_rows * n_expert));
    std::vector<float> w(static_cast<size_t>(n_rows * n_cols));
    for (int64_t e = 0; e < n_expert; ++e) {
      const std::string key = expert_keys ? name + "#" + std::to_string(e) : name;
      const uint8_t* src = data + static_cast<size_t>(e * n_rows) * row;
      uint8_t* dst = out.data() + static_cast<size_t>(e * n_rows) * row;
      pool.parallel_for(static_cast<size_t>(n_rows), [&](size_t b, size_t end, int) {
        for (size_t r = b; r < end; ++r) tr->to_float(src + r * row, &w[r * n_cols], n_cols);
      });
      report->n_zero_before += count_zeros(w.data(), w.size());
      quant::PruneOptions po = prune;
      std::span<const double> col_sq, h;
      std::shared_ptr<const InputStats> stats;
      if (quant::prune_needs_calibration(po.method)) {
        auto s = inputs ? inputs(key) : Result<std::shared_ptr<const InputStats>>(nullptr);
        if (!s) return s.status();
        stats = *s;
        if (!stats) {
          po.method = quant::PruneMethod::Magnitude;
          ++report->n_by_magnitude;
        } else if (stats->n_cols != n_cols) {
          return error(ErrorKind::InvalidArgument, "calibration statistics of '" + key + "' are for rows of " +
                                                       std::to_string(stats->n_cols) + " elements, the tensor's rows have " +
                                                       std::to_string(n_cols) + ": calibrate this model");
        } else if (po.method == quant::PruneMethod::SparseGpt && stats->h.empty()) {
          return error(ErrorKind::Internal, "no H was collected for '" + key + "'");
        } else {
          col_sq = stats->sum_x2;
          h = stats->h;
        }
      }
      TERN_RETURN_IF_ERROR(quant::prune_matrix(po, w, n_rows, n_cols, col_sq, h, pool).with_context(key));
      report->n_zero_after += count_zeros(w.data(), w.size());
      pool.parallel_for(static_cast<size_t>(n_rows), [&](size_t b, size_t end, int) {
        for (size_t r = b; r < end; ++r) tr->from_float(&w[r * n_cols], dst + r * row, n_cols);
      });
    }
    return Status::ok();
  }
};

}  // namespace

bool is_prunable(std::string_view name, uint32_t n_dims) {
  if (n_dims != 2 && n_dims != 3) return false;
  constexpr std::string_view kPrefix = "blk.", kSuffix = ".weight";
  if (!name.starts_with(kPrefix) || !name.ends_with(kSuffix)) return false;
  std::string_view rest = name.substr(kPrefix.size(), name.size() - kPrefix.size() - kSuffix.size());
  const size_t dot = rest.find('.');
  if (dot == 0 || dot == std::string_view::npos) return false;
  if (!std::all_of(rest.begin(), rest.begin() + static_cast<std::ptrdiff_t>(dot), [](char c) { return c >= '0' && c <= '9'; }))
    return false;
  const std::string_view stem = rest.substr(dot + 1);
  if ((n_dims == 3) != stem.ends_with("_exps")) return false;
  return std::find(kPrunableStems.begin(), kPrunableStems.end(), stem) != kPrunableStems.end();
}

std::vector<GptqTensor> prune_plan(const gguf::GgufFile& file) {
  std::vector<GptqTensor> out;
  for (const gguf::TensorInfo& t : file.tensors())
    if (is_prunable(t.name, t.n_dims))
      out.push_back({t.name, static_cast<int64_t>(t.dims[0]), t.n_dims == 3 ? static_cast<int64_t>(t.dims[2]) : 0});
  return out;
}

uint64_t PruneReport::n_weights_pruned_tensors() const {
  uint64_t n = 0;
  for (const auto& t : tensors) n += t.n_weights;
  return n;
}

uint64_t PruneReport::n_zero_after() const {
  uint64_t n = 0;
  for (const auto& t : tensors) n += t.n_zero_after;
  return n;
}

Result<PruneReport> prune_gguf(const PruneModelOptions& o, ThreadPool& pool, const QuantizeProgressFn& progress) {
  if (same_file(o.in_path, o.out_path))
    return error(ErrorKind::InvalidArgument, "prune: the output '" + o.out_path + "' is the input file '" + o.in_path +
                                                 "'; write the pruned model to a new path");
  if (quant::prune_needs_calibration(o.prune.method) && !o.inputs)
    return error(ErrorKind::InvalidArgument, std::string("prune --method ") + quant::prune_method_name(o.prune.method) +
                                                 " needs calibration statistics");
  auto file = gguf::GgufFile::open(o.in_path);
  if (!file) return file.status();

  gguf::GgufStreamWriter writer;
  for (const auto& [key, value] : file->metadata()) writer.set(key, value);
  writer.set("tern.prune.method", gguf::Value::of_string(quant::prune_method_name(o.prune.method)));
  writer.set("tern.prune.sparsity", gguf::Value::of_f32(static_cast<float>(o.prune.sparsity)));
  if (o.prune.pattern.active()) writer.set("tern.prune.pattern", gguf::Value::of_string(o.prune.pattern.text()));

  PruneReport report;
  std::vector<std::shared_ptr<PrunedTensor>> pruned;
  std::vector<TensorJob> jobs;
  for (const gguf::TensorInfo& t : file->tensors()) {
    TensorJob job = verbatim_job(t);
    const uint64_t n = t.n_elements;
    report.n_weights_all += n;
    if (!is_prunable(t.name, t.n_dims)) {
      jobs.push_back(std::move(job));
      continue;
    }
    job.bytes = {};
    const quant::TypeTraits* tr = quant::traits(t.type);
    if (!is_float_type(t.type) || !tr || !tr->to_float || !tr->from_float)
      return error(ErrorKind::Unsupported,
                   o.in_path + ": tensor '" + t.name + "' is " + std::string(gguf::type_name(t.type)) +
                       "; prune reads F32, F16 or BF16 weights (rounding a quantized matrix again would add error): "
                       "prune the model it was quantized from, then tern quantize the result");
    const int64_t n_cols = static_cast<int64_t>(t.dims[0]);
    TERN_RETURN_IF_ERROR(quant::check_prune_options(o.prune, n_cols).with_context(o.in_path + ": tensor '" + t.name + "'"));
    auto rep = std::make_shared<PrunedTensor>();
    rep->name = t.name;
    rep->n_weights = n;
    pruned.push_back(rep);
    const bool experts = t.n_dims == 3;
    job.encode = PruneJob{tr,       t.data, n_cols, static_cast<int64_t>(t.dims[1]), experts ? static_cast<int64_t>(t.dims[2]) : 1,
                          experts,  t.name, o.prune, o.inputs, rep};
    job.calibrated = quant::prune_needs_calibration(o.prune.method);
    jobs.push_back(std::move(job));
  }
  if (pruned.empty())
    return error(ErrorKind::InvalidArgument, o.in_path + ": no linear layer to prune (blk.N.attn_*/ffn_*/ssm_in/ssm_out matrices)");
  auto written = write_tensor_jobs(writer, o.out_path, jobs, pool, progress);
  if (!written) return written.status().with_context(o.out_path);
  report.written = *written;
  for (const auto& p : pruned) report.tensors.push_back(*p);
  return report;
}

}  // namespace tern
