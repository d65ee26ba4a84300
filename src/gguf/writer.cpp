#include "gguf/writer.h"

#include <algorithm>

namespace tern::gguf {

namespace {

class ByteSink {
 public:
  template <typename T>
  void put(T v) {
    const auto* p = reinterpret_cast<const uint8_t*>(&v);
    out_.insert(out_.end(), p, p + sizeof(T));
  }
  void put_string(const std::string& s) {
    put<uint64_t>(s.size());
    out_.insert(out_.end(), s.begin(), s.end());
  }
  void put_bytes(std::span<const uint8_t> b) { out_.insert(out_.end(), b.begin(), b.end()); }
  void pad_to(uint64_t align) {
    while (out_.size() % align) out_.push_back(0);
  }
  size_t size() const { return out_.size(); }
  std::vector<uint8_t>& bytes() { return out_; }

  void put_value(const Value& v) {
    switch (v.type()) {
      case ValueType::U8: put<uint8_t>(static_cast<uint8_t>(*v.as_u64())); break;
      case ValueType::I8: put<int8_t>(static_cast<int8_t>(*v.as_i64())); break;
      case ValueType::U16: put<uint16_t>(static_cast<uint16_t>(*v.as_u64())); break;
      case ValueType::I16: put<int16_t>(static_cast<int16_t>(*v.as_i64())); break;
      case ValueType::U32: put<uint32_t>(static_cast<uint32_t>(*v.as_u64())); break;
      case ValueType::I32: put<int32_t>(static_cast<int32_t>(*v.as_i64())); break;
      case ValueType::U64: put<uint64_t>(*v.as_u64()); break;
      case ValueType::I64: put<int64_t>(*v.as_i64()); break;
      case ValueType::F32: put<float>(static_cast<float>(*v.as_f64())); break;
      case ValueType::F64: put<double>(*v.as_f64()); break;
      case ValueType::Bool: put<uint8_t>(*v.as_bool() ? 1 : 0); break;
      case ValueType::String: put_string(*v.as_string()); break;
      case ValueType::Array: {
        const Array& a = *v.as_array();
        put<uint32_t>(static_cast<uint32_t>(a.elem_type));
        put<uint64_t>(a.items.size());
        for (const auto& item : a.items) put_value(item);
        break;
      }
    }
  }

