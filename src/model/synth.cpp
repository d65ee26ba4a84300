#include "model/synth.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <vector>

#include "core/hash.h"
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

// Mamba's mixer sizes for a model of o.n_embd (expand 2, 4 taps; Mamba-1: dt
// rank dim / 16 rounded up; Mamba-2: heads of head_dim, dt_rank = heads).
struct MambaShape {
  int d_inner, d_conv, d_state, dt_rank, head_dim = 0, n_group = 0;
};
MambaShape mamba_shape(const SynthOptions& o) {
  if (o.arch == "mamba2" || o.arch == "nemotron_h") {
    const int head_dim = o.ssm_head_dim > 0 ? o.ssm_head_dim : o.arch == "mamba2" && o.head_dim > 0 ? o.head_dim : 64;
    MambaShape m{2 * o.n_embd, 4, o.d_state > 0 ? o.d_state : 128, 0, head_dim, o.n_group > 0 ? o.n_group : 1};
    m.dt_rank = m.d_inner / m.head_dim;
    return m;
  }
  return {2 * o.n_embd, 4, o.d_state > 0 ? o.d_state : 16, (o.n_embd + 15) / 16};
}

// nemotron_h's layers, one character each: M mixer, * attention, - FFN.
std::string layer_pattern(const SynthOptions& o) {
  if (!o.layer_pattern.empty()) return o.layer_pattern;
  std::string p;
  for (int il = 0; il < o.n_layer; ++il) p += "M-M*-"[il % 5];
  return p;
}

// The Mamba-2 shape checks mamba2 and nemotron_h share.
std::string mamba2_shape_error(const SynthOptions& o) {
  const MambaShape m = mamba_shape(o);
  if (o.head_dim < 0 || o.ssm_head_dim < 0 || o.n_group < 0 || m.head_dim <= 0 || m.d_inner % m.head_dim != 0 ||
      (m.d_inner / m.head_dim) % m.n_group != 0)
    return o.arch + ": the mixer's head width (--ssm-head-dim" + (o.arch == "mamba2" ? " or --head-dim" : "") +
           ", default 64) must divide 2 x --dim (" +
           std::to_string(m.d_inner) + ") into heads that --ssm-groups (default 1) divides";
  return "";
}

bool is_gemma(const SynthOptions& o) { return o.arch == "gemma2" || o.arch == "gemma3"; }
bool is_moe(const SynthOptions& o) { return o.arch == "mixtral" || o.arch == "qwen2moe" || o.arch == "qwen3moe"; }

std::string dims_text(const SynthOptions& o) {
  return "dim " + std::to_string(o.n_embd) + ", heads " + std::to_string(o.n_head) + ", kv-heads " +
         std::to_string(o.n_head_kv);
}

}  // namespace

