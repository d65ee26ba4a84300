// An HF checkpoint's plan (hf_names.cpp) opened as a GgufFile view, or streamed into a GGUF file.
#include "model/hf_model.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <list>

#include "model/gguf_names.h"
#include "model/quant_rules.h"
#include "quant/quant.h"
#include "tokenizer/hf_tokenizer.h"

namespace tern::hf {
namespace {

// Source row of GGUF row `r` of a PermuteQK tensor (see hf_model.h).
int64_t permuted_source_row(int64_t r, int64_t n_rows, int n_heads) {
  const int64_t hd = n_rows / n_heads, h = r / hd, i = r % hd;
  return h * hd + (i % 2) * (hd / 2) + i / 2;
}

// What the view and the file hold for a tensor: the source type when its
// bytes can be used as they are (or permuted by rows), else F32.
gguf::GgmlType stored_type(const PlannedTensor& t) {
  if (quant::is_fp8(t.source_type) && !keeps_fp8_codes(t)) return gguf::GgmlType::F32;
  const bool by_rows = t.transform == Transform::None || t.transform == Transform::PermuteQK || t.transform == Transform::Gather;
  return by_rows ? t.source_type : gguf::GgmlType::F32;
}

// The source's bytes with its units (rows of a matrix, elements of a bias: what
// the heads are made of) in GGUF order: a PermuteQK tensor kept in its type.
void permuted_bytes(const PlannedTensor& t, size_t n_bytes, uint8_t* dst) {
  const int64_t n_units = t.dims.size() == 1 ? static_cast<int64_t>(t.dims[0]) : static_cast<int64_t>(t.n_rows());
  const size_t unit_bytes = n_bytes / static_cast<size_t>(n_units);
  for (int64_t r = 0; r < n_units; ++r)
    std::memcpy(dst + r * unit_bytes, t.source->bytes.data() + permuted_source_row(r, n_units, t.n_heads) * unit_bytes,
                unit_bytes);
}

// A Gather tensor's pieces' bytes, in their type, one after another.
void gathered_bytes(const PlannedTensor& t, size_t n_bytes, uint8_t* dst) {
  const size_t row_bytes = n_bytes / static_cast<size_t>(t.n_rows());
  for (size_t i = 0; i < t.pieces.size(); ++i)
    std::memcpy(dst + i * static_cast<size_t>(t.piece_rows) * row_bytes,
                t.pieces[i].source->bytes.data() + static_cast<size_t>(t.pieces[i].first_row) * row_bytes,
                static_cast<size_t>(t.piece_rows) * row_bytes);
}

// Multiplies a decoded FP8 row by its scales: row `r` of the matrix whose
// scales start at `scales` (one, one per row, or a block grid; for Gather's
// block grids, the row's expert's grid and its row within the expert).
void apply_scales(const PlannedTensor& t, const float* scales, int64_t r, float* row, int64_t n_cols) {
  if (t.scales.empty()) return;
  if (t.scale_block_rows == 0) {
    const float s = t.scales.size() == 1 ? scales[0] : scales[r];
    for (int64_t i = 0; i < n_cols; ++i) row[i] *= s;
    return;
  }
  const int64_t n_bc = (n_cols + t.scale_block_cols - 1) / t.scale_block_cols;
  const float* s = scales + (r / t.scale_block_rows) * n_bc;
  for (int64_t i = 0; i < n_cols; ++i) row[i] *= s[i / t.scale_block_cols];
}

// Buffers the view owns beside the checkpoint's mappings.
struct ViewStorage {
  std::shared_ptr<safetensors::SafetensorsCheckpoint> checkpoint;
  std::list<std::vector<uint8_t>> buffers;  // a list: a buffer's address never changes
};

gguf::TensorInfo view_tensor(const PlannedTensor& t, ViewStorage& store) {
  gguf::TensorInfo info;
  info.name = t.name;
  info.n_dims = static_cast<uint32_t>(t.dims.size());
  for (size_t d = 0; d < t.dims.size(); ++d) info.dims[d] = t.dims[d];
  info.type = stored_type(t);
  info.n_elements = t.n_elements();
  const quant::TypeTraits* tr = quant::traits(info.type);
  info.n_bytes = info.n_elements * static_cast<uint64_t>(tr->block_bytes) / tr->block_elems;
  const bool same_bytes = info.type == t.source_type;  // not an FP8 matrix decoded to F32
  if (t.transform == Transform::None && same_bytes) {
    info.data = t.source->bytes.data();
    return info;
  }
  std::vector<uint8_t>& buf = store.buffers.emplace_back(info.n_bytes);
  if (t.transform == Transform::PermuteQK && same_bytes) {
    permuted_bytes(t, info.n_bytes, buf.data());
  } else if (t.transform == Transform::Gather && same_bytes) {
    gathered_bytes(t, info.n_bytes, buf.data());
  } else {
    const int64_t n_rows = static_cast<int64_t>(t.n_rows());
    const size_t row_bytes = info.n_bytes / static_cast<size_t>(n_rows);
    for (int64_t r = 0; r < n_rows; ++r) read_planned_row(t, r, reinterpret_cast<float*>(buf.data() + r * row_bytes));
  }
  info.data = buf.data();
  info.in_memory = true;
  return info;
}

}  // namespace

bool keeps_fp8_codes(const PlannedTensor& t) {
  return quant::is_fp8(t.source_type) && t.scale_block_rows == 0 &&
         (t.transform == Transform::None || t.transform == Transform::PermuteQK || t.transform == Transform::Gather);
}

int64_t source_row(const PlannedTensor& t, int64_t i_row) {
  return t.transform == Transform::PermuteQK ? permuted_source_row(i_row, static_cast<int64_t>(t.n_rows()), t.n_heads)
                                             : i_row;
}

void read_planned_row(const PlannedTensor& t, int64_t i_row, float* row) {
  const int64_t n_cols = static_cast<int64_t>(t.dims[0]);
  if (t.transform == Transform::Computed) {
    std::memcpy(row, t.values.data() + i_row * n_cols, static_cast<size_t>(n_cols) * sizeof(float));
    return;
  }
  const quant::TypeTraits* tr = quant::traits(t.source_type);
  if (t.transform == Transform::PermuteQK && t.dims.size() == 1) {  // a bias: its elements are the units
    std::vector<float> v(static_cast<size_t>(n_cols));
    tr->to_float(t.source->bytes.data(), v.data(), n_cols);
    for (int64_t i = 0; i < n_cols; ++i) row[i] = v[static_cast<size_t>(permuted_source_row(i, n_cols, t.n_heads))];
    return;
  }
  const size_t row_bytes = quant::row_bytes(*tr, n_cols);
  if (t.transform == Transform::Gather) {
    const int64_t piece = i_row / t.piece_rows, r = t.pieces[static_cast<size_t>(piece)].first_row + i_row % t.piece_rows;
    tr->to_float(t.pieces[static_cast<size_t>(piece)].source->bytes.data() + static_cast<size_t>(r) * row_bytes, row, n_cols);
    if (t.scale_block_rows == 0) {  // FP8 experts' scales: one per GGUF row
      apply_scales(t, t.scales.data(), i_row, row, n_cols);
    } else {  // block grids, expert after expert
      const int64_t grid = (t.piece_rows + t.scale_block_rows - 1) / t.scale_block_rows *
                           ((n_cols + t.scale_block_cols - 1) / t.scale_block_cols);
      apply_scales(t, t.scales.data() + piece * grid, r, row, n_cols);
    }
    return;
  }
  const int64_t src_row = source_row(t, i_row);
  tr->to_float(t.source->bytes.data() + static_cast<size_t>(src_row) * row_bytes, row, n_cols);
  apply_scales(t, t.scales.data(), src_row, row, n_cols);
  if (t.transform == Transform::AddOne)
    for (int64_t i = 0; i < n_cols; ++i) row[i] += 1.0f;
}

Result<Metadata> read_tokenizer_metadata(const std::string& dir) {
  std::error_code ec;
  if (!std::filesystem::exists(std::filesystem::path(dir) / "tokenizer.json", ec)) return Metadata{};
  return read_hf_tokenizer(dir);
}

Result<gguf::GgufFile> open_model_file(const std::string& path, const MapOptions& options) {
  if (!is_hf_dir(path)) return gguf::GgufFile::open(path, options);
  if (!options.mmap)
    return error(ErrorKind::Unsupported, path + ": --no-mmap takes a GGUF file; convert the Hugging Face directory "
                                               "first (tern convert --from hf " + path + " -o MODEL.gguf)");
  auto tokenizer = read_tokenizer_metadata(path);
  if (!tokenizer) return tokenizer.status();
  return open_hf_view(path, std::move(tokenizer).value());
}

Result<gguf::GgufFile> open_hf_view(const std::string& dir, Metadata tokenizer) {
  auto plan = plan_hf_model(dir);
  if (!plan) return plan.status();
  auto store = std::make_shared<ViewStorage>();
  store->checkpoint = plan->checkpoint;
  std::vector<gguf::TensorInfo> tensors;
  for (const PlannedTensor& t : plan->tensors) tensors.push_back(view_tensor(t, *store));
  Metadata metadata = std::move(plan->config.metadata);
  for (auto& kv : tokenizer) metadata.push_back(std::move(kv));
  auto file = gguf::GgufFile::from_view(std::move(metadata), std::move(tensors), store, /*file_backed=*/true);
  if (!file) return file.status().with_context(dir);
  return file;
}

Result<QuantizeReport> convert_hf_model(const std::string& dir, const std::string& out_path, const QuantScheme& scheme,
                                        Metadata tokenizer, ThreadPool& pool, const QuantizeProgressFn& progress) {
  auto plan = plan_hf_model(dir);
  if (!plan) return plan.status();
  const HfConfig& c = plan->config;
  QuantModelInfo info;
  info.arch = c.arch;
  info.n_layer = c.n_layer;
  info.n_head = c.n_head;
  info.n_head_kv = c.n_head_kv;
  info.n_expert = c.n_expert;
  info.has_output = std::any_of(plan->tensors.begin(), plan->tensors.end(),
                                [](const PlannedTensor& t) { return t.name == "output.weight"; });

  gguf::GgufStreamWriter writer;
  for (const auto& [key, value] : c.metadata) writer.set(key, value);
  writer.set("general.file_type", gguf::Value::of_u32(scheme.file_type));
  writer.set("general.quantization_version", gguf::Value::of_u32(2));
  for (const auto& [key, value] : tokenizer) writer.set(key, value);

  std::vector<TensorJob> jobs;
  for (const PlannedTensor& t : plan->tensors) {
    if (!t.scale_of.empty()) continue;  // an FP8 matrix's companion: written with it, when its codes are
    TensorJob job;
    job.name = t.name;
    job.dims = t.dims;
    // 1-D tensors (norms, biases) are written F32, as llama.cpp's converter writes them.
    const gguf::GgmlType current = t.dims.size() == 1 ? gguf::GgmlType::F32 : stored_type(t);
    const TypeChoice choice = choose_tensor_type(scheme, info, t.name, static_cast<uint32_t>(t.dims.size()), t.dims[0], current);
    job.type = choice.type;
    job.fell_back = choice.fell_back;
    if (t.transform == Transform::Gather) {
      // Pieces may share a source (a fused gate_up_proj): count what is read; nothing to drop as a whole.
      job.n_bytes_in = t.n_elements() * quant::traits(t.source_type)->block_bytes / quant::traits(t.source_type)->block_elems;
    } else if (t.source) {
      job.n_bytes_in = t.source->bytes.size();
      job.mapped_input = t.source->bytes;
    }
    const bool fp8_codes = keeps_fp8_codes(t) && job.type == t.source_type;
    const bool raw = stored_type(t) == t.source_type;  // not an FP8 matrix decoded to F32
    if (t.transform == Transform::None && job.type == t.source_type && raw) {
      job.bytes = t.source->bytes;  // verbatim: the disk-bound path
    } else if (fp8_codes) {  // PermuteQK: the codes' rows in GGUF order; Gather: the experts' codes stacked
      const PlannedTensor* tp = &t;
      job.encode = [tp](std::vector<uint8_t>& out, ThreadPool&) {
        out.resize(tp->n_elements());  // one byte a code
        if (tp->transform == Transform::Gather)
          gathered_bytes(*tp, out.size(), out.data());
        else
          permuted_bytes(*tp, out.size(), out.data());
        return Status::ok();
      };
    } else {
      const PlannedTensor* tp = &t;
      job.source = [tp](int64_t i_row, float* row) { read_planned_row(*tp, i_row, row); };
    }
    if (quant::has_row_scale(job.type) && job.source) {  // W8A8 or FP8 from values: codes and scales made here
      add_row_scaled_jobs(std::move(job), jobs);
      continue;
    }
    jobs.push_back(std::move(job));
    if (fp8_codes) {  // the checkpoint's scales, one per GGUF row
      const std::string scale_name = gguf_names::row_scale_name(t.name);
      const auto companion = std::find_if(plan->tensors.begin(), plan->tensors.end(),
                                          [&](const PlannedTensor& p) { return p.name == scale_name; });
      TensorJob sj;
      sj.name = scale_name;
      sj.dims = companion->dims;
      sj.type = gguf::GgmlType::F32;
      const PlannedTensor* cp = &*companion;
      sj.source = [cp](int64_t i_row, float* row) { read_planned_row(*cp, i_row, row); };
      jobs.push_back(std::move(sj));
    }
  }
  auto report = write_tensor_jobs(writer, out_path, jobs, pool, progress);
  if (!report) return report.status().with_context(out_path);
  return report;
}

}  // namespace tern::hf
