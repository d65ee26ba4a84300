#include "gguf/reader.h"

#include <cstring>
#include <limits>

namespace tern::gguf {

namespace {

constexpr int kMaxArrayDepth = 8;
constexpr uint64_t kMaxElements = uint64_t{1} << 56;  // far beyond any real tensor, far below overflow

std::string at(uint64_t offset) { return " (at byte " + std::to_string(offset) + ")"; }

}  // namespace

// Bounds-checked cursor over the file image; every read names what it reads
// so a truncation error says which field was cut.
class Parser {
 public:
  explicit Parser(std::span<const uint8_t> bytes) : bytes_(bytes) {}

  Status parse(GgufFile& out);

 private:
  uint64_t remaining() const { return bytes_.size() - pos_; }

  Status need(uint64_t n, const char* what) const {
    if (n > remaining())
      return error(ErrorKind::InvalidFile, std::string("truncated file: ") + what + " needs " +
                                               std::to_string(n) + " bytes but only " +
                                               std::to_string(remaining()) + " remain" + at(pos_));
    return Status::ok();
  }

  template <typename T>
  Status read(T& v, const char* what) {
    TERN_RETURN_IF_ERROR(need(sizeof(T), what));
    std::memcpy(&v, bytes_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return Status::ok();
  }

  Status read_string(std::string& s, const char* what) {
    uint64_t len = 0;
    TERN_RETURN_IF_ERROR(read(len, what));
    if (len > remaining())
      return error(ErrorKind::InvalidFile, std::string(what) + " has length " + std::to_string(len) +
                                               " beyond the end of the file" + at(pos_ - 8));
    s.assign(reinterpret_cast<const char*>(bytes_.data() + pos_), len);
    pos_ += len;
    return Status::ok();
  }

  Status read_value(ValueType type, Value& out, int depth, const std::string& key);
  Status read_array(Value& out, int depth, const std::string& key);
  Status read_tensor_info(TensorInfo& t);

  std::span<const uint8_t> bytes_;
  uint64_t pos_ = 0;
};

Status Parser::read_value(ValueType type, Value& out, int depth, const std::string& key) {
  const std::string what = "value of '" + key + "'";
  switch (type) {
    case ValueType::U8: { uint8_t v{}; TERN_RETURN_IF_ERROR(read(v, what.c_str())); out = Value::of_u8(v); break; }
    case ValueType::I8: { int8_t v{}; TERN_RETURN_IF_ERROR(read(v, what.c_str())); out = Value::of_i8(v); break; }
    case ValueType::U16: { uint16_t v{}; TERN_RETURN_IF_ERROR(read(v, what.c_str())); out = Value::of_u16(v); break; }
    case ValueType::I16: { int16_t v{}; TERN_RETURN_IF_ERROR(read(v, what.c_str())); out = Value::of_i16(v); break; }
    case ValueType::U32: { uint32_t v{}; TERN_RETURN_IF_ERROR(read(v, what.c_str())); out = Value::of_u32(v); break; }
    case ValueType::I32: { int32_t v{}; TERN_RETURN_IF_ERROR(read(v, what.c_str())); out = Value::of_i32(v); break; }
    case ValueType::U64: { uint64_t v{}; TERN_RETURN_IF_ERROR(read(v, what.c_str())); out = Value::of_u64(v); break; }
    case ValueType::I64: { int64_t v{}; TERN_RETURN_IF_ERROR(read(v, what.c_str())); out = Value::of_i64(v); break; }
    case ValueType::F32: { float v{}; TERN_RETURN_IF_ERROR(read(v, what.c_str())); out = Value::of_f32(v); break; }
    case ValueType::F64: { double v{}; TERN_RETURN_IF_ERROR(read(v, what.c_str())); out = Value::of_f64(v); break; }
    case ValueType::Bool: {
      uint8_t v{};
      TERN_RETURN_IF_ERROR(read(v, what.c_str()));
      if (v > 1)
        return error(ErrorKind::InvalidFile, "bool " + what + " is " + std::to_string(v) + ", not 0 or 1" + at(pos_ - 1));
      out = Value::of_bool(v != 0);
      break;
    }
    case ValueType::String: {
      std::string s;
      TERN_RETURN_IF_ERROR(read_string(s, what.c_str()));
      out = Value::of_string(std::move(s));
      break;
    }
    case ValueType::Array: return read_array(out, depth + 1, key);
    default:
      return error(ErrorKind::InvalidFile, "unknown value type " + std::to_string(static_cast<uint32_t>(type)) +
                                               " for key '" + key + "'" + at(pos_ - 4));
  }
  return Status::ok();
}

Status Parser::read_array(Value& out, int depth, const std::string& key) {
  if (depth > kMaxArrayDepth)
    return error(ErrorKind::InvalidFile, "arrays nested deeper than " + std::to_string(kMaxArrayDepth) +
                                             " levels in '" + key + "'" + at(pos_));
  uint32_t elem = 0;
  uint64_t n = 0;
  TERN_RETURN_IF_ERROR(read(elem, "array element type"));
  if (elem >= kValueTypeCount)
    return error(ErrorKind::InvalidFile, "array '" + key + "' has unknown element type " + std::to_string(elem) + at(pos_ - 4));
  TERN_RETURN_IF_ERROR(read(n, "array length"));
  const auto elem_type = static_cast<ValueType>(elem);
  // Smallest encoding of one element: scalars their size, strings 8, arrays 12.
  uint64_t min_bytes = value_type_size(elem_type);
  if (elem_type == ValueType::String) min_bytes = 8;
  if (elem_type == ValueType::Array) min_bytes = 12;
  if (n > remaining() / min_bytes)
    return error(ErrorKind::InvalidFile, "array '" + key + "' claims " + std::to_string(n) + " elements of type " +
                                             value_type_name(elem_type) + ", more than the " +
                                             std::to_string(remaining()) + " remaining bytes can hold" + at(pos_ - 8));
  std::vector<Value> items(n);
  for (uint64_t i = 0; i < n; ++i) TERN_RETURN_IF_ERROR(read_value(elem_type, items[i], depth, key));
  out = Value::of_array(elem_type, std::move(items));
  return Status::ok();
}

Status Parser::read_tensor_info(TensorInfo& t) {
  const uint64_t start = pos_;
  TERN_RETURN_IF_ERROR(read_string(t.name, "tensor name"));
  TERN_RETURN_IF_ERROR(read(t.n_dims, "tensor n_dims"));
  if (t.n_dims < 1 || t.n_dims > kMaxDims)
    return error(ErrorKind::InvalidFile, "tensor '" + t.name + "' has " + std::to_string(t.n_dims) +
                                             " dimensions (1 to 4 allowed)" + at(start));
  uint64_t n = 1;
  for (uint32_t d = 0; d < t.n_dims; ++d) {
    TERN_RETURN_IF_ERROR(read(t.dims[d], "tensor dimension"));
    if (t.dims[d] == 0 || t.dims[d] > kMaxElements || n > kMaxElements / t.dims[d])
      return error(ErrorKind::InvalidFile, "tensor '" + t.name + "' has an invalid dimension " +
                                               std::to_string(t.dims[d]) + at(start));
    n *= t.dims[d];
  }
  t.n_elements = n;
  uint32_t type = 0;
  TERN_RETURN_IF_ERROR(read(type, "tensor type"));
  auto size = type_size(type);
  if (!size)
    return error(ErrorKind::InvalidFile, "tensor '" + t.name + "' has unknown ggml type id " + std::to_string(type) + at(start));
  t.type = static_cast<GgmlType>(type);
  if (t.dims[0] % size->block_elems != 0)
    return error(ErrorKind::InvalidFile, "tensor '" + t.name + "' of type " + std::string(size->name) +
                                             " has row length " + std::to_string(t.dims[0]) +
                                             ", not a multiple of its block size " + std::to_string(size->block_elems));
  t.n_bytes = n / size->block_elems * size->block_bytes;
  TERN_RETURN_IF_ERROR(read(t.offset, "tensor offset"));
  return Status::ok();
}

Status Parser::parse(GgufFile& out) {
  uint32_t magic = 0;
  TERN_RETURN_IF_ERROR(read(magic, "magic"));
  if (magic != kMagic) {
    char buf[96];
    std::snprintf(buf, sizeof buf, "not a GGUF file: bad magic 0x%08x (expected 0x%08x, \"GGUF\")", magic, kMagic);
    return error(ErrorKind::InvalidFile, buf);
  }
  TERN_RETURN_IF_ERROR(read(out.version_, "version"));
  if (out.version_ == 1)
    return error(ErrorKind::Unsupported, "GGUF version 1 is not supported (it used 32-bit counts); re-convert the model to v3");
  if (out.version_ != 2 && out.version_ != 3)
    return error(ErrorKind::Unsupported, "unknown GGUF version " + std::to_string(out.version_) + " (2 and 3 are supported)");
  uint64_t n_tensors = 0, n_kv = 0;
  TERN_RETURN_IF_ERROR(read(n_tensors, "tensor count"));
  TERN_RETURN_IF_ERROR(read(n_kv, "metadata count"));
  // A key-value pair takes at least 13 bytes, a tensor info at least 32.
  if (n_kv > remaining() / 13)
    return error(ErrorKind::InvalidFile, "metadata count " + std::to_string(n_kv) + " is larger than the file can hold");
  if (n_tensors > remaining() / 32)
    return error(ErrorKind::InvalidFile, "tensor count " + std::to_string(n_tensors) + " is larger than the file can hold");

  out.kv_.reserve(n_kv);
  for (uint64_t i = 0; i < n_kv; ++i) {
    std::string key;
    uint32_t type = 0;
    TERN_RETURN_IF_ERROR(read_string(key, "metadata key"));
    TERN_RETURN_IF_ERROR(read(type, "metadata value type"));
    if (type >= kValueTypeCount)
      return error(ErrorKind::InvalidFile, "metadata key '" + key + "' has unknown value type " + std::to_string(type) + at(pos_ - 4));
    Value v;
    TERN_RETURN_IF_ERROR(read_value(static_cast<ValueType>(type), v, 0, key));
    if (out.kv_index_.count(key))
      return error(ErrorKind::InvalidFile, "metadata key '" + key + "' appears twice");
    out.kv_index_[key] = out.kv_.size();
    out.kv_.emplace_back(std::move(key), std::move(v));
  }

  if (const Value* a = out.find("general.alignment")) {
    auto v = a->as_u64();
    if (!v || *v == 0 || (*v & (*v - 1)) != 0 || *v > (1u << 20))
      return error(ErrorKind::InvalidFile, "general.alignment must be a power of two up to 1 MiB, got " + a->to_display());
    out.alignment_ = static_cast<uint32_t>(*v);
  }

  out.tensors_.resize(n_tensors);
  for (uint64_t i = 0; i < n_tensors; ++i) {
    TERN_RETURN_IF_ERROR(read_tensor_info(out.tensors_[i]));
    if (out.tensor_index_.count(out.tensors_[i].name))
      return error(ErrorKind::InvalidFile, "tensor '" + out.tensors_[i].name + "' appears twice");
    out.tensor_index_[out.tensors_[i].name] = i;
  }

  const uint64_t align = out.alignment_;
  out.data_offset_ = (pos_ + align - 1) / align * align;
  if (n_tensors == 0) return Status::ok();  // vocabulary-only files may end right after the metadata
  if (out.data_offset_ > bytes_.size())
    return error(ErrorKind::InvalidFile, "truncated file: the data section would start at byte " +
                                             std::to_string(out.data_offset_) + " but the file has " +
                                             std::to_string(bytes_.size()) + " bytes");
  const uint64_t data_size = bytes_.size() - out.data_offset_;
  for (auto& t : out.tensors_) {
    if (t.offset % align != 0)
      return error(ErrorKind::InvalidFile, "tensor '" + t.name + "' offset " + std::to_string(t.offset) +
                                               " is not a multiple of the alignment " + std::to_string(align));
    if (t.offset > data_size || t.n_bytes > data_size - t.offset)
      return error(ErrorKind::InvalidFile, "tensor '" + t.name + "' data [" + std::to_string(t.offset) + ", " +
                                               std::to_string(t.offset + t.n_bytes) + ") lies outside the " +
                                               std::to_string(data_size) + "-byte data section (truncated file?)");
    t.data = bytes_.data() + out.data_offset_ + t.offset;
  }
  return Status::ok();
}

std::string TensorInfo::shape_string() const {
  std::string s = "[";
  for (uint32_t d = 0; d < n_dims; ++d) s += (d ? ", " : "") + std::to_string(dims[d]);
  return s + "]";
}

Result<GgufFile> GgufFile::open(const std::string& path, const MapOptions& options) {
  auto mapped = MappedFile::open(path, options);
  if (!mapped) return mapped.status();
  GgufFile file;
  file.mapping_ = std::make_shared<MappedFile>(std::move(mapped).value());
  file.bytes_ = file.mapping_->bytes();
  Parser parser(file.bytes_);
  if (auto s = parser.parse(file); !s) return s.with_context(path);
  return file;
}

Result<GgufFile> GgufFile::from_bytes(std::vector<uint8_t> bytes) {
  GgufFile file;
  file.owned_ = std::make_shared<std::vector<uint8_t>>(std::move(bytes));
  file.bytes_ = {file.owned_->data(), file.owned_->size()};
  Parser parser(file.bytes_);
  if (auto s = parser.parse(file); !s) return s;
  return file;
}

Result<GgufFile> GgufFile::from_view(std::vector<std::pair<std::string, Value>> metadata, std::vector<TensorInfo> tensors,
                                     std::shared_ptr<const void> keep_alive, bool file_backed) {
  GgufFile file;
  file.version_ = 3;
  file.keep_alive_ = std::move(keep_alive);
  file.view_file_backed_ = file_backed;
  for (auto& [key, value] : metadata) {
    if (file.kv_index_.count(key)) return error(ErrorKind::InvalidFile, "metadata key '" + key + "' appears twice");
    file.kv_index_[key] = file.kv_.size();
    file.kv_.emplace_back(std::move(key), std::move(value));
  }
  for (TensorInfo& t : tensors) {
    auto size = type_size(static_cast<uint32_t>(t.type));
    uint64_t n = 1;
    for (uint32_t d = 0; d < t.n_dims && d < kMaxDims; ++d) n *= t.dims[d];
    if (!size || t.n_dims < 1 || t.n_dims > kMaxDims || t.data == nullptr || t.dims[0] % size->block_elems != 0 ||
        n != t.n_elements || t.n_bytes != n / size->block_elems * size->block_bytes)
      return error(ErrorKind::InvalidFile, "tensor '" + t.name + "' of the view has an inconsistent type, shape or size");
    if (file.tensor_index_.count(t.name)) return error(ErrorKind::InvalidFile, "tensor '" + t.name + "' appears twice");
    file.tensor_index_[t.name] = file.tensors_.size();
    file.tensors_.push_back(std::move(t));
  }
  return file;
}

const Value* GgufFile::find(const std::string& key) const {
  auto it = kv_index_.find(key);
  return it == kv_index_.end() ? nullptr : &kv_[it->second].second;
}

const TensorInfo* GgufFile::find_tensor(const std::string& name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

namespace {
Status missing(const std::string& key) { return error(ErrorKind::NotFound, "metadata key '" + key + "' is missing"); }
Status wrong(const std::string& key, const char* want, const Value& v) {
  return error(ErrorKind::InvalidFile, "metadata key '" + key + "' should be " + want + " but is " +
                                           value_type_name(v.type()) + " " + v.to_display(4));
}
}  // namespace

Result<uint64_t> GgufFile::get_u64(const std::string& key) const {
  const Value* v = find(key);
  if (!v) return missing(key);
  auto x = v->as_u64();
  if (!x) return wrong(key, "a non-negative integer", *v);
  return *x;
}

Result<int64_t> GgufFile::get_i64(const std::string& key) const {
  const Value* v = find(key);
  if (!v) return missing(key);
  auto x = v->as_i64();
  if (!x) return wrong(key, "an integer", *v);
  return *x;
}

Result<double> GgufFile::get_f64(const std::string& key) const {
  const Value* v = find(key);
  if (!v) return missing(key);
  auto x = v->as_f64();
  if (!x) return wrong(key, "a number", *v);
  return *x;
}

Result<bool> GgufFile::get_bool(const std::string& key) const {
  const Value* v = find(key);
  if (!v) return missing(key);
  auto x = v->as_bool();
  if (!x) return wrong(key, "a bool", *v);
  return *x;
}

Result<std::string> GgufFile::get_string(const std::string& key) const {
  const Value* v = find(key);
  if (!v) return missing(key);
  auto x = v->as_string();
  if (!x) return wrong(key, "a string", *v);
  return *x;
}

Result<const Array*> GgufFile::get_array(const std::string& key, ValueType elem_type) const {
  const Value* v = find(key);
  if (!v) return missing(key);
  const Array* a = v->as_array();
  if (!a || a->elem_type != elem_type)
    return wrong(key, (std::string("an array of ") + value_type_name(elem_type)).c_str(), *v);
  return a;
}

Result<uint64_t> GgufFile::get_u64_or(const std::string& key, uint64_t fallback) const {
  return find(key) ? get_u64(key) : Result<uint64_t>(fallback);
}
Result<double> GgufFile::get_f64_or(const std::string& key, double fallback) const {
  return find(key) ? get_f64(key) : Result<double>(fallback);
}
Result<bool> GgufFile::get_bool_or(const std::string& key, bool fallback) const {
  return find(key) ? get_bool(key) : Result<bool>(fallback);
}

}  // namespace tern::gguf
