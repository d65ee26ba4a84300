#include "model/quantize.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>

#include "core/input_file.h"
#include "gguf/reader.h"
#include "model/awq.h"
#include "model/gguf_names.h"
#include "model/smoothquant.h"
#include "quant/block_codec.h"
#include "quant/gptq.h"
#include "quant/k_grid.h"
#include "quant/quant.h"

namespace tern {
namespace {

using gguf::GgmlType;

std::string type_text(GgmlType t) { return std::string(gguf::type_name(t)); }

uint64_t element_count(const std::vector<uint64_t>& dims) {
  uint64_t n = 1;
  for (uint64_t d : dims) n *= d;
  return n;
}

// Drops the whole pages inside `bytes` (part of a read-only file mapping) from
// this process; later reads fault them back in from the page cache.
void release_pages(std::span<const uint8_t> bytes) {
  static const uintptr_t kPage = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const uintptr_t begin = (reinterpret_cast<uintptr_t>(bytes.data()) + kPage - 1) / kPage * kPage;
  const uintptr_t end = (reinterpret_cast<uintptr_t>(bytes.data()) + bytes.size()) / kPage * kPage;
  if (end > begin) madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);
}

// Marks the pages of `bytes` (part of a file mapping) as read sequentially:
// the kernel then reads far ahead of each fault instead of a small window,
// and the input streams at disk speed (measured in bench/hf_convert.md: a
// 2.5 GB conversion read 2.5x faster than with the default advice;
// MADV_WILLNEED on the next tensor did not help).
void advise_sequential(std::span<const uint8_t> bytes) {
  static const uintptr_t kPage = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const uintptr_t begin = reinterpret_cast<uintptr_t>(bytes.data()) / kPage * kPage;
  const uintptr_t end = reinterpret_cast<uintptr_t>(bytes.data()) + bytes.size();
  if (end > begin) madvise(reinterpret_cast<void*>(begin), end - begin, MADV_SEQUENTIAL);
}

bool is_float_type(GgmlType t) { return t == GgmlType::F32 || t == GgmlType::F16 || t == GgmlType::BF16; }

// Token embeddings that double as the output matrix are also read row by row
// (the embedding lookup), where GPTQ's compensation across columns only adds
// error: they get importance-weighted rounding instead.
bool is_tied_embedding(const QuantModelInfo& m, std::string_view name) {
  return !m.has_output && name == "token_embd.weight";
}

struct CalibratedJob {
  const quant::TypeTraits* from;
  const uint8_t* data;
  int64_t n_cols, n_rows_per_expert, n_expert;  // n_expert 1 for a 2-D tensor
  bool expert_keys;                              // keys "<name>#<e>"
  std::string name;
  gguf::GgmlType type;               // written type
  const quant::BlockCodec* codec;    // its codec (null for the K-quants: GPTQ through quant/k_grid.h)
  bool gptq;
  InputStatsFn inputs;
  double damp;

