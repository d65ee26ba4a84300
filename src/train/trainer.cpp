#include "train/trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <span>

#include "core/atomic_file.h"
#include "gguf/writer.h"
#include "train/ops.h"

namespace tern::train {
namespace {

uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

constexpr const char* kCheckpointArch = "tern-train-checkpoint";

std::span<const uint8_t> bytes_of(const float* p, size_t n) {
  return {reinterpret_cast<const uint8_t*>(p), n * sizeof(float)};
}

}  // namespace

int64_t window_start(uint64_t seed, int64_t step, int64_t k, int64_t n_tokens, int64_t ctx) {
  const uint64_t span = static_cast<uint64_t>(n_tokens - ctx);  // starts 0 .. n - ctx - 1 leave a target for the last token
  const uint64_t h = splitmix64(splitmix64(seed) ^ splitmix64(static_cast<uint64_t>(step) * 1000003ull + static_cast<uint64_t>(k)));
  return static_cast<int64_t>(h % span);
}

Status train_steps(const LlamaLayout& layout, const std::vector<int32_t>& tokens, const TrainOptions& o,
                   TrainState& st, ThreadPool& pool, const std::function<bool(const StepReport&)>& after_step) {
  const int64_t n = static_cast<int64_t>(tokens.size());
  if (o.ctx < 2) return error(ErrorKind::InvalidArgument, "train: sequences need at least 2 tokens");
  if (n < o.ctx + 1)
    return error(ErrorKind::InvalidArgument, "train: the text has " + std::to_string(n) + " tokens, fewer than one sequence of " +
                                                 std::to_string(o.ctx) + " plus its last target");
  if (o.batch < 1 || o.steps < 0) return error(ErrorKind::InvalidArgument, "train: batch must be >= 1 and steps >= 0");
  if (st.params.size() != layout.n_params) return error(ErrorKind::Internal, "train: parameters do not fit the layout");
  st.m.resize(layout.n_params, 0.0f);
  st.v.resize(layout.n_params, 0.0f);
  std::vector<float> grads(layout.n_params), teacher_logits, dlogits;
  LlamaPass<float> pass(layout);
  std::vector<std::span<float>> grad_spans;
  for (const ParamTensor& t : layout.tensors) grad_spans.emplace_back(grads.data() + t.offset, t.size);
  std::vector<size_t> zeros;  // keep_zeros: the matrices' zero weights, re-zeroed after every step
  if (o.keep_zeros)
    for (const ParamTensor& t : layout.tensors)
      if (t.decay)
        for (size_t i = t.offset; i < t.offset + t.size; ++i)
          if (st.params[i] == 0.0f) zeros.push_back(i);
  while (st.step < o.steps) {
    const auto t0 = std::chrono::steady_clock::now();
    std::fill(grads.begin(), grads.end(), 0.0f);
    double loss = 0;
    for (int64_t k = 0; k < o.batch; ++k) {
      const int64_t at = window_start(o.seed, st.step, k, n, o.ctx);
      const int32_t* seq = tokens.data() + at;
      const double ce = pass.forward(st.params.data(), seq, seq + 1, o.ctx, pool);
      if (!o.teacher) {
        loss += ce;
        pass.backward(st.params.data(), grads.data(), pool);
        continue;
      }
      TERN_RETURN_IF_ERROR(o.teacher(seq, o.ctx, teacher_logits).with_context("teacher"));
      if (teacher_logits.size() != pass.logits().size())
        return error(ErrorKind::Internal, "teacher logits do not match the student's");
      // d(loss)/d(logits) = α · dKL + (1 − α) · dCE
      const size_t nl = pass.logits().size();
      dlogits.assign(nl, 0.0f);
      const double kl = kl_distill<float>(pass.logits().data(), teacher_logits.data(), o.ctx, layout.shape.n_vocab,
                                          static_cast<float>(o.temperature), dlogits.data());
      const float a = static_cast<float>(o.kd_alpha), b = static_cast<float>(1.0 - o.kd_alpha);
      for (size_t i = 0; i < nl; ++i) dlogits[i] = a * dlogits[i] + b * pass.ce_grad()[i];
      loss += o.kd_alpha * kl + (1.0 - o.kd_alpha) * ce;
      pass.backward(st.params.data(), grads.data(), pool, dlogits.data());
    }
    loss /= static_cast<double>(o.batch);
    const float inv = 1.0f / static_cast<float>(o.batch);
    for (float& g : grads) g *= inv;
    StepReport r;
    r.grad_norm = clip_grad_norm(grad_spans, o.clip);
    r.lr = o.lr.at(st.step);
    for (const ParamTensor& t : layout.tensors)
      adamw_step(o.adamw, {st.params.data() + t.offset, t.size}, {grads.data() + t.offset, t.size},
                 {st.m.data() + t.offset, t.size}, {st.v.data() + t.offset, t.size}, st.step + 1, r.lr, t.decay);
    for (size_t i : zeros) st.params[i] = 0.0f;
    ++st.step;
    st.losses.push_back(loss);
    r.step = st.step;
    r.loss = loss;
    r.tokens = o.batch * o.ctx;
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (after_step && !after_step(r)) break;
  }
  return Status::ok();
}

Status write_checkpoint(const std::string& path, const LlamaLayout& layout, const TrainOptions& o, const TrainState& s) {
  gguf::GgufWriter w;
  w.set("general.architecture", gguf::Value::of_string(kCheckpointArch));
  w.set("tern.train.step", gguf::Value::of_i64(s.step));
  w.set("tern.train.seed", gguf::Value::of_u64(o.seed));
  w.set("tern.train.ctx", gguf::Value::of_i64(o.ctx));
  w.set("tern.train.batch", gguf::Value::of_i64(o.batch));
  for (const ParamTensor& t : layout.tensors) {
    TERN_RETURN_IF_ERROR(w.add_tensor(t.name, gguf::GgmlType::F32, t.dims, bytes_of(s.params.data() + t.offset, t.size)));
    TERN_RETURN_IF_ERROR(w.add_tensor(t.name + ".adam_m", gguf::GgmlType::F32, t.dims, bytes_of(s.m.data() + t.offset, t.size)));
    TERN_RETURN_IF_ERROR(w.add_tensor(t.name + ".adam_v", gguf::GgmlType::F32, t.dims, bytes_of(s.v.data() + t.offset, t.size)));
  }
  std::vector<double> losses = s.losses;
  if (losses.empty()) losses.push_back(NAN);  // a tensor needs an element; step 0 reads none of it
  TERN_RETURN_IF_ERROR(w.add_tensor("tern.train.losses", gguf::GgmlType::F64, {losses.size()},
                                    {reinterpret_cast<const uint8_t*>(losses.data()), losses.size() * sizeof(double)}));
  return w.write(path);
}

Result<TrainState> read_checkpoint(const std::string& path, const LlamaLayout& layout, const TrainOptions& o) {
  auto f = gguf::GgufFile::open(path);
  if (!f) return f.status();
  auto bad = [&](const std::string& why) { return error(ErrorKind::InvalidArgument, path + ": " + why); };
  auto arch = f->get_string("general.architecture");
  if (!arch || *arch != kCheckpointArch) return bad("not a tern train checkpoint");
  auto step = f->get_i64("tern.train.step");
  auto seed = f->get_u64("tern.train.seed");
  auto ctx = f->get_i64("tern.train.ctx");
  auto batch = f->get_i64("tern.train.batch");
  if (!step || !seed || !ctx || !batch) return bad("checkpoint keys missing");
  if (*seed != o.seed || *ctx != o.ctx || *batch != o.batch)
    return bad("made with --seed " + std::to_string(*seed) + " --ctx " + std::to_string(*ctx) + " --batch " +
               std::to_string(*batch) + "; resume with the same options (they decide which text each step reads)");
  if (*step > o.steps) return bad("already at step " + std::to_string(*step) + ", past --steps " + std::to_string(o.steps));
  TrainState s;
  s.step = *step;
  s.params.resize(layout.n_params);
  s.m.resize(layout.n_params);
  s.v.resize(layout.n_params);
  auto take = [&](const std::string& name, const ParamTensor& t, std::vector<float>& into) -> Status {
    const gguf::TensorInfo* info = f->find_tensor(name);
    if (!info || info->type != gguf::GgmlType::F32 || info->n_dims != t.dims.size() ||
        !std::equal(t.dims.begin(), t.dims.end(), info->dims.begin()))
      return bad("no F32 tensor '" + name + "' of this model's shape: a checkpoint of another model");
    std::memcpy(into.data() + t.offset, info->data, t.size * sizeof(float));
    return Status::ok();
  };
  for (const ParamTensor& t : layout.tensors) {
    TERN_RETURN_IF_ERROR(take(t.name, t, s.params));
    TERN_RETURN_IF_ERROR(take(t.name + ".adam_m", t, s.m));
    TERN_RETURN_IF_ERROR(take(t.name + ".adam_v", t, s.v));
  }
  const gguf::TensorInfo* l = f->find_tensor("tern.train.losses");
  if (!l || l->type != gguf::GgmlType::F64 || l->n_dims != 1) return bad("no losses");
  const double* lp = reinterpret_cast<const double*>(l->data);
  s.losses.assign(lp, lp + std::min<int64_t>(static_cast<int64_t>(l->dims[0]), s.step));
  if (static_cast<int64_t>(s.losses.size()) != s.step) return bad("losses do not cover the steps done");
  return s;
}

Status write_trained_model(const gguf::GgufFile& init, const LlamaLayout& layout, const std::vector<float>& params,
                           const std::string& path, const TrainOptions& o, const std::vector<double>& losses) {
  gguf::GgufWriter w;
  for (const auto& [k, v] : init.metadata()) w.set(k, v);
  if (init.find("general.file_type")) w.set("general.file_type", gguf::Value::of_u32(0));  // all F32 now
  w.set("tern.train.steps", gguf::Value::of_i64(static_cast<int64_t>(losses.size())));
  w.set("tern.train.ctx", gguf::Value::of_i64(o.ctx));
  w.set("tern.train.batch", gguf::Value::of_i64(o.batch));
  if (!losses.empty()) w.set("tern.train.final_loss", gguf::Value::of_f32(static_cast<float>(losses.back())));
  if (o.teacher) {
    w.set("tern.distill.temperature", gguf::Value::of_f32(static_cast<float>(o.temperature)));
    w.set("tern.distill.alpha", gguf::Value::of_f32(static_cast<float>(o.kd_alpha)));
  }
  for (const gguf::TensorInfo& t : init.tensors()) {
    auto it = std::find_if(layout.tensors.begin(), layout.tensors.end(), [&](const ParamTensor& p) { return p.name == t.name; });
    std::vector<uint64_t> dims(t.dims.begin(), t.dims.begin() + t.n_dims);
    if (it == layout.tensors.end()) {
      TERN_RETURN_IF_ERROR(w.add_tensor(t.name, t.type, dims, {t.data, t.n_bytes}));
      continue;
    }
    TERN_RETURN_IF_ERROR(w.add_tensor(t.name, gguf::GgmlType::F32, dims, bytes_of(params.data() + it->offset, it->size)));
  }
  return w.write(path);
}

std::string loss_curve_svg(const std::vector<double>& losses, const std::string& title) {
  const double W = 640, H = 360, L = 56, R = 16, Tm = 32, B = 40;
  double lo = INFINITY, hi = -INFINITY;
  for (double x : losses)
    if (std::isfinite(x)) lo = std::min(lo, x), hi = std::max(hi, x);
  if (!std::isfinite(lo)) lo = 0, hi = 1;
  if (hi - lo < 1e-9) hi = lo + 1;
  const size_t n = std::max<size_t>(losses.size(), 2);
  auto px = [&](size_t i) { return L + (W - L - R) * static_cast<double>(i) / static_cast<double>(n - 1); };
  auto py = [&](double v) { return Tm + (H - Tm - B) * (hi - v) / (hi - lo); };
  std::string s;
  char buf[256];
  std::snprintf(buf, sizeof buf,
                "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\" "
                "font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n",
                W, H, W, H);
  s += buf;
  std::string esc;
  for (char c : title) esc += c == '<' ? "&lt;" : c == '>' ? "&gt;" : c == '&' ? "&amp;" : std::string(1, c);
  std::snprintf(buf, sizeof buf, "<text x=\"%.0f\" y=\"20\">", L);
  s += buf + esc + "</text>\n";
  std::snprintf(buf, sizeof buf,
                "<line x1=\"%.0f\" y1=\"%.0f\" x2=\"%.0f\" y2=\"%.0f\" stroke=\"black\"/>\n"
                "<line x1=\"%.0f\" y1=\"%.0f\" x2=\"%.0f\" y2=\"%.0f\" stroke=\"black\"/>\n",
                L, Tm, L, H - B, L, H - B, W - R, H - B);
  s += buf;
  std::snprintf(buf, sizeof buf,
                "<text x=\"%.0f\" y=\"%.0f\" text-anchor=\"end\">%.3f</text>\n<text x=\"%.0f\" y=\"%.0f\" "
                "text-anchor=\"end\">%.3f</text>\n<text x=\"%.0f\" y=\"%.0f\" text-anchor=\"middle\">step (1-%zu)</text>\n"
                "<text x=\"12\" y=\"%.0f\" transform=\"rotate(-90 12 %.0f)\" text-anchor=\"middle\">loss</text>\n",
                L - 4, Tm + 4, hi, L - 4, H - B, lo, (L + W - R) / 2, H - 12, losses.size(), (Tm + H - B) / 2,
                (Tm + H - B) / 2);
  s += buf;
  s += "<polyline fill=\"none\" stroke=\"#1f77b4\" stroke-width=\"1.5\" points=\"";
  for (size_t i = 0; i < losses.size(); ++i) {
    if (!std::isfinite(losses[i])) continue;
    std::snprintf(buf, sizeof buf, "%s%.1f,%.1f", i ? " " : "", px(i), py(losses[i]));
    s += buf;
  }
  s += "\"/>\n</svg>\n";
  return s;
}

}  // namespace tern::train