 private:
  std::vector<uint8_t> out_;
};

// Validates a tensor declaration; returns the bytes its data takes.
Result<uint64_t> checked_tensor_bytes(const std::string& name, GgmlType type, const std::vector<uint64_t>& dims) {
  auto size = type_size(static_cast<uint32_t>(type));
  if (!size) return error(ErrorKind::InvalidArgument, "tensor '" + name + "': unknown type");
  if (dims.empty() || dims.size() > kMaxDims)
    return error(ErrorKind::InvalidArgument, "tensor '" + name + "': 1 to 4 dimensions required");
  uint64_t n = 1;
  for (uint64_t d : dims) {
    // The reader refuses zero dimensions and element counts that overflow; so must the writer.
    if (d == 0 || n > UINT64_MAX / d)
      return error(ErrorKind::InvalidArgument, "tensor '" + name + "': dimension " + std::to_string(d) +
                                                   " is zero or makes the element count overflow");
    n *= d;
  }
  if (dims[0] % size->block_elems != 0)
    return error(ErrorKind::InvalidArgument, "tensor '" + name + "': row length not a multiple of the block size");
  return n / size->block_elems * size->block_bytes;
}

void set_key(std::vector<std::pair<std::string, Value>>& kv, const std::string& key, Value value) {
  for (auto& [k, v] : kv) {
    if (k == key) {
      v = std::move(value);
      return;
    }
  }
  kv.emplace_back(key, std::move(value));
}

uint32_t alignment_of(const std::vector<std::pair<std::string, Value>>& kv) {
  // An invalid general.alignment (0, not a power of two) must not divide by zero
  // here; the file is laid out with the default and the reader refuses the key.
  for (const auto& [k, v] : kv) {
    if (k != "general.alignment") continue;
    auto a = v.as_u64();
    if (a && *a != 0 && (*a & (*a - 1)) == 0 && *a <= (uint64_t{1} << 20)) return static_cast<uint32_t>(*a);
  }
  return kDefaultAlignment;
}

struct InfoRef {
  const std::string& name;
  GgmlType type;
  const std::vector<uint64_t>& dims;
  uint64_t n_bytes;
};

// Header, metadata, tensor infos and the padding up to the data section.
void put_header(ByteSink& out, const std::vector<std::pair<std::string, Value>>& kv,
                const std::vector<InfoRef>& infos, uint64_t align) {
  out.put<uint32_t>(kMagic);
  out.put<uint32_t>(3);
  out.put<uint64_t>(infos.size());
  out.put<uint64_t>(kv.size());
  for (const auto& [k, v] : kv) {
    out.put_string(k);
    out.put<uint32_t>(static_cast<uint32_t>(v.type()));
    out.put_value(v);
  }
  uint64_t offset = 0;
  for (const auto& t : infos) {
    out.put_string(t.name);
    out.put<uint32_t>(static_cast<uint32_t>(t.dims.size()));
    for (uint64_t d : t.dims) out.put<uint64_t>(d);
    out.put<uint32_t>(static_cast<uint32_t>(t.type));
    out.put<uint64_t>(offset);
    offset += (t.n_bytes + align - 1) / align * align;
  }
  if (!infos.empty()) out.pad_to(align);
}

}  // namespace

void GgufWriter::set(const std::string& key, Value value) { set_key(kv_, key, std::move(value)); }

Status GgufWriter::add_tensor(const std::string& name, GgmlType type, std::vector<uint64_t> dims,
                              std::span<const uint8_t> bytes) {
  auto expect = checked_tensor_bytes(name, type, dims);
  if (!expect) return expect.status();
  if (bytes.size() != *expect)
    return error(ErrorKind::InvalidArgument, "tensor '" + name + "': " + std::to_string(bytes.size()) +
                                                 " bytes given, " + std::to_string(*expect) + " expected");
  for (const auto& t : tensors_)
    if (t.name == name) return error(ErrorKind::InvalidArgument, "tensor '" + name + "' added twice");
  tensors_.push_back({name, type, std::move(dims), std::vector<uint8_t>(bytes.begin(), bytes.end())});
  return Status::ok();
}

uint32_t GgufWriter::alignment() const { return alignment_of(kv_); }

std::vector<uint8_t> GgufWriter::to_bytes() const {
  const uint64_t align = alignment();
  std::vector<InfoRef> infos;
  for (const auto& t : tensors_) infos.push_back({t.name, t.type, t.dims, t.bytes.size()});
  ByteSink out;
  put_header(out, kv_, infos, align);
  for (const auto& t : tensors_) {
    out.put_bytes(t.bytes);
    out.pad_to(align);
  }
  return std::move(out.bytes());
}

Status GgufWriter::write(const std::string& path) const {
  const std::vector<uint8_t> image = to_bytes();
  auto out = AtomicFile::create(path);
  if (!out) return out.status();
  TERN_RETURN_IF_ERROR(out->write(image));
  return out->commit();
}

// ---- GgufStreamWriter -----------------------------------------------------------

GgufStreamWriter::~GgufStreamWriter() = default;  // the AtomicFile removes PATH.tmp unless committed

void GgufStreamWriter::set(const std::string& key, Value value) { set_key(kv_, key, std::move(value)); }

Status GgufStreamWriter::declare_tensor(const std::string& name, GgmlType type, std::vector<uint64_t> dims) {
  if (opened_) return error(ErrorKind::InvalidArgument, "tensor '" + name + "' declared after open()");
  auto n_bytes = checked_tensor_bytes(name, type, dims);
  if (!n_bytes) return n_bytes.status();
  for (const auto& t : tensors_)
    if (t.name == name) return error(ErrorKind::InvalidArgument, "tensor '" + name + "' added twice");
  tensors_.push_back({name, type, std::move(dims), *n_bytes});
  return Status::ok();
}

Status GgufStreamWriter::open(const std::string& path) {
  if (opened_) return error(ErrorKind::InvalidArgument, "stream writer opened twice");
  opened_ = true;
  align_ = alignment_of(kv_);
  auto file = AtomicFile::create(path);
  if (!file) return file.status();
  file_ = std::move(file).value();
  std::vector<InfoRef> infos;
  for (const auto& t : tensors_) infos.push_back({t.name, t.type, t.dims, t.n_bytes});
  ByteSink header;
  put_header(header, kv_, infos, align_);
  return file_.write(header.bytes());
}

Status GgufStreamWriter::write_tensor(std::span<const uint8_t> bytes) {
  if (!file_.is_open()) return error(ErrorKind::InvalidArgument, "stream writer is not open");
  if (n_written_ >= tensors_.size()) return error(ErrorKind::InvalidArgument, "more tensors written than declared");
  const Declared& t = tensors_[n_written_];
  if (bytes.size() != t.n_bytes)
    return error(ErrorKind::InvalidArgument, "tensor '" + t.name + "': " + std::to_string(bytes.size()) +
                                                 " bytes given, " + std::to_string(t.n_bytes) + " expected");
  static constexpr uint8_t kZeros[256] = {};
  const size_t pad = (align_ - t.n_bytes % align_) % align_;  // align_ <= 2^20 but pad may exceed kZeros
  TERN_RETURN_IF_ERROR(file_.write(bytes));
  for (size_t left = pad; left > 0;) {
    const size_t n = std::min(left, sizeof kZeros);
    TERN_RETURN_IF_ERROR(file_.write(std::span<const uint8_t>(kZeros, n)));
    left -= n;
  }
  ++n_written_;
  return Status::ok();
}

Status GgufStreamWriter::commit() {
  if (!file_.is_open()) return error(ErrorKind::InvalidArgument, "stream writer is not open");
  if (n_written_ != tensors_.size()) {
    file_ = AtomicFile();  // drops PATH.tmp
    return error(ErrorKind::InvalidArgument,
                 std::to_string(n_written_) + " of " + std::to_string(tensors_.size()) + " tensors written");
  }
  return file_.commit();
}

}  // namespace tern::gguf