  Status operator()(std::vector<uint8_t>& out, ThreadPool& pool) const {
    const quant::TypeTraits* to = quant::traits(type);
    const size_t in_row = quant::row_bytes(*from, n_cols), out_row = quant::row_bytes(*to, n_cols);
    out.resize(out_row * static_cast<size_t>(n_rows_per_expert * n_expert));
    std::vector<float> w(static_cast<size_t>(n_rows_per_expert * n_cols));
    for (int64_t e = 0; e < n_expert; ++e) {
      const std::string key = expert_keys ? name + "#" + std::to_string(e) : name;
      const int64_t row0 = e * n_rows_per_expert;
      uint8_t* dst = out.data() + static_cast<size_t>(row0) * out_row;
      pool.parallel_for(static_cast<size_t>(n_rows_per_expert), [&](size_t b, size_t end, int) {
        for (size_t r = b; r < end; ++r)
          from->to_float(data + (row0 + static_cast<int64_t>(r)) * in_row, &w[r * n_cols], n_cols);
      });
      auto stats = inputs(key);
      if (!stats) return stats.status();
      if (!*stats) {  // calibration never ran this matrix (e.g. an expert no token chose)
        pool.parallel_for(static_cast<size_t>(n_rows_per_expert), [&](size_t b, size_t end, int) {
          for (size_t r = b; r < end; ++r) to->from_float(&w[r * n_cols], dst + r * out_row, n_cols);
        });
        continue;
      }
      const InputStats& s = **stats;
      if (s.n_cols != n_cols)
        return error(ErrorKind::InvalidArgument, "calibration statistics of '" + key + "' are for rows of " +
                                                     std::to_string(s.n_cols) + " elements, the tensor's rows have " +
                                                     std::to_string(n_cols) + ": calibrate this model");
      if (gptq) {
        if (s.h.empty()) return error(ErrorKind::Internal, "no H was collected for '" + key + "'");
        if (codec)
          TERN_RETURN_IF_ERROR(quant::gptq_encode(*codec, w, n_rows_per_expert, n_cols, s.h, {.damp = damp}, dst, pool));
        else
          TERN_RETURN_IF_ERROR(quant::gptq_encode_k(type, w, n_rows_per_expert, n_cols, s.h, {.damp = damp}, dst, pool));
        continue;
      }
      const std::vector<float> importance = s.importance();
      pool.parallel_for(static_cast<size_t>(n_rows_per_expert), [&](size_t b, size_t end, int) {
        for (size_t r = b; r < end; ++r)
          quant::encode_row_importance(type, &w[r * n_cols], importance.data(), dst + r * out_row, n_cols);
      });
    }
    return Status::ok();
  }
};

// Q8_0_S24 keeps 2 of every 4 weights: a matrix with more than 2 nonzero in
// a group would lose some silently, so it is refused with where and what to run.
std::function<Status(std::vector<uint8_t>&, ThreadPool&)> sparse24_encoder(const std::string& name, int64_t n_rows,
                                                                            int64_t n_cols, RowSource source) {
  return [name, n_rows, n_cols, source](std::vector<uint8_t>& out, ThreadPool& pool) -> Status {
    std::atomic<int64_t> bad_row{-1};
    auto checked = [&](int64_t r, float* row) {
      source(r, row);
      for (int64_t g = 0; g < n_cols; g += 4) {
        int nz = 0;
        for (int64_t j = g; j < g + 4; ++j) nz += row[j] != 0.0f ? 1 : 0;
        if (nz > 2) {  // keep the lowest such row: the message does not depend on the threads
          int64_t cur = bad_row.load();
          while ((cur < 0 || r < cur) && !bad_row.compare_exchange_weak(cur, r)) {
          }
          return;
        }
      }
    };
    TERN_RETURN_IF_ERROR(encode_rows(GgmlType::Q8_0_S24, n_rows, n_cols, checked, out, pool));
    if (bad_row.load() >= 0)
      return error(ErrorKind::InvalidArgument,
                   "Q8_0_S24: row " + std::to_string(bad_row.load()) + " of '" + name +
                       "' has more than 2 nonzero weights in a group of 4: prune the model 2:4 first "
                       "(tern prune IN.gguf PRUNED.gguf --pattern 2:4 [--method sparsegpt --calib CALIB.gguf])");
    return Status::ok();
  };
}

}  // namespace

