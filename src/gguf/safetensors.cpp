#include "gguf/safetensors.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <set>

#include "core/input_file.h"
#include "core/json.h"

namespace tern::safetensors {
namespace {

// Element sizes of every dtype the format defines (bounds need them even for
// tensors tern cannot compute with).
struct DtypeRow {
  std::string_view name;
  uint32_t bytes;
};
constexpr DtypeRow kDtypes[] = {
    {"F64", 8}, {"F32", 4}, {"F16", 2}, {"BF16", 2}, {"I64", 8}, {"U64", 8}, {"I32", 4}, {"U32", 4},
    {"I16", 2}, {"U16", 2}, {"I8", 1},  {"U8", 1},   {"BOOL", 1}, {"F8_E4M3", 1}, {"F8_E5M2", 1},
};

uint32_t dtype_bytes(std::string_view name) {
  for (const DtypeRow& r : kDtypes)
    if (r.name == name) return r.bytes;
  return 0;
}

// An object's members in name order (as tensors have always been listed; file
// order would make shard order depend on how a writer laid out its JSON).
std::vector<const Json::Member*> sorted_members(const Json& obj) {
  std::vector<const Json::Member*> out;
  for (const Json::Member& m : obj.as_object()) out.push_back(&m);
  std::stable_sort(out.begin(), out.end(), [](const Json::Member* a, const Json::Member* b) { return a->first < b->first; });
  return out;
}

// shape, data_offsets and the dtype of one header entry, checked against a data area of data_size bytes.
Status read_entry(const std::string& name, const Json& entry, uint64_t data_size, Tensor& t) {
  const std::string where = "tensor '" + name + "'";
  if (!entry.is_object()) return error(ErrorKind::InvalidFile, where + ": header entry is not an object");
  const Json* dtype = entry.find("dtype");
  const Json* shape = entry.find("shape");
  const Json* offsets = entry.find("data_offsets");
  if (!dtype || !dtype->is_string() || !shape || !shape->is_array() || !offsets || !offsets->is_array() ||
      offsets->size() != 2)
    return error(ErrorKind::InvalidFile, where + ": header entry needs \"dtype\" (string), \"shape\" (array) and "
                                                 "\"data_offsets\" ([begin, end])");
  t.name = name;
  t.dtype = dtype->as_string();
  t.elem_bytes = dtype_bytes(t.dtype);
  if (t.elem_bytes == 0) return error(ErrorKind::InvalidFile, where + " has unknown dtype '" + t.dtype + "'");
  if (shape->size() > 8) return error(ErrorKind::InvalidFile, where + " has " + std::to_string(shape->size()) + " dimensions");
  // n * elem_bytes must stay below 2^64: every dimension is bounded by what the data area could hold.
  uint64_t n = 1;
  for (const Json& d : shape->as_array()) {
    if (!d.to_uint64()) return error(ErrorKind::InvalidFile, where + " has a shape entry that is not a non-negative integer");
    const uint64_t v = *d.to_uint64();
    if (v != 0 && n > data_size / v) return error(ErrorKind::InvalidFile, where + " shape " + shape->dump() + " is larger than the file");
    t.shape.push_back(v);
    n *= v;
  }
  t.n_elements = n;
  const auto b = offsets->as_array()[0].to_uint64(), e = offsets->as_array()[1].to_uint64();
  if (!b || !e) return error(ErrorKind::InvalidFile, where + " data_offsets are not non-negative integers");
  const uint64_t begin = *b, end = *e;
  if (begin > end || end > data_size)
    return error(ErrorKind::InvalidFile, where + " data [" + std::to_string(begin) + ", " + std::to_string(end) +
                                             ") lies outside the " + std::to_string(data_size) + "-byte data area (truncated file?)");
  if (n > data_size / t.elem_bytes || end - begin != n * t.elem_bytes)
    return error(ErrorKind::InvalidFile, where + " of dtype " + t.dtype + " and shape " + shape->dump() + " needs " +
                                             std::to_string(n) + " x " + std::to_string(t.elem_bytes) + " bytes but its data_offsets span " +
                                             std::to_string(end - begin));
  return Status::ok();
}

}  // namespace

std::optional<gguf::GgmlType> Tensor::ggml_type() const {
  if (dtype == "F32") return gguf::GgmlType::F32;
  if (dtype == "F16") return gguf::GgmlType::F16;
  if (dtype == "BF16") return gguf::GgmlType::BF16;
  if (dtype == "F8_E4M3") return gguf::GgmlType::F8_E4M3;  // codes; their scales are separate tensors
  if (dtype == "F8_E5M2") return gguf::GgmlType::F8_E5M2;
  return std::nullopt;
}

std::string Tensor::shape_string() const {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

Status SafetensorsFile::parse() {
  uint64_t n_header = 0;
  if (bytes_.size() < 8) return error(ErrorKind::InvalidFile, "not a safetensors file: shorter than its 8-byte header length");
  std::memcpy(&n_header, bytes_.data(), 8);  // little-endian hosts only (x86-64, arm64)
  if (n_header > bytes_.size() - 8 || n_header > kMaxHeaderBytes)
    return error(ErrorKind::InvalidFile, "safetensors header length " + std::to_string(n_header) + " exceeds the " +
                                             std::to_string(bytes_.size() - 8) + " bytes after it (or the 100 MiB limit)");
  const char* text = reinterpret_cast<const char*>(bytes_.data() + 8);
  const auto header = Json::parse(std::string_view(text, n_header));
  if (!header) return error(ErrorKind::InvalidFile, "safetensors header is not a JSON object: " + header.status().message());
  if (!header->is_object()) return error(ErrorKind::InvalidFile, "safetensors header is not a JSON object");
  const uint64_t data_begin = 8 + n_header, data_size = bytes_.size() - data_begin;
  std::vector<std::pair<uint64_t, size_t>> starts;  // (begin, tensor index), to find overlaps
  for (const Json::Member* m : sorted_members(*header)) {
    const auto& [name, entry] = *m;
    if (name == "__metadata__") {
      if (!entry.is_object()) return error(ErrorKind::InvalidFile, "safetensors __metadata__ is not an object");
      for (const auto& [k, v] : entry.as_object())
        if (v.is_string()) metadata_[k] = v.as_string();
      continue;
    }
    if (index_.count(name)) return error(ErrorKind::InvalidFile, "tensor '" + name + "' appears twice in the header");
    Tensor t;
    TERN_RETURN_IF_ERROR(read_entry(name, entry, data_size, t));
    const uint64_t begin = *entry["data_offsets"].as_array()[0].to_uint64();
    if ((data_begin + begin) % t.elem_bytes != 0)
      return error(ErrorKind::InvalidFile, "tensor '" + name + "' starts at byte " + std::to_string(data_begin + begin) +
                                               ", not a multiple of its " + std::to_string(t.elem_bytes) + "-byte elements");
    t.bytes = bytes_.subspan(data_begin + begin, t.n_elements * t.elem_bytes);
    starts.emplace_back(begin, tensors_.size());
    index_[name] = tensors_.size();
    tensors_.push_back(std::move(t));
  }
  std::sort(starts.begin(), starts.end());
  for (size_t i = 1; i < starts.size(); ++i) {
    const Tensor& prev = tensors_[starts[i - 1].second];
    if (starts[i].first < starts[i - 1].first + prev.bytes.size() && !prev.bytes.empty())
      return error(ErrorKind::InvalidFile, "tensors '" + prev.name + "' and '" + tensors_[starts[i].second].name +
                                               "' overlap in the data area");
  }
  return Status::ok();
}

Result<SafetensorsFile> SafetensorsFile::open(const std::string& path) {
  auto mapped = MappedFile::open(path);
  if (!mapped) return mapped.status();
  SafetensorsFile file;
  file.mapping_ = std::make_shared<MappedFile>(std::move(mapped).value());
  file.bytes_ = file.mapping_->bytes();
  if (auto s = file.parse(); !s) return s.with_context(path);
  return file;
}

Result<SafetensorsFile> SafetensorsFile::from_bytes(std::vector<uint8_t> bytes) {
  SafetensorsFile file;
  file.owned_ = std::make_shared<std::vector<uint8_t>>(std::move(bytes));
  file.bytes_ = {file.owned_->data(), file.owned_->size()};
  TERN_RETURN_IF_ERROR(file.parse());
  return file;
}

const Tensor* SafetensorsFile::find(const std::string& name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

Result<SafetensorsCheckpoint> SafetensorsCheckpoint::open(const std::string& dir) {
  namespace fs = std::filesystem;
  SafetensorsCheckpoint ck;
  const std::string index_path = (fs::path(dir) / "model.safetensors.index.json").string();
  std::error_code ec;
  if (!fs::exists(index_path, ec)) {
    const std::string single = (fs::path(dir) / "model.safetensors").string();
    if (!fs::exists(single, ec))
      return error(ErrorKind::NotFound, "'" + dir + "' has neither model.safetensors nor model.safetensors.index.json");
    auto file = SafetensorsFile::open(single);
    if (!file) return file.status();
    ck.shards_.push_back(std::make_shared<SafetensorsFile>(std::move(file).value()));
    for (const Tensor& t : ck.shards_[0]->tensors()) ck.tensors_[t.name] = &t;
    return ck;
  }
  auto text = read_file(index_path, uint64_t{64} << 20);
  if (!text) return text.status();
  const auto index = Json::parse(*text);
  if (!index) return error(ErrorKind::InvalidFile, index_path + ": " + index.status().message());
  const Json* map = index->find("weight_map");
  if (!map || !map->is_object())
    return error(ErrorKind::InvalidFile, index_path + ": not a JSON object with a \"weight_map\" object");
  std::map<std::string, size_t> shard_of_file;
  const auto members = sorted_members(*map);
  for (size_t i = 1; i < members.size(); ++i)
    if (members[i]->first == members[i - 1]->first)
      return error(ErrorKind::InvalidFile, index_path + ": weight_map names '" + members[i]->first + "' twice");
  for (const Json::Member* m : members) {
    const auto& [name, shard] = *m;
    if (!shard.is_string()) return error(ErrorKind::InvalidFile, index_path + ": weight_map[\"" + name + "\"] is not a file name");
    const std::string& file_name = shard.as_string();
    // Shards live beside the index: a path could reach any file on the machine.
    if (file_name.empty() || file_name.find('/') != std::string::npos || file_name == "." || file_name == "..")
      return error(ErrorKind::InvalidFile, index_path + ": shard name '" + file_name + "' is not a plain file name");
    auto it = shard_of_file.find(file_name);
    if (it == shard_of_file.end()) {
      auto file = SafetensorsFile::open((fs::path(dir) / file_name).string());
      if (!file) return file.status().with_context(index_path + " names shard '" + file_name + "'");
      it = shard_of_file.emplace(file_name, ck.shards_.size()).first;
      ck.shards_.push_back(std::make_shared<SafetensorsFile>(std::move(file).value()));
    }
    const Tensor* t = ck.shards_[it->second]->find(name);
    if (!t)
      return error(ErrorKind::InvalidFile, index_path + " places tensor '" + name + "' in '" + file_name +
                                               "', which does not contain it");
    ck.tensors_[name] = t;
  }
  if (ck.tensors_.empty()) return error(ErrorKind::InvalidFile, index_path + ": weight_map is empty");
  return ck;
}

const Tensor* SafetensorsCheckpoint::find(const std::string& name) const {
  auto it = tensors_.find(name);
  return it == tensors_.end() ? nullptr : it->second;
}

std::vector<std::string> SafetensorsCheckpoint::names() const {
  std::vector<std::string> out;
  out.reserve(tensors_.size());
  for (const auto& [name, t] : tensors_) out.push_back(name);
  return out;
}

}  // namespace tern::safetensors
