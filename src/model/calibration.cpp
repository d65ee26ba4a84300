#include "model/calibration.h"

#include "core/hash.h"

#include <algorithm>
#include <cstring>

#include "gguf/reader.h"
#include "gguf/writer.h"

namespace tern {
namespace {

constexpr const char* kKeyVersion = "tern.calibration.version";
constexpr const char* kKeyTextPath = "tern.calibration.text.path";
constexpr const char* kKeyTextBytes = "tern.calibration.text.bytes";
constexpr const char* kKeyTextHash = "tern.calibration.text.hash";
constexpr const char* kKeyCtx = "tern.calibration.n_ctx";
constexpr const char* kKeyChunks = "tern.calibration.n_chunks";
constexpr const char* kKeyTokens = "tern.calibration.n_tokens";
constexpr const char* kFingerprintTensor = "tern.calibration.fingerprints";
// Per layer (F32 [n_layer] each): mean cos(x_in, x_out) and the tokens it averages.
constexpr const char* kBlockCosTensor = "tern.calibration.block_cos";
constexpr const char* kBlockRowsTensor = "tern.calibration.block_rows";
// Per matrix: "<key>.in_sum_x2", ".in_sum_abs", ".in_max_abs" (F32 [n_cols]) and ".in_count" (F32 [1]).
constexpr std::string_view kSuffixes[] = {".in_sum_x2", ".in_sum_abs", ".in_max_abs", ".in_count"};

template <typename T>
std::span<const uint8_t> as_bytes(const std::vector<T>& v) {
  return {reinterpret_cast<const uint8_t*>(v.data()), v.size() * sizeof(T)};
}

std::vector<float> to_f32(const std::vector<double>& v) { return {v.begin(), v.end()}; }

}  // namespace

std::vector<float> InputStats::importance() const {
  std::vector<float> w(static_cast<size_t>(n_cols), 0.0f);
  if (count > 0)
    for (int64_t i = 0; i < n_cols; ++i) w[i] = static_cast<float>(sum_x2[i] / static_cast<double>(count));
  return w;
}

const InputStats* Calibration::find(const std::string& key) const {
  auto it = inputs.find(key);
  return it == inputs.end() ? nullptr : it->second.get();
}

std::vector<uint64_t> text_fingerprints(std::string_view text) {
  std::vector<uint64_t> out;
  for (size_t i = 0; i + kFingerprintWindow <= text.size(); i += kFingerprintStride)
    out.push_back(fnv1a64(text.substr(i, kFingerprintWindow)));
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

uint64_t overlap_bytes(const Calibration& c, std::string_view eval_text) {
  if (c.fingerprints.empty() || eval_text.size() < static_cast<size_t>(kFingerprintWindow)) return 0;
  // Every offset of the evaluation text is hashed (about 0.1 s per MB): a
  // window shared with the calibration text is found wherever it starts.
  uint64_t matches = 0;
  for (size_t i = 0; i + kFingerprintWindow <= eval_text.size(); ++i) {
    const uint64_t h = fnv1a64(eval_text.substr(i, kFingerprintWindow));
    if (std::binary_search(c.fingerprints.begin(), c.fingerprints.end(), h)) ++matches;
  }
  return matches * kFingerprintStride;
}

Status check_calibration_text(const CalibrationText& want, std::string_view text, const std::string& path) {
  if (want.bytes == text.size() && want.hash == fnv1a64(text)) return Status::ok();
  return error(ErrorKind::InvalidArgument, "calibration text '" + path +
                                               "' is not the text the calibration file was made from (" +
                                               std::to_string(want.bytes) + " bytes, other content)");
}

Status check_disjoint(const Calibration& c, std::string_view eval_text, const std::string& eval_path) {
  const uint64_t shared = overlap_bytes(c, eval_text);
  if (shared > eval_text.size() / 100 || shared > 64 * 1024)
    return error(ErrorKind::InvalidArgument,
                 "about " + std::to_string(shared) + " bytes of the evaluation text '" + eval_path +
                     "' are also in the calibration text '" + c.text.path +
                     "': evaluate on text the calibration did not see (split the text into two files)");
  return Status::ok();
}

Status write_calibration(const Calibration& c, const std::string& path) {
  gguf::GgufWriter w;
  w.set("general.architecture", gguf::Value::of_string("tern-calibration"));
  w.set(kKeyVersion, gguf::Value::of_u32(1));
  w.set(kKeyTextPath, gguf::Value::of_string(c.text.path));
  w.set(kKeyTextBytes, gguf::Value::of_u64(c.text.bytes));
  w.set(kKeyTextHash, gguf::Value::of_u64(c.text.hash));
  w.set(kKeyCtx, gguf::Value::of_i32(c.text.n_ctx));
  w.set(kKeyChunks, gguf::Value::of_i32(c.text.n_chunks));
  w.set(kKeyTokens, gguf::Value::of_i64(c.text.n_tokens));
  for (const auto& [key, s] : c.inputs) {
    const std::vector<uint64_t> dims{static_cast<uint64_t>(s->n_cols)};
    TERN_RETURN_IF_ERROR(w.add_tensor(key + ".in_sum_x2", gguf::GgmlType::F32, dims, as_bytes(to_f32(s->sum_x2))));
    TERN_RETURN_IF_ERROR(w.add_tensor(key + ".in_sum_abs", gguf::GgmlType::F32, dims, as_bytes(to_f32(s->sum_abs))));
    TERN_RETURN_IF_ERROR(w.add_tensor(key + ".in_max_abs", gguf::GgmlType::F32, dims, as_bytes(s->max_abs)));
    const std::vector<float> count{static_cast<float>(s->count)};
    TERN_RETURN_IF_ERROR(w.add_tensor(key + ".in_count", gguf::GgmlType::F32, {1}, as_bytes(count)));
  }
  std::vector<uint64_t> fp = c.fingerprints;
  if (fp.empty()) fp.push_back(0);  // a tensor needs at least one element; 0 matches no real window in practice
  TERN_RETURN_IF_ERROR(w.add_tensor(kFingerprintTensor, gguf::GgmlType::I64, {fp.size()}, as_bytes(fp)));
  if (!c.block_cos.empty()) {
    if (c.block_rows.size() != c.block_cos.size())
      return error(ErrorKind::Internal, "calibration: block_cos and block_rows differ in length");
    const std::vector<uint64_t> dims{c.block_cos.size()};
    const std::vector<float> rows(c.block_rows.begin(), c.block_rows.end());
    TERN_RETURN_IF_ERROR(w.add_tensor(kBlockCosTensor, gguf::GgmlType::F32, dims, as_bytes(to_f32(c.block_cos))));
    TERN_RETURN_IF_ERROR(w.add_tensor(kBlockRowsTensor, gguf::GgmlType::F32, dims, as_bytes(rows)));
  }
  return w.write(path);
}

Result<Calibration> read_calibration(const std::string& path) {
  auto file = gguf::GgufFile::open(path);
  if (!file) return file.status();
  auto bad = [&](const std::string& what) {
    return error(ErrorKind::InvalidFile, path + ": not a tern calibration file (" + what + ")");
  };
  auto version = file->get_u64_or(kKeyVersion, 0);
  if (!version || *version != 1) return bad("no " + std::string(kKeyVersion) + " = 1; write it with tern calibrate");
  Calibration c;
  auto text_path = file->get_string(kKeyTextPath);
  auto bytes = file->get_u64(kKeyTextBytes);
  auto hash = file->get_u64(kKeyTextHash);
  auto ctx = file->get_i64(kKeyCtx);
  auto chunks = file->get_i64(kKeyChunks);
  auto tokens = file->get_i64(kKeyTokens);
  if (!text_path || !bytes || !hash || !ctx || !chunks || !tokens) return bad("text keys missing");
  c.text = {*text_path, *bytes, *hash, static_cast<int>(*ctx), static_cast<int>(*chunks), *tokens};

  auto f32s = [&](const gguf::TensorInfo& t) -> Result<std::vector<float>> {
    if (t.type != gguf::GgmlType::F32 || t.n_dims != 1) return bad("tensor '" + t.name + "' is not 1-D F32");
    std::vector<float> v(t.dims[0]);
    std::memcpy(v.data(), t.data, v.size() * sizeof(float));
    return v;
  };
  for (const gguf::TensorInfo& t : file->tensors()) {
    if (t.name == kFingerprintTensor) {
      if (t.type != gguf::GgmlType::I64 || t.n_dims != 1) return bad("fingerprints are not 1-D I64");
      c.fingerprints.resize(t.dims[0]);
      std::memcpy(c.fingerprints.data(), t.data, c.fingerprints.size() * sizeof(uint64_t));
      std::sort(c.fingerprints.begin(), c.fingerprints.end());
      continue;
    }
    if (t.name == kBlockCosTensor || t.name == kBlockRowsTensor) {
      auto v = f32s(t);
      if (!v) return v.status();
      if (t.name == kBlockCosTensor) {
        c.block_cos.assign(v->begin(), v->end());
      } else {
        for (float r : *v) {
          if (!(r >= 0)) return bad("bad token count in " + t.name);
          c.block_rows.push_back(static_cast<int64_t>(r));
        }
      }
      continue;
    }
    std::string_view name = t.name;
    size_t which = 0;
    while (which < 4 && !(name.size() > kSuffixes[which].size() && name.ends_with(kSuffixes[which]))) ++which;
    if (which == 4) return bad("unexpected tensor '" + t.name + "'");
    const std::string key(name.substr(0, name.size() - kSuffixes[which].size()));
    auto v = f32s(t);
    if (!v) return v.status();
    auto& s = c.inputs[key];
    if (!s) s = std::make_shared<InputStats>();
    if (which == 3) {
      if (v->size() != 1 || !(v->at(0) >= 0)) return bad("bad count of '" + key + "'");
      s->count = static_cast<int64_t>(v->at(0));
      continue;
    }
    if (s->n_cols != 0 && s->n_cols != static_cast<int64_t>(v->size())) return bad("inconsistent sizes for '" + key + "'");
    s->n_cols = static_cast<int64_t>(v->size());
    if (which == 0) s->sum_x2.assign(v->begin(), v->end());
    if (which == 1) s->sum_abs.assign(v->begin(), v->end());
    if (which == 2) s->max_abs = std::move(*v);
  }
  for (const auto& [key, s] : c.inputs)
    if (s->sum_x2.size() != static_cast<size_t>(s->n_cols) || s->sum_abs.size() != static_cast<size_t>(s->n_cols) ||
        s->max_abs.size() != static_cast<size_t>(s->n_cols))
      return bad("statistics of '" + key + "' incomplete");
  if (c.block_cos.size() != c.block_rows.size()) return bad("block_cos and block_rows differ in length");
  return c;
}

}  // namespace tern
