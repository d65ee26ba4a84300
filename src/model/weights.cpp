// Weight binding: GGUF tensor names → views, with shape and type checks and
// a report of the tensors nothing bound, then the backend's load step.
#include <algorithm>
#include <array>
#include <string>
#include <unordered_set>

#include "core/assert.h"
#include "model/arch.h"
#include "model/gguf_names.h"
#include "model/model.h"
#include "quant/quant.h"

namespace tern {
namespace {

using gguf_names::Tensor;
using gguf_names::tensor_name;

// Tensors a file may carry that change nothing tern computes, so loading
// accepts them unused; an entry needs its reason here and a test. Empty: every
// tensor llama.cpp's converters write for llama, mistral and qwen2 files
// changes the model when present — rope_freqs.weight (Llama 3.1's
// per-dimension RoPE factors: without them long-range RoPE is wrong),
// attention-output and FFN biases, MoE router and expert weights.
constexpr std::array<std::string_view, 0> kHarmlessUnused{};

std::string dims_text(int64_t cols, int64_t rows) {
  return "[" + std::to_string(cols) + ", " + std::to_string(rows) + "]";
}

// Binds tensors by their table names (model/gguf_names.h) with shape and type
// checks, and remembers every name it bound so that the rest can be reported.
class Binder {
 public:
  explicit Binder(const gguf::GgufFile& f) : f_(f) {}

  bool has(Tensor t, int il = -1) const { return f_.find_tensor(tensor_name(t, il)) != nullptr; }

  // A matrix of n_rows rows of n_cols, used in place from the mapping.
  Status matrix(Tensor t, int il, int64_t n_cols, int64_t n_rows, kernels::WeightView& out) {
    const std::string name = tensor_name(t, il);
    const gguf::TensorInfo* info = f_.find_tensor(name);
    if (!info) return error(ErrorKind::InvalidFile, "tensor '" + name + "' is missing");
    if (info->n_dims > 2 || static_cast<int64_t>(info->dims[0]) != n_cols || static_cast<int64_t>(info->dims[1]) != n_rows)
      return error(ErrorKind::InvalidFile, "tensor '" + name + "' has shape " + info->shape_string() + ", expected " +
                                               dims_text(n_cols, n_rows));
    const quant::TypeTraits* tr = quant::traits(info->type);
    if (!tr)
      return error(ErrorKind::Unsupported, "tensor '" + name + "' has type " + std::string(gguf::type_name(info->type)) +
                                               ", which this build cannot compute with yet");
    out = kernels::WeightView{};
    out.traits = tr;
    out.data = info->data;
    out.n_rows = n_rows;
    out.n_cols = n_cols;
    out.row_stride_bytes = quant::row_bytes(*tr, n_cols);
    out.file_backed = f_.file_backed();
    used_.insert(name);
    return Status::ok();
  }

  // A 1-D tensor (norm weight, bias) decoded to f32; absent and optional leaves out.host empty.
  Status vector(Tensor t, int il, int64_t n, bool required, VectorWeight& out) {
    const std::string name = tensor_name(t, il);
    out.host.clear();
    const gguf::TensorInfo* info = f_.find_tensor(name);
    if (!info) {
      if (required) return error(ErrorKind::InvalidFile, "tensor '" + name + "' is missing");
      return Status::ok();
    }
    if (info->n_elements != static_cast<uint64_t>(n) || info->dims[0] != static_cast<uint64_t>(n))
      return error(ErrorKind::InvalidFile, "tensor '" + name + "' has shape " + info->shape_string() + ", expected [" +
                                               std::to_string(n) + "]");
    const quant::TypeTraits* tr = quant::traits(info->type);
    if (!tr)
      return error(ErrorKind::Unsupported, "tensor '" + name + "' has unsupported type " +
                                               std::string(gguf::type_name(info->type)));
    out.host.resize(static_cast<size_t>(n));
    tr->to_float(info->data, out.host.data(), n);
    used_.insert(name);
    return Status::ok();
  }

