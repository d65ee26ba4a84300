#include "model/synth.h"

#include <algorithm>
#include <cmath>

#include "gguf/reader.h"
#include "model/gguf_names.h"

namespace tern {
namespace {

using gguf::GgmlType;
using gguf::Value;
using gguf_names::Key;
using gguf_names::key;
using gguf_names::Tensor;
using gguf_names::tensor_name;

uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// xoshiro256** (Blackman & Vigna), seeded through splitmix64 as its authors advise.
class Xoshiro256 {
 public:
  explicit Xoshiro256(uint64_t seed) {
    for (auto& w : s_) w = splitmix64(seed);
  }
  uint64_t next() {
    const uint64_t result = rotl(s_[1] * 5, 7) * 9;
    const uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = rotl(s_[3], 45);
    return result;
  }

 private:
  static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  uint64_t s_[4];
};

uint64_t fnv1a(const std::string& s) {
  uint64_t h = 0xCBF29CE484222325ull;
  for (unsigned char c : s) h = (h ^ c) * 0x100000001B3ull;
  return h;
}

// The seed of row `i_row` of the tensor whose name hashes to `name_hash`.
uint64_t row_seed(uint64_t seed, uint64_t name_hash, int64_t i_row) {
  uint64_t state = seed;
  uint64_t x = splitmix64(state) ^ name_hash;
  x = splitmix64(x) ^ static_cast<uint64_t>(i_row);
  return splitmix64(x);
}

// Fills row ~ approximately N(0, std^2): the sum of four 16-bit uniforms has
// mean 4 * 32767.5 = 131070 and variance 4 * (65536^2 - 1) / 12.
void fill_normal_row(uint64_t seed, float std_dev, float* row, int64_t n) {
  static const double kSumStd = std::sqrt(4.0 * (65536.0 * 65536.0 - 1.0) / 12.0);
  const float scale = static_cast<float>(std_dev / kSumStd);
  Xoshiro256 rng(seed);
  for (int64_t i = 0; i < n; ++i) {
    const uint64_t r = rng.next();
    const int32_t sum = static_cast<int32_t>((r & 0xFFFF) + ((r >> 16) & 0xFFFF) + ((r >> 32) & 0xFFFF) + (r >> 48));
    row[i] = static_cast<float>(sum - 131070) * scale;
  }
}

bool is_gemma(const SynthOptions& o) { return o.arch == "gemma2" || o.arch == "gemma3"; }

int head_dim_of(const SynthOptions& o) { return o.head_dim > 0 ? o.head_dim : o.n_embd / o.n_head; }

std::string dims_text(const SynthOptions& o) {
  return "dim " + std::to_string(o.n_embd) + ", heads " + std::to_string(o.n_head) + ", kv-heads " +
         std::to_string(o.n_head_kv);
}

}  // namespace

Status validate_synth_options(const SynthOptions& o) {
  auto bad = [](const std::string& what) { return error(ErrorKind::InvalidArgument, "synth: " + what); };
  if (o.arch != "llama" && !is_gemma(o))
    return bad("unsupported --arch '" + o.arch + "' (supported: llama, gemma2, gemma3)");
  if (o.n_embd <= 0 || o.n_layer <= 0 || o.n_head <= 0 || o.n_ff <= 0 || o.n_head_kv < 0 || o.n_ctx <= 0)
    return bad("--dim, --layers, --heads, --ffn and --ctx must be positive");
  if (o.head_dim < 0 || o.head_dim > 512 || o.window < 0) return bad("--head-dim must be in [0, 512] and --window >= 0");
  if (o.arch == "llama" && (o.head_dim != 0 || o.window != 0))
    return bad("--head-dim and --window apply to gemma2/gemma3 only");
  if (o.n_embd > 65536 || o.n_layer > 1024 || o.n_ff > (1 << 20) || o.n_head > 4096 || o.n_ctx > (1 << 24))
    return bad("shape is implausibly large (dim <= 65536, layers <= 1024, ffn <= 1048576)");
  if (o.head_dim == 0 && o.n_embd % o.n_head != 0)
    return bad("--heads " + std::to_string(o.n_head) + " does not divide --dim " + std::to_string(o.n_embd));
  const int n_head_kv = o.n_head_kv ? o.n_head_kv : o.n_head;
  if (n_head_kv > o.n_head || o.n_head % n_head_kv != 0)
    return bad("--kv-heads " + std::to_string(n_head_kv) + " does not divide --heads " + std::to_string(o.n_head));
  if (head_dim_of(o) % 2 != 0)
    return bad("head size " + std::to_string(head_dim_of(o)) + " (" + dims_text(o) + ") must be even for RoPE");
  if (!(o.weight_std > 0.0f) || !std::isfinite(o.weight_std)) return bad("weight std must be positive");
  if (o.vocab_path.empty() || o.out_path.empty()) return bad("--vocab-from and -o are required");
  return Status::ok();
}

namespace {

void set_metadata(gguf::GgufStreamWriter& w, const SynthOptions& o, int n_head_kv, uint64_t n_vocab,
                  const gguf::GgufFile& vocab_file) {
  const std::string name = o.name.empty() ? "synth-" + o.arch + "-" + std::to_string(o.n_embd) + "x" + std::to_string(o.n_layer)
                                          : o.name;
  w.set(std::string(gguf_names::kArchitecture), Value::of_string(o.arch));
  w.set("general.name", Value::of_string(name));
  w.set("general.file_type", Value::of_u32(o.scheme.file_type));
  w.set("general.quantization_version", Value::of_u32(2));
  w.set(key(o.arch, Key::ContextLength), Value::of_u32(o.n_ctx));
  w.set(key(o.arch, Key::EmbeddingLength), Value::of_u32(o.n_embd));
  w.set(key(o.arch, Key::BlockCount), Value::of_u32(o.n_layer));
  w.set(key(o.arch, Key::FeedForwardLength), Value::of_u32(o.n_ff));
  w.set(key(o.arch, Key::HeadCount), Value::of_u32(o.n_head));
  w.set(key(o.arch, Key::HeadCountKv), Value::of_u32(n_head_kv));
  if (!is_gemma(o)) {
    w.set(key(o.arch, Key::RmsEpsilon), Value::of_f32(1e-5f));
    w.set(key(o.arch, Key::RopeDimensionCount), Value::of_u32(o.n_embd / o.n_head));
    w.set(key(o.arch, Key::RopeFreqBase), Value::of_f32(10000.0f));
  } else {
    // Gemma 2's converter writes no RoPE keys (base 10000 by default); Gemma
    // 3's writes the global base and the local layers' own.
    w.set(key(o.arch, Key::RmsEpsilon), Value::of_f32(1e-6f));
    w.set(key(o.arch, Key::KeyLength), Value::of_u32(head_dim_of(o)));
    w.set(key(o.arch, Key::ValueLength), Value::of_u32(head_dim_of(o)));
    const bool g2 = o.arch == "gemma2";
    w.set(key(o.arch, Key::SlidingWindow), Value::of_u32(o.window > 0 ? o.window : g2 ? 4096 : 1024));
    if (g2) {
      w.set(key(o.arch, Key::AttnLogitSoftcap), Value::of_f32(50.0f));
      w.set(key(o.arch, Key::FinalLogitSoftcap), Value::of_f32(30.0f));
    } else {
      w.set(key(o.arch, Key::RopeFreqBase), Value::of_f32(1e6f));
      w.set(key(o.arch, Key::RopeFreqBaseSwa), Value::of_f32(10000.0f));
    }
  }
  w.set(key(o.arch, Key::VocabSize), Value::of_u32(static_cast<uint32_t>(n_vocab)));
  for (const auto& [k, value] : vocab_file.metadata())
    if (k.rfind("tokenizer.", 0) == 0) w.set(k, value);
}

// A generated tensor: dims = {row length, n_rows}; 1-D tensors are norms (all ones).
TensorJob make_job(const SynthOptions& o, const QuantModelInfo& model, const std::string& name,
                   std::vector<uint64_t> dims) {
  TensorJob job;
  job.name = name;
  const uint32_t n_dims = static_cast<uint32_t>(dims.size());
  const TypeChoice choice = choose_tensor_type(o.scheme, model, name, n_dims, dims[0], GgmlType::F32);
  job.type = choice.type;
  job.fell_back = choice.fell_back;
  job.n_bytes_in = 4 * dims[0] * (n_dims > 1 ? dims[1] : 1);
  const int64_t n_cols = static_cast<int64_t>(dims[0]);
  if (n_dims == 1) {
    job.source = [n_cols](int64_t, float* row) { std::fill(row, row + n_cols, 1.0f); };
  } else {
    const uint64_t seed = o.seed, hash = fnv1a(name);
    const float std_dev = o.weight_std;
    job.source = [seed, hash, std_dev, n_cols](int64_t i_row, float* row) {
      fill_normal_row(row_seed(seed, hash, i_row), std_dev, row, n_cols);
    };
  }
  job.dims = std::move(dims);
  return job;
}

}  // namespace

Result<QuantizeReport> synth_model(const SynthOptions& o, ThreadPool& pool, const QuantizeProgressFn& progress) {
  TERN_RETURN_IF_ERROR(validate_synth_options(o));
  auto vocab_file = gguf::GgufFile::open(o.vocab_path);
  if (!vocab_file) return vocab_file.status();
  auto tokens = vocab_file->get_array("tokenizer.ggml.tokens", gguf::ValueType::String);
  if (!tokens) return tokens.status().with_context(o.vocab_path + " (--vocab-from needs a vocabulary)");
  const uint64_t n_vocab = (*tokens)->items.size();
  if (n_vocab == 0) return error(ErrorKind::InvalidFile, o.vocab_path + ": tokenizer.ggml.tokens is empty");

  const int n_head_kv = o.n_head_kv ? o.n_head_kv : o.n_head;
  gguf::GgufStreamWriter w;
  set_metadata(w, o, n_head_kv, n_vocab, *vocab_file);

  QuantModelInfo model;
  model.arch = o.arch;
  model.n_layer = o.n_layer;
  model.n_head = o.n_head;
  model.n_head_kv = n_head_kv;
  model.has_output = !is_gemma(o);  // Gemma's classifier is token_embd

  // Shapes as {row length, n_rows}: weights are [n_out][n_in], rows of n_in.
  const uint64_t n_embd = o.n_embd, n_ff = o.n_ff, head_dim = static_cast<uint64_t>(head_dim_of(o));
  const uint64_t q_dim = head_dim * o.n_head, kv_dim = head_dim * n_head_kv;
  std::vector<TensorJob> jobs;
  auto add = [&](Tensor t, int il, std::vector<uint64_t> dims) {
    jobs.push_back(make_job(o, model, tensor_name(t, il), std::move(dims)));
  };
  add(Tensor::TokenEmbd, -1, {n_embd, n_vocab});
  for (int il = 0; il < o.n_layer; ++il) {
    add(Tensor::AttnNorm, il, {n_embd});
    add(Tensor::AttnQ, il, {n_embd, q_dim});
    add(Tensor::AttnK, il, {n_embd, kv_dim});
    add(Tensor::AttnV, il, {n_embd, kv_dim});
    add(Tensor::AttnOutput, il, {q_dim, n_embd});
    add(Tensor::FfnNorm, il, {n_embd});
    add(Tensor::FfnGate, il, {n_embd, n_ff});
    add(Tensor::FfnUp, il, {n_embd, n_ff});
    add(Tensor::FfnDown, il, {n_ff, n_embd});
    if (is_gemma(o)) {
      add(Tensor::AttnPostNorm, il, {n_embd});
      add(Tensor::FfnPostNorm, il, {n_embd});
    }
    if (o.arch == "gemma3") {
      add(Tensor::AttnQNorm, il, {head_dim});
      add(Tensor::AttnKNorm, il, {head_dim});
    }
  }
  add(Tensor::OutputNorm, -1, {n_embd});
  if (model.has_output) add(Tensor::Output, -1, {n_embd, n_vocab});

  auto report = write_tensor_jobs(w, o.out_path, jobs, pool, progress);
  if (!report) return report.status().with_context(o.out_path);
  return report;
}

}  // namespace tern