void add_row_scaled_jobs(TensorJob job, std::vector<TensorJob>& jobs) {
  const int64_t n = static_cast<int64_t>(job.dims[0]);
  int64_t n_rows = 1;  // every row of every expert
  for (size_t d = 1; d < job.dims.size(); ++d) n_rows *= static_cast<int64_t>(job.dims[d]);
  RowSource source = std::move(job.source);
  job.source = {};
  TensorJob scales;
  scales.name = gguf_names::row_scale_name(job.name);
  // One scale per row: the matrix's dims past the row length (expert e's rows at e * rows).
  scales.dims.assign(job.dims.begin() + 1, job.dims.end());
  scales.type = GgmlType::F32;
  scales.calibrated = job.calibrated;
  scales.mapped_input = job.mapped_input;  // released after the second pass over the input
  job.mapped_input = {};
  const GgmlType type = job.type;
  auto run = [source, n, n_rows, type](ThreadPool& pool, const std::function<void(int64_t, const uint8_t*, float)>& put) {
    pool.parallel_for(static_cast<size_t>(n_rows), [&](size_t b, size_t e, int) {
      std::vector<float> row(static_cast<size_t>(n));
      std::vector<uint8_t> q(static_cast<size_t>(n));
      for (size_t r = b; r < e; ++r) {
        source(static_cast<int64_t>(r), row.data());
        const float d = quant::quantize_row_scaled(type, row.data(), n, q.data());
        put(static_cast<int64_t>(r), q.data(), d);
      }
    });
  };
  job.encode = [run, n, n_rows](std::vector<uint8_t>& out, ThreadPool& pool) {
    out.resize(static_cast<size_t>(n * n_rows));
    run(pool, [&](int64_t r, const uint8_t* q, float) { std::memcpy(out.data() + r * n, q, static_cast<size_t>(n)); });
    return Status::ok();
  };
  scales.encode = [run, n_rows](std::vector<uint8_t>& out, ThreadPool& pool) {
    out.resize(static_cast<size_t>(n_rows) * sizeof(float));
    run(pool, [&](int64_t r, const uint8_t*, float d) { std::memcpy(out.data() + r * sizeof(float), &d, sizeof d); });
    return Status::ok();
  };
  jobs.push_back(std::move(job));
  jobs.push_back(std::move(scales));
}

const char* quant_method_name(QuantMethod m) {
  switch (m) {
    case QuantMethod::Rtn: return "rtn";
    case QuantMethod::Imatrix: return "imatrix";
    case QuantMethod::Gptq: return "gptq";
    case QuantMethod::Awq: return "awq";
    case QuantMethod::SmoothQuant: return "smoothquant";
  }
  return "?";
}

Result<QuantMethod> parse_quant_method(std::string_view name) {
  for (QuantMethod m : {QuantMethod::Rtn, QuantMethod::Imatrix, QuantMethod::Gptq, QuantMethod::Awq, QuantMethod::SmoothQuant})
    if (name == quant_method_name(m)) return m;
  return error(ErrorKind::InvalidArgument,
               "unknown quantization method '" + std::string(name) + "' (rtn, imatrix, gptq, awq, smoothquant)");
}

Result<std::vector<GptqTensor>> gptq_plan(const gguf::GgufFile& file, const QuantScheme& scheme) {
  auto model = quant_model_info(file);
  if (!model) return model.status();
  std::vector<GptqTensor> out;
  for (const gguf::TensorInfo& t : file.tensors()) {
    const TypeChoice choice = choose_tensor_type(scheme, *model, t.name, t.n_dims, t.dims[0], t.type);
    if (choice.type == t.type || (!quant::block_codec(choice.type) && !quant::k_grid_supported(choice.type)) ||
        is_tied_embedding(*model, t.name))
      continue;
    out.push_back({t.name, static_cast<int64_t>(t.dims[0]), t.n_dims == 3 ? static_cast<int64_t>(t.dims[2]) : 0});
  }
  return out;
}

