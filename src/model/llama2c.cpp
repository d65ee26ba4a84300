#include "model/llama2c.h"

#include <cstring>
#include <filesystem>
#include <span>
#include <vector>

#include "core/input_file.h"
#include "core/mmap.h"
#include "gguf/writer.h"
#include "model/gguf_names.h"

namespace tern {
namespace {

using gguf_names::Key;
using gguf_names::key;
using gguf_names::Tensor;
using gguf_names::tensor_name;

constexpr std::string_view kArch = "llama";  // llama2.c checkpoints are Llama models

struct Llama2cHeader {
  int32_t dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size, seq_len;
};

// Reads consecutive float arrays out of the checkpoint, checking bounds.
class FloatCursor {
 public:
  FloatCursor(std::span<const uint8_t> bytes, size_t offset) : bytes_(bytes), pos_(offset) {}
  Result<std::span<const uint8_t>> take(size_t n_floats, const char* what) {
    const size_t n = n_floats * sizeof(float);
    if (n > bytes_.size() - pos_)
      return error(ErrorKind::InvalidFile, std::string("checkpoint is truncated: ") + what + " needs " +
                                               std::to_string(n) + " bytes at offset " + std::to_string(pos_));
    auto out = bytes_.subspan(pos_, n);
    pos_ += n;
    return out;
  }
  size_t remaining() const { return bytes_.size() - pos_; }