Status validate_synth_options(const SynthOptions& o) {
  auto bad = [](const std::string& what) { return error(ErrorKind::InvalidArgument, "synth: " + what); };
  const bool gemma = is_gemma(o);
  if (!o.layer_pattern.empty() && o.arch != "nemotron_h") return bad("--layer-pattern applies to nemotron_h only");
  if (o.arch == "mamba" || o.arch == "mamba2") {
    if (o.n_head != 0 || o.n_head_kv != 0 || o.n_ff != 0 || o.n_expert != 0 || o.window != 0)
      return bad(o.arch + " has no attention or FFN: --heads, --kv-heads, --ffn, --experts and --window do not apply");
    if (o.arch == "mamba" && (o.head_dim != 0 || o.n_group != 0))
      return bad("--head-dim and --ssm-groups apply to mamba2 (Mamba-1 has no heads)");
    if (o.arch == "mamba" && o.ssm_head_dim != 0) return bad("--ssm-head-dim applies to mamba2 and nemotron_h");
    if (o.arch == "mamba2")
      if (const std::string e = mamba2_shape_error(o); !e.empty()) return bad(e);
    if (o.n_embd <= 0 || o.n_layer <= 0 || o.n_ctx <= 0 || o.d_state < 0)
      return bad("--dim, --layers and --ctx must be positive");
    if (o.n_embd > 65536 || o.n_layer > 1024 || o.n_ctx > (1 << 24) || o.d_state > 1024)
      return bad("shape is implausibly large (dim <= 65536, layers <= 1024, state <= 1024)");
    if (!(o.weight_std > 0.0f) || !std::isfinite(o.weight_std)) return bad("weight std must be positive");
    if (o.vocab_path.empty() || o.out_path.empty()) return bad("--vocab-from and -o are required");
    return Status::ok();
  }
  if (o.arch == "nemotron_h") {
    if (o.n_expert != 0 || o.n_expert_used != 0 || o.n_ff_exp != 0 || o.n_ff_shexp != 0 || o.window != 0)
      return bad("nemotron_h (dense) has no experts or sliding window");
    if (o.n_layer > 0 && layer_pattern(o).size() != static_cast<size_t>(o.n_layer))
      return bad("--layer-pattern has " + std::to_string(o.layer_pattern.size()) + " characters but --layers is " +
                 std::to_string(o.n_layer) + ": give one per layer");
    if (layer_pattern(o).find_first_not_of("M*-") != std::string::npos)
      return bad("--layer-pattern '" + o.layer_pattern + "': one character per layer, M (Mamba-2 mixer), * (attention) or - (FFN)");
    if (o.d_state < 0 || o.d_state > 1024) return bad("--ssm-state must be in [1, 1024]");
    if (const std::string e = mamba2_shape_error(o); !e.empty()) return bad(e);
  } else if (o.d_state != 0 || o.n_group != 0 || o.ssm_head_dim != 0) {
    return bad("--ssm-state, --ssm-groups and --ssm-head-dim apply to mamba, mamba2 and nemotron_h only");
  }
  if (o.arch != "llama" && o.arch != "llama3" && o.arch != "qwen3" && o.arch != "phi3" && !gemma && !is_moe(o) &&
      o.arch != "nemotron_h")
    return bad("unsupported --arch '" + o.arch +
               "' (supported: llama, llama3, qwen3, phi3, gemma2, gemma3, mixtral, qwen2moe, qwen3moe, mamba, mamba2, "
               "nemotron_h)");
  if (is_moe(o)) {
    if (o.n_expert <= 0 || o.n_expert > 512 || o.n_expert_used <= 0 || o.n_expert_used > o.n_expert)
      return bad("--arch " + o.arch + " needs --experts N (1..512) and --experts-used K (1..N)");
    if (o.n_ff_exp < 0 || o.n_ff_shexp < 0 || o.n_ff_exp > (1 << 20) || o.n_ff_shexp > (1 << 20))
      return bad("--expert-ffn and --shared-ffn must be in [1, 1048576]");
    if (o.arch == "mixtral" && o.n_ff_exp != 0) return bad("mixtral's experts are --ffn wide: --expert-ffn is for qwen2moe/qwen3moe");
    if (o.arch != "qwen2moe" && o.n_ff_shexp != 0) return bad("--shared-ffn applies to qwen2moe only");
  } else if (o.n_expert != 0 || o.n_expert_used != 0 || o.n_ff_exp != 0 || o.n_ff_shexp != 0) {
    return bad("--experts, --experts-used, --expert-ffn and --shared-ffn apply to mixtral, qwen2moe and qwen3moe only");
  }
  if (o.window < 0) return bad("--window must be >= 0");
  if (o.window != 0 && !gemma) return bad("--window applies to gemma2/gemma3 only");
  if (o.n_embd <= 0 || o.n_layer <= 0 || o.n_head <= 0 || o.n_ff <= 0 || o.n_head_kv < 0 || o.n_ctx <= 0 ||
      o.head_dim < 0)
    return bad("--dim, --layers, --heads, --ffn and --ctx must be positive");
  if (o.n_embd > 65536 || o.n_layer > 1024 || o.n_ff > (1 << 20) || o.n_head > 4096 || o.n_ctx > (1 << 24) ||
      o.head_dim > 4096)
    return bad("shape is implausibly large (dim <= 65536, layers <= 1024, ffn <= 1048576, head size <= 4096)");
  if (o.head_dim == 0 && o.n_embd % o.n_head != 0)
    return bad("--heads " + std::to_string(o.n_head) + " does not divide --dim " + std::to_string(o.n_embd));
  const int n_head_kv = o.n_head_kv ? o.n_head_kv : o.n_head;
  if (n_head_kv > o.n_head || o.n_head % n_head_kv != 0)
    return bad("--kv-heads " + std::to_string(n_head_kv) + " does not divide --heads " + std::to_string(o.n_head));
  const int head_dim = o.head_dim ? o.head_dim : o.n_embd / o.n_head;
  if (head_dim % 2 != 0 && o.arch != "nemotron_h")  // its attention has no RoPE
    return bad("head size " + std::to_string(head_dim) + " (" + dims_text(o) + ") must be even for RoPE");
  if (!(o.weight_std > 0.0f) || !std::isfinite(o.weight_std)) return bad("weight std must be positive");
  if (o.vocab_path.empty() || o.out_path.empty()) return bad("--vocab-from and -o are required");
  return Status::ok();
}