std::vector<GptqTensor> awq_plan(const gguf::GgufFile& file) {
  std::vector<std::pair<size_t, GptqTensor>> firsts;
  const auto& tensors = file.tensors();
  for (const AwqGroup& g : awq_groups(file)) {
    size_t at = 0;
    while (at < tensors.size() && tensors[at].name != g.linears[0]) ++at;
    firsts.push_back({at, {g.linears[0], g.n, 0}});
  }
  std::sort(firsts.begin(), firsts.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<GptqTensor> out;
  for (auto& f : firsts) out.push_back(std::move(f.second));
  return out;
}

Status encode_rows(GgmlType type, int64_t n_rows, int64_t n_cols, const RowSource& source, std::vector<uint8_t>& out,
                   ThreadPool& pool) {
  const quant::TypeTraits* tr = quant::traits(type);
  if (!tr || !tr->from_float) return error(ErrorKind::Unsupported, "no encoder for type " + type_text(type));
  if (n_cols <= 0 || n_rows < 0 || n_cols % tr->block_elems != 0)
    return error(ErrorKind::InvalidArgument, "rows of " + std::to_string(n_cols) + " elements do not divide into " +
                                                 type_text(type) + " blocks");
  const size_t row_bytes = quant::row_bytes(*tr, n_cols);
  out.resize(row_bytes * static_cast<size_t>(n_rows));
  // One f32 row per thread: [n_threads][n_cols].
  std::vector<std::vector<float>> rows(pool.n_threads(), std::vector<float>(n_cols));
  const size_t min_chunk = std::max<size_t>(1, 32768 / static_cast<size_t>(n_cols));
  pool.parallel_for(
      static_cast<size_t>(n_rows),
      [&](size_t begin, size_t end, int thread) {
        float* row = rows[thread].data();
        for (size_t i = begin; i < end; ++i) {
          source(static_cast<int64_t>(i), row);
          tr->from_float(row, out.data() + i * row_bytes, n_cols);
        }
      },
      min_chunk);
  return Status::ok();
}

TensorJob verbatim_job(const gguf::TensorInfo& t) {
  TensorJob job;
  job.name = t.name;
  job.dims.assign(t.dims.begin(), t.dims.begin() + t.n_dims);
  job.type = t.type;
  job.bytes = {t.data, t.n_bytes};
  job.n_bytes_in = t.n_bytes;
  job.mapped_input = {t.data, t.n_bytes};
  return job;
}

Result<QuantizeReport> write_tensor_jobs(gguf::GgufStreamWriter& writer, const std::string& path,
                                         const std::vector<TensorJob>& jobs, ThreadPool& pool,
                                         const QuantizeProgressFn& progress) {
  const auto t0 = std::chrono::steady_clock::now();
  QuantizeReport report;
  report.n_tensors = jobs.size();
  for (const auto& job : jobs) {
    TERN_RETURN_IF_ERROR(writer.declare_tensor(job.name, job.type, job.dims));
    report.n_elements += element_count(job.dims);
  }
  TERN_RETURN_IF_ERROR(writer.open(path));
  std::vector<uint8_t> encoded;  // [n_rows][row bytes] of the current tensor only
  uint64_t n_done = 0;
  for (size_t i = 0; i < jobs.size(); ++i) {
    const TensorJob& job = jobs[i];
    if (progress) progress({i, jobs.size(), n_done, report.n_elements, &job});
    if (i == 0 && !job.mapped_input.empty()) advise_sequential(job.mapped_input);
    if (i + 1 < jobs.size() && !jobs[i + 1].mapped_input.empty()) advise_sequential(jobs[i + 1].mapped_input);
    const uint64_t n = element_count(job.dims);
    std::span<const uint8_t> bytes = job.bytes;
    if (job.encode) {
      auto s = job.encode(encoded, pool);
      if (!s) return s.with_context("tensor '" + job.name + "'");
      bytes = encoded;
      ++report.n_converted;
      report.n_calibrated += job.calibrated ? 1 : 0;
    } else if (job.source) {
      const int64_t n_cols = static_cast<int64_t>(job.dims[0]);
      auto s = encode_rows(job.type, static_cast<int64_t>(n / job.dims[0]), n_cols, job.source, encoded, pool);
      if (!s) return s.with_context("tensor '" + job.name + "'");
      bytes = encoded;
      ++report.n_converted;
      report.n_calibrated += job.calibrated ? 1 : 0;
    }
    TERN_RETURN_IF_ERROR(writer.write_tensor(bytes));
    if (!job.mapped_input.empty()) release_pages(job.mapped_input);
    report.n_bytes_in += job.n_bytes_in;
    report.n_bytes_out += bytes.size();
    report.n_fallback += job.fell_back ? 1 : 0;
    n_done += n;
  }
  encoded = {};
  TERN_RETURN_IF_ERROR(writer.commit());
  if (progress) progress({jobs.size(), jobs.size(), n_done, report.n_elements, nullptr});
  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return report;
}

Result<QuantizeReport> quantize_gguf(const QuantizeOptions& o, ThreadPool& pool, const QuantizeProgressFn& progress) {
  // Same inode, so a symlink, hard link or another spelling of the path counts:
  // writing over the input would replace the only full-precision copy with a lossy one.
  if (same_file(o.in_path, o.out_path))
    return error(ErrorKind::InvalidArgument, "quantize: the output '" + o.out_path + "' is the input file '" +
                                                 o.in_path + "'; write the quantized model to a new path");
  auto file = gguf::GgufFile::open(o.in_path);
  if (!file) return file.status();
  auto model = quant_model_info(*file);
  if (!model) return model.status().with_context(o.in_path);

  gguf::GgufStreamWriter writer;
  for (const auto& [key, value] : file->metadata()) writer.set(key, value);
  writer.set("general.file_type", gguf::Value::of_u32(o.scheme.file_type));
  writer.set("general.quantization_version", gguf::Value::of_u32(2));

  const bool w8a8 = o.scheme.base == GgmlType::I8;
  // A float scheme keeps the smoothed weights unrounded (the fold alone; tests check it computes the same).
  if (o.method == QuantMethod::SmoothQuant && !w8a8 && !is_float_type(o.scheme.base))
    return error(ErrorKind::InvalidArgument, "quantize --method smoothquant makes W8A8 files: use type W8A8");
  if (w8a8 && o.method != QuantMethod::Rtn && o.method != QuantMethod::SmoothQuant)
    return error(ErrorKind::InvalidArgument, std::string("quantize: W8A8 takes --method rtn or smoothquant, not ") +
                                                 quant_method_name(o.method));
  // FP8 rows are scaled by their largest magnitude; the calibrated methods fit block types.
  if (quant::has_row_scale(o.scheme.base) && !w8a8 && o.method != QuantMethod::Rtn)
    return error(ErrorKind::InvalidArgument, std::string("quantize: ") + type_text(o.scheme.base) +
                                                 " takes --method rtn only, not " + quant_method_name(o.method));
  AwqResult awq;
  if (o.method == QuantMethod::Awq || o.method == QuantMethod::SmoothQuant) {
    if (!o.inputs) return error(ErrorKind::InvalidArgument, "quantize: this method needs calibration statistics");
    auto r = o.method == QuantMethod::Awq ? awq_search(*file, o.awq_search_as ? *o.awq_search_as : o.scheme, o.inputs, pool)
                                          : smoothquant_search(*file, o.inputs, o.sq_alpha, pool);
    if (!r) return r.status().with_context(o.in_path);
    awq = std::move(*r);
  }
  if (w8a8) writer.set("tern.w8a8", gguf::Value::of_string(quant_method_name(o.method)));

  std::vector<TensorJob> jobs;
  for (const gguf::TensorInfo& t : file->tensors()) {
    TensorJob job;
    job.name = t.name;
    job.dims.assign(t.dims.begin(), t.dims.begin() + t.n_dims);
    job.n_bytes_in = t.n_bytes;
    job.mapped_input = {t.data, t.n_bytes};
    const TypeChoice choice = choose_tensor_type(o.scheme, *model, t.name, t.n_dims, t.dims[0], t.type);
    job.type = choice.type;
    job.fell_back = choice.fell_back;
    const auto col = awq.column_scale.find(t.name);
    const auto div = awq.row_divisor.find(t.name);
    if (col != awq.column_scale.end() || div != awq.row_divisor.end()) {
      // AWQ: columns multiplied by s (a linear), rows or elements divided by s (its producer).
      const quant::TypeTraits* from = quant::traits(t.type);
      if (!from || !from->to_float)
        return error(ErrorKind::Unsupported, o.in_path + ": tensor '" + t.name + "' has type " + type_text(t.type) +
                                                 ", which this build cannot decode");
      const std::vector<float>* cs = col != awq.column_scale.end() ? &col->second : nullptr;
      const std::vector<float>* rd = div != awq.row_divisor.end() ? &div->second : nullptr;
      const bool one_dim = t.n_dims == 1;
      const size_t row_bytes = quant::row_bytes(*from, static_cast<int64_t>(t.dims[0]));
      const uint8_t* data = t.data;
      const int64_t n_cols = static_cast<int64_t>(t.dims[0]);
      job.calibrated = true;
      job.source = [from, data, row_bytes, n_cols, cs, rd, one_dim](int64_t i_row, float* row) {
        from->to_float(data + static_cast<size_t>(i_row) * row_bytes, row, n_cols);
        if (cs)
          for (int64_t j = 0; j < n_cols; ++j) row[j] *= (*cs)[j];
        if (rd && one_dim)
          for (int64_t j = 0; j < n_cols; ++j) row[j] /= (*rd)[j];
        if (rd && !one_dim)
          for (int64_t j = 0; j < n_cols; ++j) row[j] /= (*rd)[i_row];
      };
    } else if (choice.type == t.type) {
      job.bytes = {t.data, t.n_bytes};
    } else {
      const quant::TypeTraits* from = quant::traits(t.type);
      if (!from || !from->to_float)
        return error(ErrorKind::Unsupported, o.in_path + ": tensor '" + t.name + "' has type " + type_text(t.type) +
                                                 ", which this build cannot decode");
      const size_t row_bytes = quant::row_bytes(*from, static_cast<int64_t>(t.dims[0]));
      const uint8_t* data = t.data;
      const int64_t n_cols = static_cast<int64_t>(t.dims[0]);
      if ((o.method == QuantMethod::Imatrix || o.method == QuantMethod::Gptq) && !is_float_type(choice.type)) {
        const quant::BlockCodec* codec = quant::block_codec(choice.type);
        const bool gptq = o.method == QuantMethod::Gptq && !is_tied_embedding(*model, t.name);
        if (gptq ? !codec && !quant::k_grid_supported(choice.type) : !quant::supports_weighted(choice.type))
          return error(ErrorKind::Unsupported,
                       std::string("quantize --method ") + quant_method_name(o.method) + ": tensor '" + t.name +
                           "' gets type " + type_text(choice.type) + ", which " + quant_method_name(o.method) +
                           " does not cover yet (" +
                           (gptq ? "Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, IQ4_NL, MXFP4, Q4_K, Q5_K, Q6_K"
                                 : "Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, IQ4_NL, MXFP4, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K") +
                           "); choose a scheme of those types, or --method awq (any type) or rtn");
        if (!o.inputs) return error(ErrorKind::InvalidArgument, "quantize: a calibrated method needs calibration statistics");
        const bool experts = t.n_dims == 3;
        CalibratedJob cj{from, data, n_cols, static_cast<int64_t>(t.dims[1]), experts ? static_cast<int64_t>(t.dims[2]) : 1,
                         experts, t.name, choice.type, codec, gptq, o.inputs, o.gptq_damp};
        job.encode = std::move(cj);
        job.calibrated = true;
        jobs.push_back(std::move(job));
        continue;
      }
      job.source = [from, data, row_bytes, n_cols](int64_t i_row, float* row) {
        from->to_float(data + static_cast<size_t>(i_row) * row_bytes, row, n_cols);
      };
      if (choice.type == GgmlType::Q8_0_S24)
        job.encode = sparse24_encoder(t.name, static_cast<int64_t>(element_count(job.dims)) / n_cols, n_cols, job.source);
    }
    if (quant::has_row_scale(t.type) && (job.source || job.encode))
      return error(ErrorKind::InvalidArgument, o.in_path + ": tensor '" + t.name + "' is already " +
                                                   (t.type == GgmlType::I8 ? std::string("W8A8") : type_text(t.type)) +
                                                   " (codes with row scales); quantize "
                                                   "from the F32/F16/BF16 model it was made from");
    if (quant::has_row_scale(job.type) && job.source) {
      add_row_scaled_jobs(std::move(job), jobs);
      continue;
    }
    jobs.push_back(std::move(job));
  }
  auto report = write_tensor_jobs(writer, o.out_path, jobs, pool, progress);
  if (!report) return report.status().with_context(o.out_path);
  return report;
}

}  // namespace tern