 private:
  std::span<const uint8_t> bytes_;
  size_t pos_;
};

struct Vocab {
  std::vector<std::string> tokens;
  std::vector<float> scores;
  std::vector<int32_t> types;
};

// llama2.c tokenizer.bin: int32 max_token_length, then per token f32 score,
// int32 length, bytes. Spaces become U+2581 as in SentencePiece vocabularies.
Result<Vocab> read_vocab(const std::string& path, int n_vocab) {
  auto data = read_file(path);
  if (!data) return data.status();
  const std::string& d = *data;
  size_t pos = 4;
  if (d.size() < 4) return error(ErrorKind::InvalidFile, "'" + path + "' is too short to be a llama2.c tokenizer");
  Vocab v;
  for (int i = 0; i < n_vocab; ++i) {
    float score;
    int32_t len;
    if (d.size() - pos < 8)
      return error(ErrorKind::InvalidFile, "'" + path + "' ends after " + std::to_string(i) + " of " +
                                               std::to_string(n_vocab) + " tokens (vocabulary/model mismatch?)");
    std::memcpy(&score, d.data() + pos, 4);
    std::memcpy(&len, d.data() + pos + 4, 4);
    pos += 8;
    if (len < 0 || static_cast<size_t>(len) > d.size() - pos)
      return error(ErrorKind::InvalidFile, "'" + path + "': token " + std::to_string(i) + " has bad length " + std::to_string(len));
    std::string piece = d.substr(pos, len);
    pos += len;
    int32_t type = 1;  // normal
    if (i == 0) {
      type = 2;  // unknown
      piece = "<unk>";
    } else if (i == 1 || i == 2) {
      type = 3;  // control; llama2.c stores them as "\n<s>\n" / "\n</s>\n"
      piece = i == 1 ? "<s>" : "</s>";
    } else if (piece.size() == 6 && piece.rfind("<0x", 0) == 0 && piece[5] == '>') {
      type = 6;  // byte
    } else {
      std::string escaped;
      for (char c : piece) escaped += c == ' ' ? std::string("\xE2\x96\x81") : std::string(1, c);
      piece = escaped;
    }
    v.tokens.push_back(std::move(piece));
    v.scores.push_back(score);
    v.types.push_back(type);
  }
  return v;
}

}  // namespace

Status convert_llama2c(const Llama2cConvertOptions& o) {
  auto mapped = MappedFile::open(o.model_path);
  if (!mapped) return mapped.status();
  auto bytes = mapped->bytes();
  Llama2cHeader h{};
  if (bytes.size() < sizeof h) return error(ErrorKind::InvalidFile, "'" + o.model_path + "' is too short for a llama2.c header");
  std::memcpy(&h, bytes.data(), sizeof h);
  const bool shared_cls = h.vocab_size > 0;
  // In 64 bits: -INT32_MIN does not fit an int (found by fuzz_llama2c).
  const int64_t vocab_signed = shared_cls ? h.vocab_size : -static_cast<int64_t>(h.vocab_size);
  if (h.dim <= 0 || h.hidden_dim <= 0 || h.n_layers <= 0 || h.n_heads <= 0 || h.n_kv_heads <= 0 || vocab_signed <= 0 ||
      h.seq_len <= 0 || h.dim % h.n_heads != 0 || h.n_heads % h.n_kv_heads != 0 || h.dim > 65536 || h.n_layers > 1024 ||
      vocab_signed > (1 << 22) || h.hidden_dim > (1 << 20))
    return error(ErrorKind::InvalidFile, "'" + o.model_path + "' does not have a plausible llama2.c header");
  const int vocab = static_cast<int>(vocab_signed);
  const size_t dim = h.dim, hidden = h.hidden_dim, L = h.n_layers, head = dim / h.n_heads;
  const size_t kv_dim = head * h.n_kv_heads;

  auto v = read_vocab(o.vocab_path, vocab);
  if (!v) return v.status();

  gguf::GgufWriter w;
  using gguf::Value;
  std::string name = o.name.empty() ? std::filesystem::path(o.model_path).stem().string() : o.name;
  w.set(std::string(gguf_names::kArchitecture), Value::of_string(std::string(kArch)));
  w.set("general.name", Value::of_string(name));
  w.set("general.file_type", Value::of_u32(0));  // all F32
  w.set(key(kArch, Key::ContextLength), Value::of_u32(h.seq_len));
  w.set(key(kArch, Key::EmbeddingLength), Value::of_u32(h.dim));
  w.set(key(kArch, Key::BlockCount), Value::of_u32(h.n_layers));
  w.set(key(kArch, Key::FeedForwardLength), Value::of_u32(h.hidden_dim));
  w.set(key(kArch, Key::HeadCount), Value::of_u32(h.n_heads));
  w.set(key(kArch, Key::HeadCountKv), Value::of_u32(h.n_kv_heads));
  w.set(key(kArch, Key::RmsEpsilon), Value::of_f32(1e-5f));
  w.set(key(kArch, Key::RopeDimensionCount), Value::of_u32(static_cast<uint32_t>(head)));
  w.set(key(kArch, Key::RopeFreqBase), Value::of_f32(10000.0f));
  w.set(key(kArch, Key::VocabSize), Value::of_u32(vocab));
  w.set("tokenizer.ggml.model", Value::of_string("llama"));
  w.set("tokenizer.ggml.pre", Value::of_string("default"));
  w.set("tokenizer.ggml.tokens", Value::of_strings(v->tokens));
  w.set("tokenizer.ggml.scores", Value::of_f32s(v->scores));
  w.set("tokenizer.ggml.token_type", Value::of_i32s(v->types));
  w.set("tokenizer.ggml.unknown_token_id", Value::of_u32(0));
  w.set("tokenizer.ggml.bos_token_id", Value::of_u32(1));
  w.set("tokenizer.ggml.eos_token_id", Value::of_u32(2));
  w.set("tokenizer.ggml.add_bos_token", Value::of_bool(true));
  w.set("tokenizer.ggml.add_eos_token", Value::of_bool(false));
  w.set("tokenizer.ggml.add_space_prefix", Value::of_bool(true));

  FloatCursor c(bytes, sizeof h);
  using gguf::GgmlType;
  auto put = [&](const std::string& tname, std::span<const uint8_t> data, std::vector<uint64_t> dims) {
    return w.add_tensor(tname, GgmlType::F32, std::move(dims), data);
  };
  // Per-layer arrays are stored layer-major: [L][rows][cols]; slice one layer out.
  auto per_layer = [&](const char* what, size_t rows, size_t cols, Tensor tensor) -> Status {
    auto all = c.take(L * rows * cols, what);
    if (!all) return all.status();
    const size_t layer_bytes = rows * cols * sizeof(float);
    for (size_t il = 0; il < L; ++il) {
      std::vector<uint64_t> dims = rows == 1 ? std::vector<uint64_t>{cols} : std::vector<uint64_t>{cols, rows};
      TERN_RETURN_IF_ERROR(put(tensor_name(tensor, static_cast<int>(il)), all->subspan(il * layer_bytes, layer_bytes), dims));
    }
    return Status::ok();
  };
  auto embd = c.take(vocab * dim, "token embeddings");
  if (!embd) return embd.status();
  TERN_RETURN_IF_ERROR(put(tensor_name(Tensor::TokenEmbd), *embd, {dim, static_cast<uint64_t>(vocab)}));
  TERN_RETURN_IF_ERROR(per_layer("rms_att", 1, dim, Tensor::AttnNorm));
  TERN_RETURN_IF_ERROR(per_layer("wq", dim, dim, Tensor::AttnQ));
  TERN_RETURN_IF_ERROR(per_layer("wk", kv_dim, dim, Tensor::AttnK));
  TERN_RETURN_IF_ERROR(per_layer("wv", kv_dim, dim, Tensor::AttnV));
  TERN_RETURN_IF_ERROR(per_layer("wo", dim, dim, Tensor::AttnOutput));
  TERN_RETURN_IF_ERROR(per_layer("rms_ffn", 1, dim, Tensor::FfnNorm));
  TERN_RETURN_IF_ERROR(per_layer("w1", hidden, dim, Tensor::FfnGate));
  TERN_RETURN_IF_ERROR(per_layer("w2", dim, hidden, Tensor::FfnDown));
  TERN_RETURN_IF_ERROR(per_layer("w3", hidden, dim, Tensor::FfnUp));
  auto norm = c.take(dim, "rms_final");
  if (!norm) return norm.status();
  TERN_RETURN_IF_ERROR(put(tensor_name(Tensor::OutputNorm), *norm, {dim}));
  auto rope_tables = c.take(h.seq_len * head, "RoPE tables");  // two [seq_len][head/2] tables, unused
  if (!rope_tables) return rope_tables.status();
  if (!shared_cls) {
    auto cls = c.take(vocab * dim, "classifier");
    if (!cls) return cls.status();
    TERN_RETURN_IF_ERROR(put(tensor_name(Tensor::Output), *cls, {dim, static_cast<uint64_t>(vocab)}));
  }
  if (c.remaining() != 0)
    return error(ErrorKind::InvalidFile, "'" + o.model_path + "' has " + std::to_string(c.remaining()) +
                                             " unexpected trailing bytes (not a legacy llama2.c checkpoint?)");
  return w.write(o.out_path);
}

}  // namespace tern
