// tests/gguf/gguf_test_util.h — helpers shared by the GGUF tests.
//
// ByteImage assembles GGUF bytes by hand (little-endian, packed), so tests can
// build images the writer would never produce: old versions, bad counts, bad
// types. expect_error() checks a failed Status for its kind and for words that
// must appear in its message. The allocation tracker records the largest single
// operator-new request, so tests can assert that a hostile count was refused
// before anything was reserved for it.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "gguf/gguf_format.h"
#include "gguf/reader.h"
#include "gguf/value.h"

namespace tern::gguf::test {

// Growable little-endian byte image; every put returns *this for chaining.
class ByteImage {
 public:
  template <typename T>
  ByteImage& put(T v) {
    uint8_t b[sizeof(T)];
    std::memcpy(b, &v, sizeof(T));
    bytes_.insert(bytes_.end(), b, b + sizeof(T));
    return *this;
  }
  ByteImage& u8(uint8_t v) { return put(v); }
  ByteImage& u32(uint32_t v) { return put(v); }
  ByteImage& u64(uint64_t v) { return put(v); }
  ByteImage& str(std::string_view s) {
    u64(s.size());
    bytes_.insert(bytes_.end(), s.begin(), s.end());
    return *this;
  }
  ByteImage& raw(const std::vector<uint8_t>& b) {
    bytes_.insert(bytes_.end(), b.begin(), b.end());
    return *this;
  }
  ByteImage& zeros(size_t n) {
    bytes_.insert(bytes_.end(), n, 0);
    return *this;
  }
  ByteImage& pad_to(size_t align) {
    while (bytes_.size() % align) bytes_.push_back(0);
    return *this;
  }

  // File header: magic, version, n_tensors, n_kv.
  ByteImage& header(uint64_t n_tensors, uint64_t n_kv, uint32_t version = 3) {
    return u32(kMagic).u32(version).u64(n_tensors).u64(n_kv);
  }
  // Key and value type; the caller appends the value bytes.
  ByteImage& kv(std::string_view key, ValueType type) { return str(key).u32(static_cast<uint32_t>(type)); }
  ByteImage& kv_string(std::string_view key, std::string_view v) { return kv(key, ValueType::String).str(v); }
  ByteImage& kv_u32(std::string_view key, uint32_t v) { return kv(key, ValueType::U32).u32(v); }
  // Tensor info with an explicit raw type id (so tests can write unknown ids).
  ByteImage& tensor_info(std::string_view name, const std::vector<uint64_t>& dims, uint32_t type,
                         uint64_t offset) {
    str(name).u32(static_cast<uint32_t>(dims.size()));
    for (uint64_t d : dims) u64(d);
    return u32(type).u64(offset);
  }

  size_t size() const { return bytes_.size(); }
  const std::vector<uint8_t>& bytes() const { return bytes_; }
  std::vector<uint8_t> take() { return std::move(bytes_); }

 private:
  std::vector<uint8_t> bytes_;
};

inline uint32_t tid(GgmlType t) { return static_cast<uint32_t>(t); }

// Asserts `s` failed with `kind` and that every word in `words` occurs in its message.
::testing::AssertionResult failed_with(const Status& s, ErrorKind kind,
                                       std::initializer_list<std::string_view> words);

// Parses `bytes` expecting failure; see failed_with.
::testing::AssertionResult parse_fails(std::vector<uint8_t> bytes, ErrorKind kind,
                                       std::initializer_list<std::string_view> words);

// Deep equality of two values: same type, same elements, bit-identical floats.
::testing::AssertionResult values_equal(const Value& a, const Value& b);

// Touches everything a parsed file exposes (metadata rendering, every tensor
// byte range) and checks the data ranges against the file size, so that under
// ASan a parser that accepted bad bounds is caught.
::testing::AssertionResult check_consistent(const GgufFile& f);

// A unique scratch directory for this test process (created on first use).
std::string scratch_dir();

// Largest single operator-new request since the last reset (bytes).
void reset_peak_allocation();
size_t peak_allocation();

}  // namespace tern::gguf::test
