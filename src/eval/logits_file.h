// eval/logits_file.h — the base model's next-token distributions saved by
// `tern perplexity --save-logits` and read back by `--kl-divergence`.
//
// Layout (little-endian, no padding):
//
//   offset size  field
//   0      8     magic "TERNLOGP"
//   8      4     version = 1
//   12     4     n_vocab
//   16     4     n_ctx              window size the rows were scored with
//   20     4     n_chunks           windows
//   24     4     n_rows_per_chunk   scored rows per window (n_ctx - 1 - n_ctx/2)
//   28     4     reserved (0)
//   32     8     tokens_hash        hash_tokens() of the windows' tokens (text + tokenizer + BOS)
//   40     8     base_nll_mean      f64, the base's exact mean NLL on the scored tokens
//   48     ...   n_chunks * n_rows_per_chunk rows, in scoring order, each:
//                  int32  top1                the base's argmax (exact, from f32 logits)
//                  uint16 log_prob[n_vocab]   IEEE half log-softmax of the row
//
// Why F16 log-probabilities (not logits, not a top-k list): KL needs the whole
// distribution, and a top-k list would only bound the tail. Half floats have
// a relative error of 2^-11, so log-probs of likely tokens (near 0) keep
// ~1e-4 nats of absolute precision, while only unlikely tokens (log p < -8,
// p < 3e-4) get coarser — and they weigh almost nothing in KL(base || model).
// F16 logits would lose that: a logit of 20 rounds by 0.01 whatever its
// probability. The argmax is stored exactly so top-1 agreement does not depend
// on rounding ties. Size: 2 * n_vocab + 4 bytes per scored token (llama.cpp's
// uint16 file is the same order), so 512 windows of a 32k vocabulary ~ 8.6 GB:
// use --chunks to bound it.
//
// The writer streams to PATH.tmp and renames on finish(); an unfinished writer
// deletes its file. The reader renormalises each row after decoding (the
// rounded values no longer sum to 1) and checks the magic, version and exact file size
// (a truncated file is an error naming both sizes) and streams rows.
// Threading: one thread per object.
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/atomic_file.h"
#include "core/ids.h"
#include "core/status.h"

namespace tern::eval {

struct LogitsFileHeader {
  uint32_t version = 1;
  uint32_t n_vocab = 0;
  uint32_t n_ctx = 0;
  uint32_t n_chunks = 0;
  uint32_t n_rows_per_chunk = 0;
  uint64_t tokens_hash = 0;
  double base_nll_mean = 0;

  uint64_t n_rows() const { return static_cast<uint64_t>(n_chunks) * n_rows_per_chunk; }
  uint64_t row_bytes() const { return 4 + 2ull * n_vocab; }
};

inline constexpr size_t kLogitsHeaderBytes = 48;

// FNV-1a over the token ids (as int32 little-endian) and the window size.
uint64_t hash_tokens(std::span<const TokenId> tokens, int n_ctx);

struct FileCloser {
  void operator()(std::FILE* f) const {
    if (f) std::fclose(f);
  }
};

class LogitsWriter {
 public:
  // header.base_nll_mean is filled by finish().
  static Result<LogitsWriter> create(const std::string& path, const LogitsFileHeader& header);
  LogitsWriter(LogitsWriter&&) = default;
  LogitsWriter& operator=(LogitsWriter&&) = default;
  ~LogitsWriter() = default;  // the AtomicFile removes PATH.tmp unless finished

  // One scored row's raw logits ([n_vocab]).
  Status write_row(std::span<const float> logits);
  // Writes the header with the base's mean NLL and renames PATH.tmp to PATH.
  // Fails unless exactly n_rows() rows were written.
  Status finish(double base_nll_mean);

 private:
  LogitsWriter() = default;
  AtomicFile file_;  // PATH.tmp until finish()
  LogitsFileHeader header_;
  uint64_t n_rows_written_ = 0;
  std::vector<double> log_probs_;  // scratch [n_vocab]
  std::vector<uint16_t> halves_;   // scratch [n_vocab]
  // Rows not yet written: one write per MiB rather than two per row (a small
  // vocabulary made thousands of tiny writes).
  std::vector<uint8_t> pending_;
  Status flush();
};

class LogitsReader {
 public:
  static Result<LogitsReader> open(const std::string& path);
  const LogitsFileHeader& header() const { return header_; }
  // Rejects a file saved for another model or text with a message that says
  // which field differs and what to do.
  Status check_matches(uint32_t n_vocab, uint32_t n_ctx, uint64_t tokens_hash) const;
  // The next row: log_probs [n_vocab] (renormalised) and the base's argmax.
  Status read_row(std::span<double> log_probs, int32_t& top1);

 private:
  std::unique_ptr<std::FILE, FileCloser> file_;
  std::string path_;
  LogitsFileHeader header_;
  uint64_t n_rows_read_ = 0;
  std::vector<uint8_t> row_;  // scratch [row_bytes]
};

}  // namespace tern::eval