namespace {

// What --arch asks for beyond llama's tensors and keys.
struct ArchShape {
  std::string file_arch;  // general.architecture ("llama3" is written as llama)
  int head_dim = 0;
  float freq_base = 10000.0f;
  float rms_eps = 1e-5f;
  bool key_length = false;  // write attention.key_length / value_length
  bool qk_norm = false;     // qwen3, gemma3
  bool fused = false;       // phi3: attn_qkv, [gate; up] ffn_up
  int long_rope_orig_ctx = 0;  // phi3: rope.scaling.original_context_length
  bool qkv_bias = false;    // qwen2moe: attn_{q,k,v}.bias (zeros)
  int n_ff_exp = 0;         // MoE: one expert's width (0: dense)
  int n_ff_shexp = 0;       // qwen2moe: the shared expert's width
  bool expert_ffn_key = false;  // write expert_feed_forward_length (qwen*moe)
};

ArchShape arch_shape(const SynthOptions& o) {
  ArchShape a;
  a.file_arch = o.arch == "llama3" || o.arch == "mixtral" ? "llama" : o.arch;
  a.head_dim = o.n_head > 0 ? (o.head_dim ? o.head_dim : o.n_embd / o.n_head) : 0;
  a.key_length = o.head_dim != 0 || o.arch == "qwen3" || o.arch == "nemotron_h";
  if (o.arch == "llama3") a.freq_base = 500000.0f;
  if (o.arch == "qwen3" || o.arch == "qwen3moe") {
    a.freq_base = 1e6f;
    a.rms_eps = 1e-6f;
    a.qk_norm = true;
    a.key_length = true;
  }
  if (o.arch == "qwen2moe") {
    a.freq_base = 1e6f;
    a.rms_eps = 1e-6f;
    a.qkv_bias = true;
    a.n_ff_shexp = o.n_ff_shexp ? o.n_ff_shexp : o.n_ff;
  }
  if (is_moe(o)) {
    a.expert_ffn_key = o.arch != "mixtral";
    a.n_ff_exp = o.arch == "mixtral" ? o.n_ff : o.n_ff_exp ? o.n_ff_exp : std::max(1, o.n_ff / o.n_expert_used);
  }
  if (is_gemma(o)) {
    a.key_length = true;
    a.rms_eps = 1e-6f;
    a.qk_norm = o.arch == "gemma3";
  }
  if (o.arch == "phi3") {
    a.fused = true;
    a.long_rope_orig_ctx = std::min(o.n_ctx, 4096);
  }
  return a;
}

// Llama 3.1's rope_freqs as its rope_scaling defines them (factor 8, low and
// high frequency factors 1 and 4, original context 8192): pairs turning fast
// (wavelength under 8192 / 4) keep their frequency, slow ones (over 8192)
// are divided by 8, with a smooth blend between.
std::vector<float> llama31_rope_freqs(int n_rot, double base) {
  const double factor = 8.0, low = 1.0, high = 4.0, old_ctx = 8192.0;
  std::vector<float> out;
  for (int i = 0; i < n_rot / 2; ++i) {
    const double wavelen = 2.0 * M_PI * std::pow(base, 2.0 * i / n_rot);
    double f = 1.0;
    if (wavelen > old_ctx / low) {
      f = factor;
    } else if (wavelen >= old_ctx / high) {
      const double smooth = (old_ctx / wavelen - low) / (high - low);
      f = 1.0 / ((1.0 - smooth) / factor + smooth);
    }
    out.push_back(static_cast<float>(f));
  }
  return out;
}

// LongRoPE factors of the shape Phi-3's have: short ones near 1, long ones
// rising from 1 for the fastest pair to the context ratio for the slowest.
std::vector<float> long_rope_factors(int n_rot, double ratio, bool long_set) {
  std::vector<float> out;
  const int half = n_rot / 2;
  for (int i = 0; i < half; ++i) {
    const double t = half > 1 ? static_cast<double>(i) / (half - 1) : 0.0;
    out.push_back(static_cast<float>(long_set ? 1.0 + (ratio - 1.0) * t : 1.0 + 0.1 * t));
  }
  return out;
}

// The vocabulary size and every tokenizer.* key of the vocabulary file.
void copy_vocab(gguf::GgufStreamWriter& w, const std::string& arch, uint64_t n_vocab, const gguf::GgufFile& vocab_file) {
  w.set(key(arch, Key::VocabSize), Value::of_u32(static_cast<uint32_t>(n_vocab)));
  for (const auto& [k, value] : vocab_file.metadata())
    if (k.rfind("tokenizer.", 0) == 0) w.set(k, value);
}

void set_metadata(gguf::GgufStreamWriter& w, const SynthOptions& o, const ArchShape& a, int n_head_kv,
                  uint64_t n_vocab, const gguf::GgufFile& vocab_file) {
  const std::string name = o.name.empty() ? "synth-" + o.arch + "-" + std::to_string(o.n_embd) + "x" + std::to_string(o.n_layer)
                                          : o.name;
  const std::string& arch = a.file_arch;
  w.set(std::string(gguf_names::kArchitecture), Value::of_string(arch));
  w.set("general.name", Value::of_string(name));
  w.set("general.file_type", Value::of_u32(o.scheme.file_type));
  w.set("general.quantization_version", Value::of_u32(2));
  w.set(key(arch, Key::ContextLength), Value::of_u32(o.n_ctx));
  w.set(key(arch, Key::EmbeddingLength), Value::of_u32(o.n_embd));
  w.set(key(arch, Key::BlockCount), Value::of_u32(o.n_layer));
  if (o.arch == "mamba" || o.arch == "mamba2") {  // as llama.cpp's converter writes them: no heads, no FFN
    const MambaShape m = mamba_shape(o);
    if (m.n_group > 0) w.set(key(arch, Key::SsmGroupCount), Value::of_u32(m.n_group));
    w.set(key(arch, Key::FeedForwardLength), Value::of_u32(0));
    w.set(key(arch, Key::HeadCount), Value::of_u32(0));
    w.set(key(arch, Key::SsmConvKernel), Value::of_u32(m.d_conv));
    w.set(key(arch, Key::SsmInnerSize), Value::of_u32(m.d_inner));
    w.set(key(arch, Key::SsmStateSize), Value::of_u32(m.d_state));
    w.set(key(arch, Key::SsmTimeStepRank), Value::of_u32(m.dt_rank));
    w.set(key(arch, Key::RmsEpsilon), Value::of_f32(a.rms_eps));
    copy_vocab(w, arch, n_vocab, vocab_file);
    return;
  }
  if (o.arch == "nemotron_h") {  // per-layer arrays (0 where a layer has none), the mixer's keys, no RoPE keys
    const std::string pattern = layer_pattern(o);
    std::vector<Value> ff, kv;
    for (char c : pattern) {
      ff.push_back(Value::of_u32(c == '-' ? static_cast<uint32_t>(o.n_ff) : 0));
      kv.push_back(Value::of_u32(c == '*' ? static_cast<uint32_t>(n_head_kv) : 0));
    }
    const MambaShape m = mamba_shape(o);
    w.set(key(arch, Key::FeedForwardLength), Value::of_array(gguf::ValueType::U32, std::move(ff)));
    w.set(key(arch, Key::HeadCount), Value::of_u32(o.n_head));
    w.set(key(arch, Key::HeadCountKv), Value::of_array(gguf::ValueType::U32, std::move(kv)));
    w.set(key(arch, Key::KeyLength), Value::of_u32(a.head_dim));
    w.set(key(arch, Key::ValueLength), Value::of_u32(a.head_dim));
    w.set(key(arch, Key::RmsEpsilon), Value::of_f32(a.rms_eps));
    w.set(key(arch, Key::LayerNormEpsilon), Value::of_f32(a.rms_eps));
    w.set(key(arch, Key::SsmGroupCount), Value::of_u32(m.n_group));
    w.set(key(arch, Key::SsmConvKernel), Value::of_u32(m.d_conv));
    w.set(key(arch, Key::SsmInnerSize), Value::of_u32(m.d_inner));
    w.set(key(arch, Key::SsmStateSize), Value::of_u32(m.d_state));
    w.set(key(arch, Key::SsmTimeStepRank), Value::of_u32(m.dt_rank));
    copy_vocab(w, arch, n_vocab, vocab_file);
    return;
  }
  w.set(key(arch, Key::FeedForwardLength), Value::of_u32(o.n_ff));
  w.set(key(arch, Key::HeadCount), Value::of_u32(o.n_head));
  w.set(key(arch, Key::HeadCountKv), Value::of_u32(n_head_kv));
  if (a.key_length) {
    w.set(key(arch, Key::KeyLength), Value::of_u32(a.head_dim));
    w.set(key(arch, Key::ValueLength), Value::of_u32(a.head_dim));
  }
  w.set(key(arch, Key::RmsEpsilon), Value::of_f32(a.rms_eps));
  if (is_gemma(o)) {
    // Gemma 2's converter writes no RoPE keys (base 10000 by default); Gemma
    // 3's writes the global base and the local layers' own.
    const bool g2 = o.arch == "gemma2";
    w.set(key(arch, Key::SlidingWindow), Value::of_u32(o.window > 0 ? o.window : g2 ? 4096 : 1024));
    if (g2) {
      w.set(key(arch, Key::AttnLogitSoftcap), Value::of_f32(50.0f));
      w.set(key(arch, Key::FinalLogitSoftcap), Value::of_f32(30.0f));
    } else {
      w.set(key(arch, Key::RopeFreqBase), Value::of_f32(1e6f));
      w.set(key(arch, Key::RopeFreqBaseSwa), Value::of_f32(10000.0f));
    }
  } else {
    w.set(key(arch, Key::RopeDimensionCount), Value::of_u32(a.head_dim));
    w.set(key(arch, Key::RopeFreqBase), Value::of_f32(a.freq_base));
  }
  if (a.long_rope_orig_ctx > 0) {
    const int orig = a.long_rope_orig_ctx;
    w.set(key(arch, Key::RopeScalingOrigCtx), Value::of_u32(orig));
    w.set(key(arch, Key::SlidingWindow), Value::of_u32(0));
    if (o.n_ctx > orig) {
      const double attn_factor = std::sqrt(1.0 + std::log(double(o.n_ctx) / orig) / std::log(double(orig)));
      w.set(key(arch, Key::RopeScalingAttnFactor), Value::of_f32(static_cast<float>(attn_factor)));
    }
  }
  if (a.n_ff_exp > 0) {
    w.set(key(arch, Key::ExpertCount), Value::of_u32(o.n_expert));
    w.set(key(arch, Key::ExpertUsedCount), Value::of_u32(o.n_expert_used));
    if (a.expert_ffn_key) w.set(key(arch, Key::ExpertFeedForwardLength), Value::of_u32(a.n_ff_exp));
    if (a.n_ff_shexp > 0) w.set(key(arch, Key::ExpertSharedFeedForwardLength), Value::of_u32(a.n_ff_shexp));
  }
  copy_vocab(w, arch, n_vocab, vocab_file);
}

// A generated tensor: dims = {row length, n_rows}; 1-D tensors are norms (all ones).
TensorJob make_job(const SynthOptions& o, const QuantModelInfo& model, const std::string& name,
                   std::vector<uint64_t> dims) {
  const int64_t n_cols = static_cast<int64_t>(dims[0]);
  RowSource source;
  if (dims.size() == 1) {
    source = [n_cols](int64_t, float* row) { std::fill(row, row + n_cols, 1.0f); };
  } else {
    const uint64_t seed = o.seed, hash = fnv1a64(name);
    const float std_dev = o.weight_std;
    source = [seed, hash, std_dev, n_cols](int64_t i_row, float* row) {
      fill_normal_row(row_seed(seed, hash, i_row), std_dev, row, n_cols);
    };
  }
  return generated_tensor_job(o.scheme, model, name, std::move(dims), std::move(source));
}

// A 1-D F32 tensor of fixed values (RoPE factors).
TensorJob values_job(const std::string& name, std::vector<float> values) {
  TensorJob job;
  job.name = name;
  job.type = GgmlType::F32;
  job.n_bytes_in = 4 * values.size();
  job.dims = {values.size()};
  job.source = [values = std::move(values)](int64_t, float* row) { std::copy(values.begin(), values.end(), row); };
  return job;
}

// An F32 tensor of n_rows rows of n_cols, row r given by fill(r, row).
TensorJob f32_job(const std::string& name, int64_t n_cols, int64_t n_rows, std::function<void(int64_t, float*)> fill) {
  TensorJob job;
  job.name = name;
  job.type = GgmlType::F32;
  job.n_bytes_in = 4 * static_cast<uint64_t>(n_cols * n_rows);
  job.dims = n_rows == 1 ? std::vector<uint64_t>{static_cast<uint64_t>(n_cols)}
                         : std::vector<uint64_t>{static_cast<uint64_t>(n_cols), static_cast<uint64_t>(n_rows)};
  job.source = std::move(fill);
  return job;
}

// Mamba's layers with its initialisation (synth.h), each random tensor from its own stream.
void add_mamba_layers(const SynthOptions& o, const QuantModelInfo& model, std::vector<TensorJob>& jobs) {
  const MambaShape m = mamba_shape(o);
  const uint64_t n_embd = o.n_embd, d_inner = m.d_inner, d_state = m.d_state, dt_rank = m.dt_rank;
  const int64_t di = m.d_inner, ds = m.d_state, dc = m.d_conv;
  const uint64_t seed = o.seed;
  // Uniform in [-0.5, 0.5) from a row's normal draws' stream: the conv taps and bias.
  auto uniform_half = [seed](const std::string& name, int64_t n) {
    const uint64_t hash = fnv1a64(name);
    return [seed, hash, n](int64_t r, float* row) {
      uint64_t st = row_seed(seed, hash, r);
      for (int64_t i = 0; i < n; ++i) row[i] = static_cast<float>(static_cast<double>(splitmix64(st) >> 11) * 0x1.0p-53 - 0.5);
    };
  };
  for (int il = 0; il < o.n_layer; ++il) {
    auto name = [&](Tensor t) { return tensor_name(t, il); };
    jobs.push_back(make_job(o, model, name(Tensor::AttnNorm), {n_embd}));
    jobs.push_back(make_job(o, model, name(Tensor::SsmIn), {n_embd, 2 * d_inner}));
    jobs.push_back(f32_job(name(Tensor::SsmConv1d), dc, di, uniform_half(name(Tensor::SsmConv1d), dc)));
    jobs.push_back(f32_job(name(Tensor::SsmConv1dBias), di, 1, uniform_half(name(Tensor::SsmConv1dBias), di)));
    jobs.push_back(make_job(o, model, name(Tensor::SsmX), {d_inner, dt_rank + 2 * d_state}));
    jobs.push_back(make_job(o, model, name(Tensor::SsmDt), {dt_rank, d_inner}));
    // dt = exp(uniform over [ln 0.001, ln 0.1]) per channel; the bias is softplus^-1(dt) = dt + ln(1 - e^-dt).
    jobs.push_back(f32_job(name(Tensor::SsmDtBias), di, 1, [di](int64_t, float* row) {
      for (int64_t c = 0; c < di; ++c) {
        const double u = std::fmod(static_cast<double>(c) * 0.6180339887498949, 1.0);
        const double dt = std::exp(std::log(0.001) + u * (std::log(0.1) - std::log(0.001)));
        row[c] = static_cast<float>(dt + std::log(-std::expm1(-dt)));
      }
    }));
    jobs.push_back(f32_job(name(Tensor::SsmA), ds, di, [ds](int64_t, float* row) {
      for (int64_t s = 0; s < ds; ++s) row[s] = -static_cast<float>(s + 1);
    }));
    jobs.push_back(f32_job(name(Tensor::SsmD), di, 1, [di](int64_t, float* row) { std::fill(row, row + di, 1.0f); }));
    jobs.push_back(make_job(o, model, name(Tensor::SsmOut), {d_inner, n_embd}));
  }
}

// Mamba-2's layer il with its initialisation (synth.h); [1, heads] tables stay 2-D.
void add_mamba2_layer(const SynthOptions& o, const QuantModelInfo& model, int il, std::vector<TensorJob>& jobs) {
  const MambaShape m = mamba_shape(o);
  const int64_t di = m.d_inner, ds = m.d_state, dc = m.d_conv, heads = m.dt_rank, ng = m.n_group;
  const int64_t n_ch = di + 2 * ng * ds;
  const uint64_t n_embd = o.n_embd, in_rows = static_cast<uint64_t>(di + n_ch + heads), seed = o.seed;
  auto uniform_half = [seed](const std::string& name, int64_t n) {
    const uint64_t hash = fnv1a64(name);
    return [seed, hash, n](int64_t r, float* row) {
      uint64_t st = row_seed(seed, hash, r);
      for (int64_t i = 0; i < n; ++i) row[i] = static_cast<float>(static_cast<double>(splitmix64(st) >> 11) * 0x1.0p-53 - 0.5);
    };
  };
  auto per_head = [heads](const std::string& name, std::function<float(int64_t)> value) {
    TensorJob job = f32_job(name, 1, heads, [value](int64_t r, float* row) { row[0] = value(r); });
    job.dims = {1, static_cast<uint64_t>(heads)};
    return job;
  };
  {
    auto name = [&](Tensor t) { return tensor_name(t, il); };
    jobs.push_back(make_job(o, model, name(Tensor::AttnNorm), {n_embd}));
    jobs.push_back(make_job(o, model, name(Tensor::SsmIn), {n_embd, in_rows}));
    jobs.push_back(f32_job(name(Tensor::SsmConv1d), dc, n_ch, uniform_half(name(Tensor::SsmConv1d), dc)));
    jobs.push_back(f32_job(name(Tensor::SsmConv1dBias), n_ch, 1, uniform_half(name(Tensor::SsmConv1dBias), n_ch)));
    // dt of head h = exp(uniform over [ln 0.001, ln 0.1]); the bias is softplus^-1(dt).
    jobs.push_back(f32_job(name(Tensor::SsmDtBias), heads, 1, [heads](int64_t, float* row) {
      for (int64_t h = 0; h < heads; ++h) {
        const double u = std::fmod(static_cast<double>(h) * 0.6180339887498949, 1.0);
        const double dt = std::exp(std::log(0.001) + u * (std::log(0.1) - std::log(0.001)));
        row[h] = static_cast<float>(dt + std::log(-std::expm1(-dt)));
      }
    }));
    // A of head h = -(1 + 15 h / heads): Mamba-2 draws A uniformly from [1, 16].
    jobs.push_back(per_head(name(Tensor::SsmA), [heads](int64_t h) {
      return -static_cast<float>(1.0 + 15.0 * static_cast<double>(h) / static_cast<double>(heads));
    }));
    jobs.push_back(per_head(name(Tensor::SsmD), [](int64_t) { return 1.0f; }));
    TensorJob norm = f32_job(name(Tensor::SsmNorm), di / ng, ng,
                             [di, ng](int64_t, float* row) { std::fill(row, row + di / ng, 1.0f); });
    norm.dims = {static_cast<uint64_t>(di / ng), static_cast<uint64_t>(ng)};
    jobs.push_back(std::move(norm));
    jobs.push_back(make_job(o, model, name(Tensor::SsmOut), {static_cast<uint64_t>(di), n_embd}));
  }
}

}  // namespace

