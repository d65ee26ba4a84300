#include "model/prune_structured.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>
#include <memory>
#include <numeric>

#include "core/input_file.h"
#include "model/arch.h"
#include "model/gguf_names.h"
#include "model/hparams.h"
#include "quant/quant.h"

namespace tern {
namespace {

using gguf::GgmlType;
using gguf_names::Key;
using gguf_names::kArchitecture;
using gguf_names::key;

// "blk.<il>.<rest>": il (rest set), or -1 for a tensor outside the blocks.
int block_of(std::string_view name, std::string_view& rest) {
  constexpr std::string_view kPrefix = "blk.";
  if (!name.starts_with(kPrefix)) return -1;
  name.remove_prefix(kPrefix.size());
  int il = -1;
  auto [p, ec] = std::from_chars(name.data(), name.data() + name.size(), il);
  if (ec != std::errc() || p == name.data() || p == name.data() + name.size() || *p != '.') return -1;
  rest = name.substr(static_cast<size_t>(p - name.data()) + 1);
  return il;
}

size_t element_bytes(GgmlType t) {
  switch (t) {
    case GgmlType::F32: return 4;
    case GgmlType::F16:
    case GgmlType::BF16: return 2;
    default: return 0;
  }
}

// Per column, the sum over rows of w² (any type that decodes to float).
Result<std::vector<double>> column_sq_norms(const gguf::TensorInfo& t) {
  const quant::TypeTraits* tr = quant::traits(t.type);
  if (!tr || !tr->to_float || t.n_dims != 2)
    return error(ErrorKind::Unsupported, "tensor '" + t.name + "' (" + std::string(gguf::type_name(t.type)) +
                                             ") cannot be read as a float matrix");
  const int64_t n_cols = static_cast<int64_t>(t.dims[0]), n_rows = static_cast<int64_t>(t.dims[1]);
  const size_t row = quant::row_bytes(*tr, n_cols);
  std::vector<double> out(static_cast<size_t>(n_cols), 0.0);
  std::vector<float> w(static_cast<size_t>(n_cols));
  for (int64_t r = 0; r < n_rows; ++r) {
    tr->to_float(t.data + static_cast<size_t>(r) * row, w.data(), n_cols);
    for (int64_t c = 0; c < n_cols; ++c) out[static_cast<size_t>(c)] += static_cast<double>(w[c]) * w[c];
  }
  return out;
}

// Indices of the k largest scores, ascending; of equal scores the lower index stays.
std::vector<int> top_k(const std::vector<double>& score, int k) {
  std::vector<int> idx(score.size());
  std::iota(idx.begin(), idx.end(), 0);
  std::stable_sort(idx.begin(), idx.end(), [&](int a, int b) { return score[a] > score[b]; });
  idx.resize(static_cast<size_t>(k));
  std::sort(idx.begin(), idx.end());
  return idx;
}

// Per input column of `tensor`: E[x²]·‖W[:, c]‖², x its calibration inputs.
Result<std::vector<double>> column_scores(const gguf::GgufFile& file, const Calibration& calib, const std::string& tensor,
                                          int64_t n_cols) {
  const gguf::TensorInfo* t = file.find_tensor(tensor);
  if (!t || t->n_dims != 2 || static_cast<int64_t>(t->dims[0]) != n_cols)
    return error(ErrorKind::InvalidFile, "no 2-D tensor '" + tensor + "' with rows of " + std::to_string(n_cols));
  const InputStats* s = calib.find(tensor);
  if (!s || s->count <= 0)
    return error(ErrorKind::InvalidArgument, "the calibration file has no statistics for '" + tensor +
                                                 "': calibrate this model (tern calibrate -m MODEL)");
  if (s->n_cols != n_cols)
    return error(ErrorKind::InvalidArgument, "calibration statistics of '" + tensor + "' are for rows of " +
                                                 std::to_string(s->n_cols) + ", the tensor's have " +
                                                 std::to_string(n_cols) + ": calibrate this model");
  auto norms = column_sq_norms(*t);
  if (!norms) return norms.status();
  for (int64_t c = 0; c < n_cols; ++c)
    (*norms)[static_cast<size_t>(c)] *= s->sum_x2[static_cast<size_t>(c)] / static_cast<double>(s->count);
  return norms;
}

std::string layer_tensor(int il, const char* stem) { return "blk." + std::to_string(il) + "." + stem + ".weight"; }

bool same_layer_shape(const LayerHParams& a, const LayerHParams& b) {
  return a.recurrent == b.recurrent && a.n_head_kv == b.n_head_kv && a.sliding_window == b.sliding_window &&
         a.rope_local == b.rope_local && a.n_ff == b.n_ff;
}

}  // namespace

Result<int> structured_kept_count(int n, double fraction, int align, const std::string& what) {
  int keep = n - static_cast<int>(std::lround(fraction * n));
  if (align > 1 && n % align == 0) keep = static_cast<int>(std::lround(static_cast<double>(keep) / align)) * align;
  if (keep >= n)
    return error(ErrorKind::InvalidArgument, what + "=" + std::to_string(fraction) + " removes none of " +
                                                 std::to_string(n) + (align > 1 && n % align == 0
                                                                          ? " (kept in multiples of " + std::to_string(align) + ")"
                                                                          : "") +
                                                 ": ask for a larger fraction");
  if (keep < std::max(1, align > 1 && n % align == 0 ? align : 1))
    return error(ErrorKind::InvalidArgument, what + "=" + std::to_string(fraction) + " would remove all " +
                                                 std::to_string(n) + ": ask for a smaller fraction");
  return keep;
}

std::string StructuredSpec::text() const {
  std::string s;
  auto add = [&](const std::string& part) { s += (s.empty() ? "" : ",") + part; };
  auto num = [](double v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%g", v);
    return std::string(buf);
  };
  if (heads > 0) add("heads=" + num(heads));
  if (ffn > 0) add("ffn=" + num(ffn));
  if (layers > 0) add("layers=" + std::to_string(layers));
  return s;
}

Result<StructuredSpec> parse_structured_spec(std::string_view s) {
  StructuredSpec spec;
  auto bad = [&](const std::string& why) {
    return error(ErrorKind::InvalidArgument, "--structured '" + std::string(s) + "': " + why +
                                                 " (expected heads=F,ffn=F,layers=N, e.g. ffn=0.25)");
  };
  bool seen[3] = {false, false, false};
  for (size_t begin = 0; begin <= s.size();) {
    const size_t comma = std::min(s.find(',', begin), s.size());
    const std::string_view part = s.substr(begin, comma - begin);
    begin = comma + 1;
    if (part.empty()) return bad("an empty part");
    const size_t eq = part.find('=');
    if (eq == std::string_view::npos) return bad("'" + std::string(part) + "' has no '='");
    const std::string_view name = part.substr(0, eq), value = part.substr(eq + 1);
    const int which = name == "heads" ? 0 : name == "ffn" ? 1 : name == "layers" ? 2 : -1;
    if (which < 0) return bad("unknown part '" + std::string(name) + "'");
    if (seen[which]) return bad("'" + std::string(name) + "' given twice");
    seen[which] = true;
    const std::string v(value);
    char* end = nullptr;
    if (which == 2) {
      const long n = std::strtol(v.c_str(), &end, 10);
      if (v.empty() || *end != '\0' || n < 1 || n > 100000) return bad("layers must be a positive whole number");
      spec.layers = static_cast<int>(n);
    } else {
      const double f = std::strtod(v.c_str(), &end);
      if (v.empty() || *end != '\0' || !(f > 0.0 && f < 1.0)) return bad(std::string(name) + " must be a fraction in (0, 1)");
      (which == 0 ? spec.heads : spec.ffn) = f;
    }
  }
  return spec;
}

std::vector<int> StructuredPlan::q_heads(int il) const {
  const int group = n_head_kv_in > 0 ? n_head_in / n_head_kv_in : 1;
  std::vector<int> out;
  for (int g : kv_heads[static_cast<size_t>(il)])
    for (int h = 0; h < group; ++h) out.push_back(g * group + h);
  return out;
}

Result<StructuredPlan> plan_structured(const gguf::GgufFile& file, const Calibration& calib, const StructuredSpec& spec,
                                       const std::vector<std::vector<double>>* head_scores) {
  auto arch_name = file.get_string(std::string(kArchitecture));
  if (!arch_name) return arch_name.status();
  const ArchInfo* arch = find_arch(*arch_name);
  if (!arch) return error(ErrorKind::Unsupported, "architecture '" + *arch_name + "' is not supported");
  const gguf::TensorInfo* embd = file.find_tensor("token_embd.weight");
  if (!embd || embd->n_dims != 2) return error(ErrorKind::InvalidFile, "no 2-D token_embd.weight");
  auto hp_r = read_hparams(file, static_cast<int>(embd->dims[1]));
  if (!hp_r) return hp_r.status();
  const HParams& hp = *hp_r;

  const bool slices = spec.heads > 0 || spec.ffn > 0;
  if (slices && (hp.is_moe() || arch->state_space || arch->hybrid))
    return error(ErrorKind::Unsupported, "--structured heads/ffn handle dense attention and FFN blocks; this " + hp.arch +
                                             " model has " + (hp.is_moe() ? "experts" : "state-space layers") +
                                             " (layers=N alone can still remove layers)");
  if (spec.heads > 0 && file.find_tensor("blk.0.attn_qkv.weight"))
    return error(ErrorKind::Unsupported, "--structured heads: this model's Q, K and V are one fused matrix (attn_qkv), "
                                         "which head pruning does not slice yet");
  if (spec.ffn > 0 && arch->fused_gate_up)
    return error(ErrorKind::Unsupported, "--structured ffn: this " + hp.arch +
                                             " model's FFN gate and up are one fused matrix, which FFN pruning does not slice yet");

  StructuredPlan plan;
  plan.n_layer_in = hp.n_layer;
  plan.n_head_in = hp.n_head;
  plan.n_head_kv_in = hp.n_head_kv;
  plan.n_ff_in = hp.n_ff;
  plan.head_dim = hp.head_dim;
  const bool uniform = std::all_of(hp.layers.begin(), hp.layers.end(),
                                   [&](const LayerHParams& l) { return same_layer_shape(l, hp.layers[0]); });
  if (spec.heads > 0 && !std::all_of(hp.layers.begin(), hp.layers.end(),
                                     [&](const LayerHParams& l) { return l.n_head_kv == hp.n_head_kv; }))
    return error(ErrorKind::Unsupported, "--structured heads: this model's layers have different K/V head counts");

  // Layers: the `layers` least influential of those measured go.
  plan.layers.resize(static_cast<size_t>(hp.n_layer));
  std::iota(plan.layers.begin(), plan.layers.end(), 0);
  if (spec.layers > 0) {
    if (!uniform || file.find(key(hp.arch, Key::SlidingWindowPattern)))
      return error(ErrorKind::Unsupported, "--structured layers: this " + hp.arch +
                                               " model's layers differ (windows, head counts or kinds by position); "
                                               "removing one would change the others'");
    if (spec.layers >= hp.n_layer)
      return error(ErrorKind::InvalidArgument, "--structured layers=" + std::to_string(spec.layers) + ": the model has " +
                                                   std::to_string(hp.n_layer) + " layers; at least one must stay");
    if (calib.block_cos.size() != static_cast<size_t>(hp.n_layer))
      return error(ErrorKind::InvalidArgument,
                   "the calibration file has no per-layer similarity for this model's " + std::to_string(hp.n_layer) +
                       " layers (" + std::to_string(calib.block_cos.size()) +
                       " recorded): calibrate this model again with this version of tern");
    std::vector<double> keep_score(static_cast<size_t>(hp.n_layer));
    int measured = 0;
    for (int il = 0; il < hp.n_layer; ++il) {
      const bool seen = calib.block_rows[static_cast<size_t>(il)] > 0;
      measured += seen ? 1 : 0;
      plan.layer_influence.push_back(seen ? 1.0 - calib.block_cos[static_cast<size_t>(il)] : NAN);
      keep_score[static_cast<size_t>(il)] = seen ? plan.layer_influence.back() : INFINITY;
    }
    if (measured < spec.layers)
      return error(ErrorKind::InvalidArgument, "--structured layers=" + std::to_string(spec.layers) + ": only " +
                                                   std::to_string(measured) + " layers were measured in calibration");
    plan.layers = top_k(keep_score, hp.n_layer - spec.layers);
  }

  int kv_keep = hp.n_head_kv, ff_keep = hp.n_ff;
  if (spec.heads > 0) {
    auto k = structured_kept_count(hp.n_head_kv, spec.heads, 1, "heads");
    if (!k) return k.status().with_context("--structured (" + std::to_string(hp.n_head_kv) + " K/V head groups)");
    kv_keep = *k;
  }
  if (spec.ffn > 0) {
    auto k = structured_kept_count(hp.n_ff, spec.ffn, 32, "ffn");
    if (!k) return k.status().with_context("--structured (" + std::to_string(hp.n_ff) + " FFN channels)");
    ff_keep = *k;
  }
  const int group = hp.n_head_kv > 0 ? hp.n_head / hp.n_head_kv : 1;
  plan.kv_heads.resize(static_cast<size_t>(hp.n_layer));
  plan.ffn.resize(static_cast<size_t>(hp.n_layer));
  for (int il = 0; il < hp.n_layer; ++il) {
    auto& kv = plan.kv_heads[static_cast<size_t>(il)];
    auto& ff = plan.ffn[static_cast<size_t>(il)];
    kv.resize(static_cast<size_t>(hp.n_head_kv));
    std::iota(kv.begin(), kv.end(), 0);
    ff.resize(static_cast<size_t>(hp.n_ff));
    std::iota(ff.begin(), ff.end(), 0);
    if (spec.heads > 0 && head_scores) {
      if (head_scores->size() != static_cast<size_t>(hp.n_layer) ||
          (*head_scores)[static_cast<size_t>(il)].size() != static_cast<size_t>(hp.n_head_kv))
        return error(ErrorKind::InvalidArgument, "head scores are not [" + std::to_string(hp.n_layer) + "][" +
                                                     std::to_string(hp.n_head_kv) + "]");
      kv = top_k((*head_scores)[static_cast<size_t>(il)], kv_keep);
    } else if (spec.heads > 0) {
      auto cols = column_scores(file, calib, layer_tensor(il, "attn_output"), hp.q_dim());
      if (!cols) return cols.status();
      std::vector<double> score(static_cast<size_t>(hp.n_head_kv), 0.0);
      for (int c = 0; c < hp.q_dim(); ++c) score[static_cast<size_t>(c / hp.head_dim / group)] += (*cols)[static_cast<size_t>(c)];
      kv = top_k(score, kv_keep);
    }
    if (spec.ffn > 0) {
      auto cols = column_scores(file, calib, layer_tensor(il, "ffn_down"), hp.n_ff);
      if (!cols) return cols.status();
      ff = top_k(*cols, ff_keep);
    }
  }
  return plan;
}

Result<StructuredReport> prune_structured_gguf(const std::string& in_path, const std::string& out_path,
                                               const StructuredSpec& spec, const StructuredPlan& plan, ThreadPool& pool,
                                               const QuantizeProgressFn& progress) {
  if (same_file(in_path, out_path))
    return error(ErrorKind::InvalidArgument, "prune: the output '" + out_path + "' is the input file '" + in_path +
                                                 "'; write the pruned model to a new path");
  auto file = gguf::GgufFile::open(in_path);
  if (!file) return file.status();
  auto arch = file->get_string(std::string(kArchitecture));
  if (!arch) return arch.status();

  gguf::GgufStreamWriter writer;
  for (const auto& [k, value] : file->metadata()) writer.set(k, value);
  std::vector<int> new_index(static_cast<size_t>(plan.n_layer_in), -1), removed;
  for (size_t i = 0; i < plan.layers.size(); ++i) new_index[static_cast<size_t>(plan.layers[i])] = static_cast<int>(i);
  for (int il = 0; il < plan.n_layer_in; ++il)
    if (new_index[static_cast<size_t>(il)] < 0) removed.push_back(il);
  writer.set(key(*arch, Key::BlockCount), gguf::Value::of_u32(static_cast<uint32_t>(plan.layers.size())));
  // Per-layer arrays keep the kept layers' entries.
  for (Key k : {Key::HeadCountKv, Key::SlidingWindow}) {
    const gguf::Value* v = file->find(key(*arch, k));
    const gguf::Array* a = v ? v->as_array() : nullptr;
    if (!a || removed.empty()) continue;
    if (a->items.size() != static_cast<size_t>(plan.n_layer_in))
      return error(ErrorKind::InvalidFile, key(*arch, k) + " has " + std::to_string(a->items.size()) + " entries for " +
                                               std::to_string(plan.n_layer_in) + " layers");
    std::vector<gguf::Value> kept;
    for (int il : plan.layers) kept.push_back(a->items[static_cast<size_t>(il)]);
    writer.set(key(*arch, k), gguf::Value::of_array(a->elem_type, std::move(kept)));
  }
  if (spec.heads > 0) {
    writer.set(key(*arch, Key::HeadCount), gguf::Value::of_u32(static_cast<uint32_t>(plan.n_head())));
    writer.set(key(*arch, Key::HeadCountKv), gguf::Value::of_u32(static_cast<uint32_t>(plan.n_head_kv())));
    writer.set(key(*arch, Key::KeyLength), gguf::Value::of_u32(static_cast<uint32_t>(plan.head_dim)));
    writer.set(key(*arch, Key::ValueLength), gguf::Value::of_u32(static_cast<uint32_t>(plan.head_dim)));
  }
  if (spec.ffn > 0) writer.set(key(*arch, Key::FeedForwardLength), gguf::Value::of_u32(static_cast<uint32_t>(plan.n_ff())));
  writer.set("tern.prune.structured", gguf::Value::of_string(spec.text()));
  if (!removed.empty()) writer.set("tern.prune.removed_layers", gguf::Value::of_i32s({removed.begin(), removed.end()}));

  StructuredReport report;
  std::vector<TensorJob> jobs;
  for (const gguf::TensorInfo& t : file->tensors()) {
    report.n_weights_in += t.n_elements;
    TensorJob job = verbatim_job(t);
    std::string_view rest;
    const int il = block_of(t.name, rest);
    if (il >= plan.n_layer_in) return error(ErrorKind::InvalidFile, "tensor '" + t.name + "' is past the last layer");
    if (il >= 0) {
      if (new_index[static_cast<size_t>(il)] < 0) continue;  // a removed layer
      job.name = "blk." + std::to_string(new_index[static_cast<size_t>(il)]) + "." + std::string(rest);
      // Which indices stay, along rows (a matrix's dims[1]) or along dims[0] (columns, a vector's entries).
      const size_t dot = rest.rfind('.');
      const std::string_view stem = rest.substr(0, dot);
      std::vector<int64_t> keep;
      bool along_rows = t.n_dims == 2;
      auto per_head = [&](const std::vector<int>& heads) {
        for (int h : heads)
          for (int d = 0; d < plan.head_dim; ++d) keep.push_back(int64_t{h} * plan.head_dim + d);
      };
      if (stem == "attn_q") per_head(plan.q_heads(il));
      if (stem == "attn_k" || stem == "attn_v") per_head(plan.kv_heads[static_cast<size_t>(il)]);
      if (stem == "attn_output" && t.n_dims == 2) {
        per_head(plan.q_heads(il));
        along_rows = false;
      }
      if (stem == "ffn_gate" || stem == "ffn_up") keep.assign(plan.ffn[static_cast<size_t>(il)].begin(), plan.ffn[static_cast<size_t>(il)].end());
      if (stem == "ffn_down" && t.n_dims == 2) {
        keep.assign(plan.ffn[static_cast<size_t>(il)].begin(), plan.ffn[static_cast<size_t>(il)].end());
        along_rows = false;
      }
      const size_t axis = along_rows ? 1 : 0;
      if (!keep.empty() && (t.n_dims > 2 || keep.back() >= static_cast<int64_t>(t.dims[axis])))
        return error(ErrorKind::InvalidFile, "tensor '" + t.name + "' has shape " + t.shape_string() +
                                                 ", not the one its hyper-parameters give");
      if (!keep.empty() && keep.size() != t.dims[axis]) {
        const size_t esize = element_bytes(t.type);
        if (!along_rows && esize == 0)
          return error(ErrorKind::Unsupported,
                       in_path + ": tensor '" + t.name + "' is " + std::string(gguf::type_name(t.type)) +
                           "; removing its columns needs F32, F16 or BF16 (blocks of a quantized row would mix kept "
                           "and removed values): prune the model it was quantized from, then tern quantize the result");
        job.dims[axis] = keep.size();
        const uint64_t n_rows = t.n_dims == 2 ? t.dims[1] : 1, row = t.n_bytes / n_rows;
        job.bytes = {};
        job.encode = [data = t.data, keep = std::move(keep), along_rows, esize, n_rows, row](std::vector<uint8_t>& out,
                                                                                            ThreadPool&) {
          if (along_rows) {
            out.resize(keep.size() * row);
            for (size_t i = 0; i < keep.size(); ++i) std::memcpy(&out[i * row], data + keep[i] * row, row);
          } else {
            out.resize(n_rows * keep.size() * esize);
            uint8_t* o = out.data();
            for (uint64_t r = 0; r < n_rows; ++r)
              for (int64_t c : keep) {
                std::memcpy(o, data + r * row + static_cast<uint64_t>(c) * esize, esize);
                o += esize;
              }
          }
          return Status::ok();
        };
      }
    }
    uint64_t m = 1;
    for (uint64_t d : job.dims) m *= d;
    report.n_weights_out += m;
    jobs.push_back(std::move(job));
  }
  auto written = write_tensor_jobs(writer, out_path, jobs, pool, progress);
  if (!written) return written.status().with_context(out_path);
  report.written = *written;
  return report;
}

}  // namespace tern
