// model/quantize.h — re-encode a GGUF model's tensors under a QuantScheme
// (model/quant_rules.h), and the row-parallel encoder that `synth` shares.
//
// quantize_gguf(): every metadata key is copied in order; general.file_type is
// set to the scheme's LLAMA_FTYPE and general.quantization_version to 2.
// Tensors keep their order, names and shapes; each is copied byte for byte
// when its type does not change, else decoded to f32 row by row and encoded
// into the new type (any input type with a decoder: F32, F16, BF16, the
// legacy and K quants, IQ4_NL).
//
// Memory: the input is memory-mapped and each tensor's pages are released
// once it is written; the output is streamed (gguf::GgufStreamWriter), so at
// most one tensor's encoded bytes plus one f32 row per thread are held. Rows are split over the ThreadPool and
// each row is encoded independently, so the bytes do not depend on the
// number of threads. The output appears under its name only when complete.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string_view>
#include <span>
#include <string>
#include <vector>

#include "core/status.h"
#include "core/thread_pool.h"
#include "gguf/gguf_format.h"
#include "gguf/writer.h"
#include "model/calibration.h"
#include "model/quant_rules.h"

namespace tern {

// Writes row `i_row` of a tensor as f32 into `row` ([n_cols]). Called from
// several pool threads at once, each with its own `row` buffer.
using RowSource = std::function<void(int64_t i_row, float* row)>;

// Encodes rows [0, n_rows) of `source` as `type` into `out`, resized to
// [n_rows][row bytes of type]. Unsupported `type` (no encoder) is an error.
Status encode_rows(gguf::GgmlType type, int64_t n_rows, int64_t n_cols, const RowSource& source,
                   std::vector<uint8_t>& out, ThreadPool& pool);

// One tensor of a model being written: either verbatim bytes (copied) or a
// row source encoded into `type`.
struct TensorJob {
  std::string name;
  std::vector<uint64_t> dims;       // dims[0] is the row length
  gguf::GgmlType type;              // type written
  std::span<const uint8_t> bytes;   // verbatim data (when source is empty)
  RowSource source;
  // Encodes the whole tensor instead of row by row (calibrated methods).
  std::function<Status(std::vector<uint8_t>& out, ThreadPool& pool)> encode;
  // The input tensor's bytes inside a read-only file mapping, or empty. Once
  // the tensor is written its whole pages are dropped from this process
  // (madvise DONTNEED; the file stays in the page cache), so resident memory
  // does not grow to the input's size over a run.
  std::span<const uint8_t> mapped_input;
  uint64_t n_bytes_in = 0;          // size in the source, for the summary
  bool fell_back = false;
  bool calibrated = false;          // encode uses calibration statistics
};

struct QuantizeProgress {
  size_t i_tensor;            // 0-based index of the tensor being written; n_tensors when done
  size_t n_tensors;
  uint64_t n_elements_done;   // elements of the tensors before this one
  uint64_t n_elements_total;
  const TensorJob* job;       // nullptr when done
};
using QuantizeProgressFn = std::function<void(const QuantizeProgress&)>;

struct QuantizeReport {
  size_t n_tensors = 0;
  size_t n_converted = 0;   // tensors whose type changed
  size_t n_fallback = 0;    // tensors that took a fallback type (quant_rules.h rule 4)
  size_t n_calibrated = 0;  // tensors encoded with calibration statistics (imatrix or GPTQ)
  uint64_t n_elements = 0;
  uint64_t n_bytes_in = 0;  // tensor data only
  uint64_t n_bytes_out = 0;
  double seconds = 0.0;

  double bits_per_weight() const { return n_elements ? 8.0 * n_bytes_out / n_elements : 0.0; }
};

// A job whose type has row scales (W8A8's I8, FP8; quant::has_row_scale) and a
// row source, as the two jobs written: the codes of each row, and the rows' f32
// scales "<base>.scale" (quant::quantize_row_scaled of each source row) — one
// per row, an expert tensor's as [rows, experts].
void add_row_scaled_jobs(TensorJob job, std::vector<TensorJob>& jobs);

// A job that writes tensor `t` of an open file unchanged (its bytes, from the mapping).
TensorJob verbatim_job(const gguf::TensorInfo& t);

// Declares every job on `writer` (which already holds the metadata), opens
// `path`, encodes and writes the jobs one by one, and commits.
Result<QuantizeReport> write_tensor_jobs(gguf::GgufStreamWriter& writer, const std::string& path,
                                         const std::vector<TensorJob>& jobs, ThreadPool& pool,
                                         const QuantizeProgressFn& progress = {});

// How quantized blocks are chosen (docs/quantize.md):
//   Rtn      ggml's reference rounding (the bytes llama-quantize writes without an imatrix)
//   Imatrix  per block, the scale minimising the rounding error weighted by each input
//            column's mean x² on calibration text (quant/block_codec.h)
//   Gptq     GPTQ with H from calibration text (quant/gptq.h); tied embeddings, which
//            are also read row by row, get Imatrix
//   Awq      activation-aware per-channel scales folded into the producing norm or
//            matrix (model/awq.h), then ggml's reference rounding (any block type)
//   SmoothQuant  SmoothQuant's scales (model/smoothquant.h) folded the same way; for
//            the W8A8 scheme (its matrices I8 with per-row scales), from the
//            calibration file's statistics alone
// Gptq covers the 32-element block types (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0,
// IQ4_NL), Imatrix those and Q4_K, Q5_K, Q6_K; a tensor a scheme gives
// another quantized type is an error naming it.
enum class QuantMethod { Rtn, Imatrix, Gptq, Awq, SmoothQuant };
const char* quant_method_name(QuantMethod m);
Result<QuantMethod> parse_quant_method(std::string_view name);

// The statistics of one matrix's input ("<tensor>" or "<tensor>#<expert>"),
// with H for the tensors gptq_plan() lists when the method is Gptq; null when
// calibration never saw that matrix (it is then rounded plainly).
using InputStatsFn = std::function<Result<std::shared_ptr<const InputStats>>(const std::string& key)>;

struct QuantizeOptions {
  std::string in_path;
  std::string out_path;
  QuantScheme scheme;
  QuantMethod method = QuantMethod::Rtn;
  InputStatsFn inputs = {};  // required unless method is Rtn
  double gptq_damp = 0.01;
  // Awq: search the scales for this scheme's types but write under `scheme`
  // (tests: the folded model written in F32 must compute what the original does).
  std::optional<QuantScheme> awq_search_as = {};
  // SmoothQuant: α for every group (0.5, the paper's default), or none to search it per group.
  std::optional<float> sq_alpha = 0.5f;
};

// One tensor GPTQ will quantize: its name, row length and expert count (0: 2-D).
struct GptqTensor {
  std::string name;
  int64_t n_cols = 0;
  int64_t n_expert = 0;
};
// The tensors of `file` that quantize_gguf would give GPTQ under `scheme`, in file order.
Result<std::vector<GptqTensor>> gptq_plan(const gguf::GgufFile& file, const QuantScheme& scheme);
// The tensors whose input H the AWQ search reads (the first of each group, model/awq.h), in file order.
std::vector<GptqTensor> awq_plan(const gguf::GgufFile& file);

Result<QuantizeReport> quantize_gguf(const QuantizeOptions& options, ThreadPool& pool,
                                     const QuantizeProgressFn& progress = {});

}  // namespace tern