TensorJob generated_tensor_job(const QuantScheme& scheme, const QuantModelInfo& model, const std::string& name,
                               std::vector<uint64_t> dims, RowSource source) {
  TensorJob job;
  job.name = name;
  const uint32_t n_dims = static_cast<uint32_t>(dims.size());
  const TypeChoice choice = choose_tensor_type(scheme, model, name, n_dims, dims[0], GgmlType::F32);
  job.type = choice.type;
  job.fell_back = choice.fell_back;
  job.n_bytes_in = 4;
  for (uint64_t d : dims) job.n_bytes_in *= d;
  job.dims = std::move(dims);
  job.source = std::move(source);
  return job;
}

Result<QuantizeReport> synth_model(const SynthOptions& o, ThreadPool& pool, const QuantizeProgressFn& progress) {
  TERN_RETURN_IF_ERROR(validate_synth_options(o));
  auto vocab_file = gguf::GgufFile::open(o.vocab_path);
  if (!vocab_file) return vocab_file.status();
  auto tokens = vocab_file->get_array("tokenizer.ggml.tokens", gguf::ValueType::String);
  if (!tokens) return tokens.status().with_context(o.vocab_path + " (--vocab-from needs a vocabulary)");
  const uint64_t n_vocab = (*tokens)->items.size();
  if (n_vocab == 0) return error(ErrorKind::InvalidFile, o.vocab_path + ": tokenizer.ggml.tokens is empty");

  const int n_head_kv = o.n_head_kv ? o.n_head_kv : o.n_head;
  const ArchShape a = arch_shape(o);
  gguf::GgufStreamWriter w;
  set_metadata(w, o, a, n_head_kv, n_vocab, *vocab_file);

  QuantModelInfo model;
  model.arch = a.file_arch;
  model.n_layer = o.n_layer;
  model.n_head = o.n_head;
  model.n_head_kv = n_head_kv;
  model.has_output = !is_gemma(o);  // Gemma's classifier is token_embd
  model.n_expert = is_moe(o) ? o.n_expert : 0;

  // Shapes as {row length, n_rows}: weights are [n_out][n_in], rows of n_in.
  const uint64_t n_embd = o.n_embd, n_ff = o.n_ff, head_dim = static_cast<uint64_t>(a.head_dim);
  const uint64_t q_dim = head_dim * o.n_head, kv_dim = head_dim * n_head_kv;
  std::vector<TensorJob> jobs;
  auto add = [&](Tensor t, int il, std::vector<uint64_t> dims) {
    jobs.push_back(make_job(o, model, tensor_name(t, il), std::move(dims)));
  };
  add(Tensor::TokenEmbd, -1, {n_embd, n_vocab});
  if (o.arch == "llama3") jobs.push_back(values_job(tensor_name(Tensor::RopeFreqs), llama31_rope_freqs(a.head_dim, a.freq_base)));
  if (a.long_rope_orig_ctx > 0 && o.n_ctx > a.long_rope_orig_ctx) {
    const double ratio = double(o.n_ctx) / a.long_rope_orig_ctx;
    jobs.push_back(values_job(tensor_name(Tensor::RopeFactorsLong), long_rope_factors(a.head_dim, ratio, true)));
    jobs.push_back(values_job(tensor_name(Tensor::RopeFactorsShort), long_rope_factors(a.head_dim, ratio, false)));
  }
  if (o.arch == "mamba" || o.arch == "mamba2") {
    if (o.arch == "mamba2")
      for (int il = 0; il < o.n_layer; ++il) add_mamba2_layer(o, model, il, jobs);
    else
      add_mamba_layers(o, model, jobs);
    add(Tensor::OutputNorm, -1, {n_embd});
    add(Tensor::Output, -1, {n_embd, n_vocab});
    auto report = write_tensor_jobs(w, o.out_path, jobs, pool, progress);
    if (!report) return report.status().with_context(o.out_path);
    return report;
  }
  if (o.arch == "nemotron_h") {  // one sub-layer per layer (synth.h)
    const std::string pattern = layer_pattern(o);
    for (int il = 0; il < o.n_layer; ++il) {
      const char kind = pattern[static_cast<size_t>(il)];
      if (kind == 'M') {
        add_mamba2_layer(o, model, il, jobs);
        continue;
      }
      add(Tensor::AttnNorm, il, {n_embd});
      if (kind == '*') {
        add(Tensor::AttnQ, il, {n_embd, q_dim});
        add(Tensor::AttnK, il, {n_embd, kv_dim});
        add(Tensor::AttnV, il, {n_embd, kv_dim});
        add(Tensor::AttnOutput, il, {q_dim, n_embd});
      } else {
        add(Tensor::FfnUp, il, {n_embd, n_ff});
        add(Tensor::FfnDown, il, {n_ff, n_embd});
      }
    }
    add(Tensor::OutputNorm, -1, {n_embd});
    add(Tensor::Output, -1, {n_embd, n_vocab});
    auto report = write_tensor_jobs(w, o.out_path, jobs, pool, progress);
    if (!report) return report.status().with_context(o.out_path);
    return report;
  }
  for (int il = 0; il < o.n_layer; ++il) {
    add(Tensor::AttnNorm, il, {n_embd});
    if (a.fused) {
      add(Tensor::AttnQkv, il, {n_embd, q_dim + 2 * kv_dim});
    } else {
      add(Tensor::AttnQ, il, {n_embd, q_dim});
      add(Tensor::AttnK, il, {n_embd, kv_dim});
      add(Tensor::AttnV, il, {n_embd, kv_dim});
    }
    if (a.qk_norm) {
      add(Tensor::AttnQNorm, il, {head_dim});
      add(Tensor::AttnKNorm, il, {head_dim});
    }
    if (a.qkv_bias) {
      jobs.push_back(values_job(tensor_name(Tensor::AttnQBias, il), std::vector<float>(q_dim, 0.0f)));
      jobs.push_back(values_job(tensor_name(Tensor::AttnKBias, il), std::vector<float>(kv_dim, 0.0f)));
      jobs.push_back(values_job(tensor_name(Tensor::AttnVBias, il), std::vector<float>(kv_dim, 0.0f)));
    }
    add(Tensor::AttnOutput, il, {q_dim, n_embd});
    add(Tensor::FfnNorm, il, {n_embd});
    if (a.n_ff_exp > 0) {
      const uint64_t n_exp = static_cast<uint64_t>(o.n_expert), ff_exp = static_cast<uint64_t>(a.n_ff_exp);
      add(Tensor::FfnGateInp, il, {n_embd, n_exp});
      add(Tensor::FfnGateExps, il, {n_embd, ff_exp, n_exp});
      add(Tensor::FfnUpExps, il, {n_embd, ff_exp, n_exp});
      add(Tensor::FfnDownExps, il, {ff_exp, n_embd, n_exp});
      if (a.n_ff_shexp > 0) {
        const uint64_t sh = static_cast<uint64_t>(a.n_ff_shexp);
        // A random gate (a vector of ones would be one more norm-like constant).
        const std::string name = tensor_name(Tensor::FfnGateInpShexp, il);
        const uint64_t seed = o.seed, hash = fnv1a64(name);
        const float std_dev = o.weight_std;
        const int64_t n = o.n_embd;
        jobs.push_back(generated_tensor_job(o.scheme, model, name, {n_embd}, [seed, hash, std_dev, n](int64_t i, float* row) {
          fill_normal_row(row_seed(seed, hash, i), std_dev, row, n);
        }));
        add(Tensor::FfnGateShexp, il, {n_embd, sh});
        add(Tensor::FfnUpShexp, il, {n_embd, sh});
        add(Tensor::FfnDownShexp, il, {sh, n_embd});
      }
    } else if (a.fused) {
      add(Tensor::FfnUp, il, {n_embd, 2 * n_ff});
    } else {
      add(Tensor::FfnGate, il, {n_embd, n_ff});
      add(Tensor::FfnUp, il, {n_embd, n_ff});
    }
    if (a.n_ff_exp == 0) add(Tensor::FfnDown, il, {n_ff, n_embd});
    if (is_gemma(o)) {
      add(Tensor::AttnPostNorm, il, {n_embd});
      add(Tensor::FfnPostNorm, il, {n_embd});
    }
  }
  add(Tensor::OutputNorm, -1, {n_embd});
  if (model.has_output) add(Tensor::Output, -1, {n_embd, n_vocab});

  auto report = write_tensor_jobs(w, o.out_path, jobs, pool, progress);
  if (!report) return report.status().with_context(o.out_path);
  return report;
}

}  // namespace tern
