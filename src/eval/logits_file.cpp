#include "eval/logits_file.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>

#include "core/fp16.h"
#include "core/input_file.h"
#include "eval/kl_divergence.h"

namespace tern::eval {
namespace {

constexpr char kMagic[8] = {'T', 'E', 'R', 'N', 'L', 'O', 'G', 'P'};
constexpr uint32_t kVersion = 1;

template <typename T>
void put(uint8_t* dst, size_t offset, T v) {
  std::memcpy(dst + offset, &v, sizeof v);
}
template <typename T>
T get(const uint8_t* src, size_t offset) {
  T v;
  std::memcpy(&v, src + offset, sizeof v);
  return v;
}

void encode_header(const LogitsFileHeader& h, uint8_t* out) {
  std::memset(out, 0, kLogitsHeaderBytes);
  std::memcpy(out, kMagic, sizeof kMagic);
  put<uint32_t>(out, 8, h.version);
  put<uint32_t>(out, 12, h.n_vocab);
  put<uint32_t>(out, 16, h.n_ctx);
  put<uint32_t>(out, 20, h.n_chunks);
  put<uint32_t>(out, 24, h.n_rows_per_chunk);
  put<uint64_t>(out, 32, h.tokens_hash);
  put<double>(out, 40, h.base_nll_mean);
}

Status io_error(const std::string& what, const std::string& path) {
  return error(ErrorKind::IoError, what + " " + path + ": " + std::strerror(errno));
}

}  // namespace

uint64_t hash_tokens(std::span<const TokenId> tokens, int n_ctx) {
  uint64_t h = 0xcbf29ce484222325ull;
  auto mix = [&h](uint32_t v) {
    for (int b = 0; b < 4; ++b) {
      h ^= (v >> (8 * b)) & 0xffu;
      h *= 0x100000001b3ull;
    }
  };
  mix(static_cast<uint32_t>(n_ctx));
  for (TokenId t : tokens) mix(static_cast<uint32_t>(t));
  return h;
}

Result<LogitsWriter> LogitsWriter::create(const std::string& path, const LogitsFileHeader& header) {
  if (header.n_vocab == 0 || header.n_rows_per_chunk == 0)
    return error(ErrorKind::InvalidArgument, "logits file: n_vocab and rows per chunk must be positive");
  LogitsWriter w;
  w.header_ = header;
  w.header_.version = kVersion;
  auto file = AtomicFile::create(path);
  if (!file) return file.status();
  w.file_ = std::move(file).value();
  uint8_t buf[kLogitsHeaderBytes];
  encode_header(w.header_, buf);  // rewritten by finish() with the NLL
  TERN_RETURN_IF_ERROR(w.file_.write(buf));
  return w;
}

Status LogitsWriter::write_row(std::span<const float> logits) {
  if (logits.size() != header_.n_vocab)
    return error(ErrorKind::Internal, "logits file: row of " + std::to_string(logits.size()) + " values, expected " +
                                          std::to_string(header_.n_vocab));
  if (n_rows_written_ >= header_.n_rows()) return error(ErrorKind::Internal, "logits file: more rows than declared");
  log_probs_.resize(logits.size());
  halves_.resize(logits.size());
  log_softmax(logits, log_probs_);
  for (size_t v = 0; v < logits.size(); ++v)
    halves_[v] = float_to_fp16(static_cast<float>(std::max(log_probs_[v], -65504.0)));
  const int32_t top1 = argmax(logits);
  const size_t at = pending_.size();
  pending_.resize(at + sizeof top1 + halves_.size() * sizeof(uint16_t));
  std::memcpy(pending_.data() + at, &top1, sizeof top1);
  std::memcpy(pending_.data() + at + sizeof top1, halves_.data(), halves_.size() * sizeof(uint16_t));
  ++n_rows_written_;
  return pending_.size() >= (size_t{1} << 20) ? flush() : Status::ok();
}

Status LogitsWriter::flush() {
  if (pending_.empty()) return Status::ok();
  TERN_RETURN_IF_ERROR(file_.write(pending_.data(), pending_.size()));
  pending_.clear();
  return Status::ok();
}

Status LogitsWriter::finish(double base_nll_mean) {
  if (n_rows_written_ != header_.n_rows())
    return error(ErrorKind::Internal, "logits file: " + std::to_string(n_rows_written_) + " rows written of " +
                                          std::to_string(header_.n_rows()));
  TERN_RETURN_IF_ERROR(flush());
  header_.base_nll_mean = base_nll_mean;
  uint8_t buf[kLogitsHeaderBytes];
  encode_header(header_, buf);
  TERN_RETURN_IF_ERROR(file_.write_at(0, buf));
  return file_.commit();
}

Result<LogitsReader> LogitsReader::open(const std::string& path) {
  LogitsReader r;
  r.path_ = path;
  auto input = InputFile::open(path);  // refuses FIFOs and devices (which would hang or never end)
  if (!input) return input.status();
  const uint64_t size = input->size();
  const int fd = input->release_fd();
  r.file_.reset(fdopen(fd, "rb"));
  if (!r.file_) {
    ::close(fd);
    return io_error("cannot open", path);
  }
  uint8_t buf[kLogitsHeaderBytes];
  if (std::fread(buf, 1, sizeof buf, r.file_.get()) != sizeof buf || std::memcmp(buf, kMagic, sizeof kMagic) != 0)
    return error(ErrorKind::InvalidFile, path + " is not a saved-logits file (write one with tern perplexity --save-logits)");
  LogitsFileHeader& h = r.header_;
  h.version = get<uint32_t>(buf, 8);
  if (h.version != kVersion)
    return error(ErrorKind::Unsupported, path + ": saved-logits version " + std::to_string(h.version) +
                                             " (this tern reads version " + std::to_string(kVersion) + ")");
  h.n_vocab = get<uint32_t>(buf, 12);
  h.n_ctx = get<uint32_t>(buf, 16);
  h.n_chunks = get<uint32_t>(buf, 20);
  h.n_rows_per_chunk = get<uint32_t>(buf, 24);
  h.tokens_hash = get<uint64_t>(buf, 32);
  h.base_nll_mean = get<double>(buf, 40);
  if (h.n_vocab == 0 || h.n_rows_per_chunk == 0 || h.n_chunks == 0)
    return error(ErrorKind::InvalidFile, path + ": saved-logits header has a zero size");
  const uint64_t expected = kLogitsHeaderBytes + h.n_rows() * h.row_bytes();
  if (size != expected)
    return error(ErrorKind::InvalidFile, path + ": truncated or corrupt saved-logits file: " + std::to_string(size) +
                                             " bytes, the header promises " + std::to_string(expected));
  r.row_.resize(h.row_bytes());
  return r;
}

Status LogitsReader::check_matches(uint32_t n_vocab, uint32_t n_ctx, uint64_t tokens_hash) const {
  const std::string hint = " — save the base logits again with the same text, -c and --chunks";
  if (n_vocab != header_.n_vocab)
    return error(ErrorKind::InvalidArgument, path_ + ": saved for a vocabulary of " + std::to_string(header_.n_vocab) +
                                                 " tokens, this model has " + std::to_string(n_vocab) +
                                                 " (KL needs the same tokenizer)");
  if (n_ctx != header_.n_ctx)
    return error(ErrorKind::InvalidArgument, path_ + ": saved with -c " + std::to_string(header_.n_ctx) + ", this run uses -c " +
                                                 std::to_string(n_ctx) + hint);
  if (tokens_hash != header_.tokens_hash)
    return error(ErrorKind::InvalidArgument,
                 path_ + ": saved for other tokens (a different text, tokenizer or window count)" + hint);
  return Status::ok();
}

Status LogitsReader::read_row(std::span<double> log_probs, int32_t& top1) {
  if (log_probs.size() != header_.n_vocab) return error(ErrorKind::Internal, "logits file: wrong row size");
  if (n_rows_read_ >= header_.n_rows()) return error(ErrorKind::OutOfRange, path_ + ": no more saved rows");
  if (std::fread(row_.data(), 1, row_.size(), file_.get()) != row_.size())
    return error(ErrorKind::InvalidFile, path_ + ": truncated saved-logits file");
  top1 = get<int32_t>(row_.data(), 0);
  if (top1 < 0 || static_cast<uint32_t>(top1) >= header_.n_vocab)
    return error(ErrorKind::InvalidFile, path_ + ": corrupt saved-logits row (top-1 token out of range)");
  double max = -INFINITY;
  for (size_t v = 0; v < log_probs.size(); ++v) {
    log_probs[v] = fp16_to_float(get<uint16_t>(row_.data(), 4 + 2 * v));
    max = std::max(max, log_probs[v]);
  }
  // Rounded log-probs no longer sum to exactly 1 in probability: renormalise,
  // so KL against an identical model is second order in the rounding (~1e-7)
  // instead of first order (~1e-5).
  double z = 0.0;
  for (double lp : log_probs) z += std::exp(lp - max);
  const double log_z = max + std::log(z);
  for (double& lp : log_probs) lp -= log_z;
  ++n_rows_read_;
  return Status::ok();
}

}  // namespace tern::eval
