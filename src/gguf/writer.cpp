#include "gguf/writer.h"

#include <cstdio>
#include <cstring>

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

}  // namespace

void GgufWriter::set(const std::string& key, Value value) {
  for (auto& [k, v] : kv_) {
    if (k == key) {
      v = std::move(value);
      return;
    }
  }
  kv_.emplace_back(key, std::move(value));
}

Status GgufWriter::add_tensor(const std::string& name, GgmlType type, std::vector<uint64_t> dims,
                              std::span<const uint8_t> bytes) {
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
  const uint64_t expect = n / size->block_elems * size->block_bytes;
  if (bytes.size() != expect)
    return error(ErrorKind::InvalidArgument, "tensor '" + name + "': " + std::to_string(bytes.size()) +
                                                 " bytes given, " + std::to_string(expect) + " expected");
  for (const auto& t : tensors_)
    if (t.name == name) return error(ErrorKind::InvalidArgument, "tensor '" + name + "' added twice");
  tensors_.push_back({name, type, std::move(dims), std::vector<uint8_t>(bytes.begin(), bytes.end())});
  return Status::ok();
}

uint32_t GgufWriter::alignment() const {
  // An invalid general.alignment (0, not a power of two) must not divide by zero
  // here; the file is laid out with the default and the reader refuses the key.
  for (const auto& [k, v] : kv_) {
    if (k != "general.alignment") continue;
    auto a = v.as_u64();
    if (a && *a != 0 && (*a & (*a - 1)) == 0 && *a <= (uint64_t{1} << 20)) return static_cast<uint32_t>(*a);
  }
  return kDefaultAlignment;
}

std::vector<uint8_t> GgufWriter::to_bytes() const {
  const uint64_t align = alignment();
  ByteSink out;
  out.put<uint32_t>(kMagic);
  out.put<uint32_t>(3);
  out.put<uint64_t>(tensors_.size());
  out.put<uint64_t>(kv_.size());
  for (const auto& [k, v] : kv_) {
    out.put_string(k);
    out.put<uint32_t>(static_cast<uint32_t>(v.type()));
    out.put_value(v);
  }
  uint64_t offset = 0;
  for (const auto& t : tensors_) {
    out.put_string(t.name);
    out.put<uint32_t>(static_cast<uint32_t>(t.dims.size()));
    for (uint64_t d : t.dims) out.put<uint64_t>(d);
    out.put<uint32_t>(static_cast<uint32_t>(t.type));
    out.put<uint64_t>(offset);
    offset += (t.bytes.size() + align - 1) / align * align;
  }
  if (!tensors_.empty()) {
    out.pad_to(align);
    for (const auto& t : tensors_) {
      out.put_bytes(t.bytes);
      out.pad_to(align);
    }
  }
  return std::move(out.bytes());
}

Status GgufWriter::write(const std::string& path) const {
  const std::vector<uint8_t> image = to_bytes();
  const std::string tmp = path + ".tmp";
  FILE* f = std::fopen(tmp.c_str(), "wb");
  if (!f) return error(ErrorKind::IoError, "cannot create '" + tmp + "': " + std::strerror(errno));
  const bool ok = std::fwrite(image.data(), 1, image.size(), f) == image.size();
  const bool closed = std::fclose(f) == 0;
  if (!ok || !closed) {
    std::remove(tmp.c_str());
    return error(ErrorKind::IoError, "cannot write '" + path + "' (disk full?)");
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    return error(ErrorKind::IoError, "cannot rename '" + tmp + "' to '" + path + "': " + std::strerror(errno));
  }
  return Status::ok();
}

}  // namespace tern::gguf