  // Unsupported, listing the file's tensors that nothing bound: computing
  // without them would silently give other results than the model's.
  Status check_all_used(std::string_view arch) const {
    std::vector<std::string_view> unused;
    for (const gguf::TensorInfo& t : f_.tensors())
      if (!used_.contains(t.name) && std::ranges::find(kHarmlessUnused, t.name) == kHarmlessUnused.end())
        unused.push_back(t.name);
    if (unused.empty()) return Status::ok();
    constexpr size_t kMaxListed = 8;
    std::string list;
    for (size_t i = 0; i < std::min(unused.size(), kMaxListed); ++i) {
      list += (i ? ", " : "") + std::string(unused[i]);
      if (const std::string_view what = gguf_names::describe_tensor(unused[i]); !what.empty())
        list += " (" + std::string(what) + ")";
    }
    if (unused.size() > kMaxListed) list += ", and " + std::to_string(unused.size() - kMaxListed) + " more";
    return error(ErrorKind::Unsupported, "the file has " + std::to_string(unused.size()) + " tensor" +
                                             (unused.size() == 1 ? "" : "s") + " that architecture '" +
                                             std::string(arch) + "' does not use, so tern would compute a " +
                                             "different model than the file describes: " + list);
  }

 private:
  const gguf::GgufFile& f_;
  std::unordered_set<std::string> used_;
};

}  // namespace

Status Model::bind_weights() {
  Binder bind(file_);
  const int64_t n_embd = hp_.n_embd, n_vocab = hp_.n_vocab, q_dim = hp_.q_dim(), n_ff = hp_.n_ff;
  TERN_RETURN_IF_ERROR(bind.matrix(Tensor::TokenEmbd, -1, n_embd, n_vocab, tok_embd_));
  TERN_RETURN_IF_ERROR(bind.vector(Tensor::OutputNorm, -1, n_embd, true, output_norm_));
  if (bind.has(Tensor::Output)) {
    TERN_RETURN_IF_ERROR(bind.matrix(Tensor::Output, -1, n_embd, n_vocab, output_));
  } else {
    output_ = tok_embd_;  // tied embeddings
  }
  layers_.resize(static_cast<size_t>(hp_.n_layer));
  for (int il = 0; il < hp_.n_layer; ++il) {
    LayerWeights& l = layers_[static_cast<size_t>(il)];
    AttentionWeights& a = l.attn;
    const int64_t kv_dim = hp_.kv_dim(il);
    TERN_RETURN_IF_ERROR(bind.vector(Tensor::AttnNorm, il, n_embd, true, l.attn_norm));
    TERN_RETURN_IF_ERROR(bind.matrix(Tensor::AttnQ, il, n_embd, q_dim, a.wq));
    TERN_RETURN_IF_ERROR(bind.matrix(Tensor::AttnK, il, n_embd, kv_dim, a.wk));
    TERN_RETURN_IF_ERROR(bind.matrix(Tensor::AttnV, il, n_embd, kv_dim, a.wv));
    TERN_RETURN_IF_ERROR(bind.matrix(Tensor::AttnOutput, il, q_dim, n_embd, a.wo));
    if (arch_->reads_qkv_bias) {
      TERN_RETURN_IF_ERROR(bind.vector(Tensor::AttnQBias, il, q_dim, false, a.bq));
      TERN_RETURN_IF_ERROR(bind.vector(Tensor::AttnKBias, il, kv_dim, false, a.bk));
      TERN_RETURN_IF_ERROR(bind.vector(Tensor::AttnVBias, il, kv_dim, false, a.bv));
    }
    TERN_RETURN_IF_ERROR(bind.vector(Tensor::FfnNorm, il, n_embd, true, l.ffn_norm));
    TERN_RETURN_IF_ERROR(bind.matrix(Tensor::FfnGate, il, n_embd, n_ff, l.ffn.w_gate));
    TERN_RETURN_IF_ERROR(bind.matrix(Tensor::FfnUp, il, n_embd, n_ff, l.ffn.w_up));
    TERN_RETURN_IF_ERROR(bind.matrix(Tensor::FfnDown, il, n_ff, n_embd, l.ffn.w_down));
    if (arch_->reads_post_norms) {
      TERN_RETURN_IF_ERROR(bind.vector(Tensor::AttnPostNorm, il, n_embd, true, l.attn_post_norm));
      TERN_RETURN_IF_ERROR(bind.vector(Tensor::FfnPostNorm, il, n_embd, true, l.ffn_post_norm));
    }
    if (arch_->reads_qk_norm) {
      TERN_RETURN_IF_ERROR(bind.vector(Tensor::AttnQNorm, il, hp_.head_dim, true, l.attn_q_norm));
      TERN_RETURN_IF_ERROR(bind.vector(Tensor::AttnKNorm, il, hp_.head_dim, true, l.attn_k_norm));
    }
  }
  TERN_RETURN_IF_ERROR(bind.check_all_used(hp_.arch));
  auto bytes = [](const kernels::WeightView& w) { return static_cast<uint64_t>(w.row_stride_bytes) * w.n_rows; };
  weight_bytes_ = bytes(output_);
  for (const auto& l : layers_)
    weight_bytes_ += bytes(l.attn.wq) + bytes(l.attn.wk) + bytes(l.attn.wv) + bytes(l.attn.wo) +
                     bytes(l.ffn.w_gate) + bytes(l.ffn.w_up) + bytes(l.ffn.w_down);
  return Status::ok();
}

// The backend's load step for every matrix the forward pass multiplies by
// (a tied output is also the embedding table, read by row: left as it is),
// and the vectors it reads.
void Model::prepare_weights() {
  backend::Backend& be = *backend_;
  auto up = [&](VectorWeight& v) { v.dev = v.host.empty() ? nullptr : be.upload(v.host); };
  for (LayerWeights& l : layers_) {
    for (kernels::WeightView* w : {&l.attn.wq, &l.attn.wk, &l.attn.wv, &l.attn.wo, &l.ffn.w_gate, &l.ffn.w_up, &l.ffn.w_down})
      be.prepare_matrix(*w);
    for (VectorWeight* v : {&l.attn_norm, &l.ffn_norm, &l.attn.bq, &l.attn.bk, &l.attn.bv, &l.attn_post_norm,
                            &l.ffn_post_norm, &l.attn_q_norm, &l.attn_k_norm})
      up(*v);
  }
  if (output_.data != tok_embd_.data) be.prepare_matrix(output_);
  up(output_norm_);
}

Result<std::unique_ptr<Model>> Model::load(const std::string& path, std::shared_ptr<backend::Backend> backend) {
  auto file = gguf::GgufFile::open(path);
  if (!file) return file.status();
  auto model = from_gguf(std::move(file).value(), std::move(backend));
  if (!model) return model.status().with_context(path);
  return model;
}

Result<std::unique_ptr<Model>> Model::from_gguf(gguf::GgufFile file, std::shared_ptr<backend::Backend> backend) {
  auto model = std::unique_ptr<Model>(new Model());
  model->backend_ = backend ? std::move(backend) : std::shared_ptr<backend::Backend>(
                                                       backend::make_backend(backend::BackendKind::Cpu, 0));
  model->file_ = std::move(file);
  const std::string embd_name = tensor_name(Tensor::TokenEmbd);
  const gguf::TensorInfo* embd = model->file_.find_tensor(embd_name);
  if (!embd) return error(ErrorKind::InvalidFile, "tensor '" + embd_name + "' is missing (is this a model file?)");
  auto hp = read_hparams(model->file_, static_cast<int>(embd->dims[1]));
  if (!hp) return hp.status();
  model->hp_ = std::move(hp).value();
  model->arch_ = find_arch(model->hp_.arch);  // read_hparams refused unknown ones
  TERN_ASSERT(model->arch_);
  TERN_RETURN_IF_ERROR(model->bind_weights());
  model->assign_kv_groups();
  model->prepare_weights();
  return model;
}

}  // namespace tern
