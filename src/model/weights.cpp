// Weight binding: GGUF tensor names → views, with shape and type checks,
// then the backend's load step.
#include <string>

#include "model/gguf_names.h"
#include "model/model.h"
#include "quant/quant.h"

namespace tern {
namespace {

using gguf_names::Tensor;
using gguf_names::tensor_name;

std::string dims_text(int64_t cols, int64_t rows) {
  return "[" + std::to_string(cols) + ", " + std::to_string(rows) + "]";
}

Result<kernels::WeightView> bind_matrix(const gguf::GgufFile& f, const std::string& name, int64_t n_cols,
                                        int64_t n_rows) {
  const gguf::TensorInfo* t = f.find_tensor(name);
  if (!t) return error(ErrorKind::InvalidFile, "tensor '" + name + "' is missing");
  if (t->n_dims > 2 || static_cast<int64_t>(t->dims[0]) != n_cols || static_cast<int64_t>(t->dims[1]) != n_rows)
    return error(ErrorKind::InvalidFile, "tensor '" + name + "' has shape " + t->shape_string() + ", expected " +
                                             dims_text(n_cols, n_rows));
  const quant::TypeTraits* tr = quant::traits(t->type);
  if (!tr)
    return error(ErrorKind::Unsupported, "tensor '" + name + "' has type " + std::string(gguf::type_name(t->type)) +
                                             ", which this build cannot compute with yet");
  kernels::WeightView w;
  w.traits = tr;
  w.data = t->data;
  w.n_rows = n_rows;
  w.n_cols = n_cols;
  w.row_stride_bytes = quant::row_bytes(*tr, n_cols);
  return w;
}

// Decodes a 1-D tensor (norm weight, bias) to f32; absent and optional gives an empty vector.
Result<std::vector<float>> bind_vector(const gguf::GgufFile& f, const std::string& name, int64_t n, bool required) {
  const gguf::TensorInfo* t = f.find_tensor(name);
  if (!t) {
    if (required) return error(ErrorKind::InvalidFile, "tensor '" + name + "' is missing");
    return std::vector<float>{};
  }
  if (t->n_elements != static_cast<uint64_t>(n) || t->dims[0] != static_cast<uint64_t>(n))
    return error(ErrorKind::InvalidFile, "tensor '" + name + "' has shape " + t->shape_string() + ", expected [" +
                                             std::to_string(n) + "]");
  const quant::TypeTraits* tr = quant::traits(t->type);
  if (!tr) return error(ErrorKind::Unsupported, "tensor '" + name + "' has unsupported type " + std::string(gguf::type_name(t->type)));
  std::vector<float> out(n);
  tr->to_float(t->data, out.data(), n);
  return out;
}

template <typename T>
Status assign(T& dst, Result<T> r) {
  if (!r) return r.status();
  dst = std::move(r).value();
  return Status::ok();
}

}  // namespace

Status Model::bind_weights() {
  const auto& f = file_;
  const int64_t n_embd = hp_.n_embd, n_vocab = hp_.n_vocab;
  TERN_RETURN_IF_ERROR(assign(tok_embd_, bind_matrix(f, tensor_name(Tensor::TokenEmbd), n_embd, n_vocab)));
  TERN_RETURN_IF_ERROR(assign(output_norm_, bind_vector(f, tensor_name(Tensor::OutputNorm), n_embd, true)));
  if (f.find_tensor(tensor_name(Tensor::Output))) {
    TERN_RETURN_IF_ERROR(assign(output_, bind_matrix(f, tensor_name(Tensor::Output), n_embd, n_vocab)));
  } else {
    output_ = tok_embd_;  // tied embeddings
  }
  layers_.resize(hp_.n_layer);
  for (int il = 0; il < hp_.n_layer; ++il) {
    LayerWeights& l = layers_[il];
    TERN_RETURN_IF_ERROR(assign(l.attn_norm, bind_vector(f, tensor_name(Tensor::AttnNorm, il), n_embd, true)));
    TERN_RETURN_IF_ERROR(assign(l.wq, bind_matrix(f, tensor_name(Tensor::AttnQ, il), n_embd, hp_.q_dim())));
    TERN_RETURN_IF_ERROR(assign(l.wk, bind_matrix(f, tensor_name(Tensor::AttnK, il), n_embd, hp_.kv_dim())));
    TERN_RETURN_IF_ERROR(assign(l.wv, bind_matrix(f, tensor_name(Tensor::AttnV, il), n_embd, hp_.kv_dim())));
    TERN_RETURN_IF_ERROR(assign(l.wo, bind_matrix(f, tensor_name(Tensor::AttnOutput, il), hp_.q_dim(), n_embd)));
    TERN_RETURN_IF_ERROR(assign(l.bq, bind_vector(f, tensor_name(Tensor::AttnQBias, il), hp_.q_dim(), false)));
    TERN_RETURN_IF_ERROR(assign(l.bk, bind_vector(f, tensor_name(Tensor::AttnKBias, il), hp_.kv_dim(), false)));
    TERN_RETURN_IF_ERROR(assign(l.bv, bind_vector(f, tensor_name(Tensor::AttnVBias, il), hp_.kv_dim(), false)));
    TERN_RETURN_IF_ERROR(assign(l.ffn_norm, bind_vector(f, tensor_name(Tensor::FfnNorm, il), n_embd, true)));
    TERN_RETURN_IF_ERROR(assign(l.w_gate, bind_matrix(f, tensor_name(Tensor::FfnGate, il), n_embd, hp_.n_ff)));
    TERN_RETURN_IF_ERROR(assign(l.w_up, bind_matrix(f, tensor_name(Tensor::FfnUp, il), n_embd, hp_.n_ff)));
    TERN_RETURN_IF_ERROR(assign(l.w_down, bind_matrix(f, tensor_name(Tensor::FfnDown, il), hp_.n_ff, n_embd)));
  }
  auto bytes = [](const kernels::WeightView& w) { return static_cast<uint64_t>(w.row_stride_bytes) * w.n_rows; };
  weight_bytes_ = bytes(output_);
  for (const auto& l : layers_)
    weight_bytes_ += bytes(l.wq) + bytes(l.wk) + bytes(l.wv) + bytes(l.wo) + bytes(l.w_gate) + bytes(l.w_up) + bytes(l.w_down);
  return Status::ok();
}

// The backend's load step for every matrix the forward pass multiplies by
// (a tied output is also the embedding table, read by row: left as it is),
// and the vectors it reads.
void Model::prepare_weights() {
  backend::Backend& be = *backend_;
  auto up = [&](const std::vector<float>& v) { return v.empty() ? nullptr : be.upload(v); };
  for (int il = 0; il < hp_.n_layer; ++il) {
    LayerWeights& l = layers_[static_cast<size_t>(il)];
    for (kernels::WeightView* w : {&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down}) be.prepare_matrix(*w);
    l.attn_norm_b = up(l.attn_norm);
    l.ffn_norm_b = up(l.ffn_norm);
    l.bq_b = up(l.bq);
    l.bk_b = up(l.bk);
    l.bv_b = up(l.bv);
    l.kv_group = 0;  // one group: every layer keeps the same kind of KV
    l.kv_index = il;
  }
  if (output_.data != tok_embd_.data) be.prepare_matrix(output_);
  output_norm_b_ = up(output_norm_);
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
  TERN_RETURN_IF_ERROR(model->bind_weights());
  model->prepare_weights();
  return model;
}

}  // namespace tern
