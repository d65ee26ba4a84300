// Weight binding: GGUF tensor names → views, with shape and type checks;
// packing of the matrices whose kernels read packed panels.
#include <sys/mman.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <string>

#include "kernels/matmul_kernels.h"
#include "kernels/pack.h"

#include "model/model.h"
#include "quant/quant.h"

namespace tern {
namespace {

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
  TERN_RETURN_IF_ERROR(assign(tok_embd_, bind_matrix(f, "token_embd.weight", n_embd, n_vocab)));
  TERN_RETURN_IF_ERROR(assign(output_norm_, bind_vector(f, "output_norm.weight", n_embd, true)));
  if (f.find_tensor("output.weight")) {
    TERN_RETURN_IF_ERROR(assign(output_, bind_matrix(f, "output.weight", n_embd, n_vocab)));
  } else {
    output_ = tok_embd_;  // tied embeddings
  }
  layers_.resize(hp_.n_layer);
  for (int il = 0; il < hp_.n_layer; ++il) {
    LayerWeights& l = layers_[il];
    const std::string p = "blk." + std::to_string(il) + ".";
    TERN_RETURN_IF_ERROR(assign(l.attn_norm, bind_vector(f, p + "attn_norm.weight", n_embd, true)));
    TERN_RETURN_IF_ERROR(assign(l.wq, bind_matrix(f, p + "attn_q.weight", n_embd, hp_.q_dim())));
    TERN_RETURN_IF_ERROR(assign(l.wk, bind_matrix(f, p + "attn_k.weight", n_embd, hp_.kv_dim())));
    TERN_RETURN_IF_ERROR(assign(l.wv, bind_matrix(f, p + "attn_v.weight", n_embd, hp_.kv_dim())));
    TERN_RETURN_IF_ERROR(assign(l.wo, bind_matrix(f, p + "attn_output.weight", hp_.q_dim(), n_embd)));
    TERN_RETURN_IF_ERROR(assign(l.bq, bind_vector(f, p + "attn_q.bias", hp_.q_dim(), false)));
    TERN_RETURN_IF_ERROR(assign(l.bk, bind_vector(f, p + "attn_k.bias", hp_.kv_dim(), false)));
    TERN_RETURN_IF_ERROR(assign(l.bv, bind_vector(f, p + "attn_v.bias", hp_.kv_dim(), false)));
    TERN_RETURN_IF_ERROR(assign(l.ffn_norm, bind_vector(f, p + "ffn_norm.weight", n_embd, true)));
    TERN_RETURN_IF_ERROR(assign(l.w_gate, bind_matrix(f, p + "ffn_gate.weight", n_embd, hp_.n_ff)));
    TERN_RETURN_IF_ERROR(assign(l.w_up, bind_matrix(f, p + "ffn_up.weight", n_embd, hp_.n_ff)));
    TERN_RETURN_IF_ERROR(assign(l.w_down, bind_matrix(f, p + "ffn_down.weight", hp_.n_ff, n_embd)));
  }
  auto bytes = [](const kernels::WeightView& w) { return static_cast<uint64_t>(w.row_stride_bytes) * w.n_rows; };
  weight_bytes_ = bytes(output_);
  for (const auto& l : layers_)
    weight_bytes_ += bytes(l.wq) + bytes(l.wk) + bytes(l.wv) + bytes(l.wo) + bytes(l.w_gate) + bytes(l.w_up) + bytes(l.w_down);
  return Status::ok();
}

void Model::FreeDeleter::operator()(void* p) const { std::free(p); }

namespace {

// Drops the file pages wholly inside [p, p + n) from this process's resident
// set; they are read back from the file if anything touches them again.
void release_pages(const void* p, size_t n) {
  const auto page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const auto begin = (reinterpret_cast<uintptr_t>(p) + page - 1) / page * page;
  const auto end = (reinterpret_cast<uintptr_t>(p) + n) / page * page;
  if (end > begin) madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);
}

// Maps the file pages covering [p, p + n) in one call instead of one fault per
// 4 KiB page (they are usually in the page cache already). Best effort: older
// kernels refuse MADV_POPULATE_READ and the pages then fault in as read.
void populate_pages(const void* p, size_t n) {
#ifdef MADV_POPULATE_READ
  const int advice = MADV_POPULATE_READ;
#else
  const int advice = 22;  // MADV_POPULATE_READ, Linux 5.14
#endif
  const auto page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const auto begin = reinterpret_cast<uintptr_t>(p) / page * page;
  const auto end = (reinterpret_cast<uintptr_t>(p) + n + page - 1) / page * page;
  madvise(reinterpret_cast<void*>(begin), end - begin, advice);
}

}  // namespace

// TERN_PACK=0 keeps every matrix in place (read once).
bool Model::packing_default() {
  static const bool on = [] {
    const char* v = std::getenv("TERN_PACK");
    return !(v && std::strcmp(v, "0") == 0);
  }();
  return on;
}

void Model::pack_weights() {
  // Packing is a memory-bound re-ordering of every matrix: spread it over the
  // cores (a 1B-parameter file takes seconds on one thread).
  ThreadPool pool(ThreadPool::default_threads());
  auto pack = [&](kernels::WeightView& w) {
    const kernels::MatmulKernels* k = kernels::matmul_kernels(w.traits->type);
    const size_t bytes = k ? kernels::packed_bytes(*k, w) : 0;
    if (bytes == 0) return;
    // 2 MiB alignment lets the kernel back the buffer with huge pages: far
    // fewer page faults while it is filled, and fewer TLB misses when read.
    // (The size is not rounded up: a partial last huge page stays in 4 KiB pages.)
    constexpr size_t kHuge = size_t{2} << 20;
    void* buf = nullptr;
    if (posix_memalign(&buf, kHuge, bytes) != 0) return;  // out of memory: this matrix stays in place
    madvise(buf, bytes / kHuge * kHuge, MADV_HUGEPAGE);
    populate_pages(w.data, static_cast<size_t>(w.n_rows) * w.row_stride_bytes);
    kernels::pack_weights(*k, w, buf, &pool);
    packed_.emplace_back(static_cast<uint8_t*>(buf));
    w.packed = buf;
    packed_bytes_ += bytes;
    release_pages(w.data, static_cast<size_t>(w.n_rows) * w.row_stride_bytes);
  };
  for (auto& l : layers_)
    for (kernels::WeightView* w : {&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down}) pack(*w);
  if (output_.data != tok_embd_.data) pack(output_);  // a tied output is also the embedding table, read by row
}

Result<std::unique_ptr<Model>> Model::load(const std::string& path) {
  auto file = gguf::GgufFile::open(path);
  if (!file) return file.status();
  auto model = from_gguf(std::move(file).value());
  if (!model) return model.status().with_context(path);
  return model;
}

Result<std::unique_ptr<Model>> Model::from_gguf(gguf::GgufFile file, bool pack) {
  auto model = std::unique_ptr<Model>(new Model());
  model->file_ = std::move(file);
  const gguf::TensorInfo* embd = model->file_.find_tensor("token_embd.weight");
  if (!embd) return error(ErrorKind::InvalidFile, "tensor 'token_embd.weight' is missing (is this a model file?)");
  auto hp = read_hparams(model->file_, static_cast<int>(embd->dims[1]));
  if (!hp) return hp.status();
  model->hp_ = std::move(hp).value();
  TERN_RETURN_IF_ERROR(model->bind_weights());
  if (pack) model->pack_weights();
  return model;
}

}  // namespace tern
