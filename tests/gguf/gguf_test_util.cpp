#include "gguf_test_util.h"

#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <new>

// Replaced global operator new/delete: they forward to malloc/free and record
// the largest single request, so tests can prove a hostile count was refused
// before the parser reserved memory for it. (Under ASan, malloc is still
// ASan's, so an oversized request is also reported there.)
namespace {
std::atomic<size_t> g_peak_alloc{0};

void note_alloc(size_t n) {
  size_t prev = g_peak_alloc.load(std::memory_order_relaxed);
  while (n > prev && !g_peak_alloc.compare_exchange_weak(prev, n, std::memory_order_relaxed)) {
  }
}
}  // namespace

void* operator new(size_t n) {
  note_alloc(n);
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
void* operator new[](size_t n) { return ::operator new(n); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, size_t) noexcept { std::free(p); }
void operator delete[](void* p, size_t) noexcept { std::free(p); }

namespace tern::gguf::test {

void reset_peak_allocation() { g_peak_alloc.store(0); }
size_t peak_allocation() { return g_peak_alloc.load(); }

::testing::AssertionResult failed_with(const Status& s, ErrorKind kind,
                                       std::initializer_list<std::string_view> words) {
  if (s.is_ok()) return ::testing::AssertionFailure() << "expected " << error_kind_name(kind) << ", got ok";
  if (s.kind() != kind)
    return ::testing::AssertionFailure() << "expected " << error_kind_name(kind) << ", got "
                                         << error_kind_name(s.kind()) << ": " << s.message();
  for (std::string_view w : words)
    if (s.message().find(w) == std::string::npos)
      return ::testing::AssertionFailure() << "message lacks \"" << w << "\": " << s.message();
  return ::testing::AssertionSuccess() << s.message();
}

::testing::AssertionResult parse_fails(std::vector<uint8_t> bytes, ErrorKind kind,
                                       std::initializer_list<std::string_view> words) {
  auto f = GgufFile::from_bytes(std::move(bytes));
  if (f.is_ok()) return ::testing::AssertionFailure() << "parse succeeded, expected " << error_kind_name(kind);
  return failed_with(f.status(), kind, words);
}

namespace {
uint64_t bits(double d) {
  uint64_t u;
  std::memcpy(&u, &d, sizeof u);
  return u;
}
}  // namespace

::testing::AssertionResult values_equal(const Value& a, const Value& b) {
  if (a.type() != b.type())
    return ::testing::AssertionFailure() << "type " << value_type_name(a.type()) << " vs "
                                         << value_type_name(b.type());
  switch (a.type()) {
    case ValueType::U8: case ValueType::U16: case ValueType::U32: case ValueType::U64:
      if (a.as_u64() != b.as_u64()) return ::testing::AssertionFailure() << a.to_display() << " vs " << b.to_display();
      break;
    case ValueType::I8: case ValueType::I16: case ValueType::I32: case ValueType::I64:
      if (a.as_i64() != b.as_i64()) return ::testing::AssertionFailure() << a.to_display() << " vs " << b.to_display();
      break;
    case ValueType::F32: case ValueType::F64:
      if (bits(*a.as_f64()) != bits(*b.as_f64()))
        return ::testing::AssertionFailure() << "float bits differ: " << a.to_display() << " vs " << b.to_display();
      break;
    case ValueType::Bool:
      if (a.as_bool() != b.as_bool()) return ::testing::AssertionFailure() << "bool differs";
      break;
    case ValueType::String:
      if (*a.as_string() != *b.as_string())
        return ::testing::AssertionFailure() << "\"" << *a.as_string() << "\" vs \"" << *b.as_string() << "\"";
      break;
    case ValueType::Array: {
      const Array& x = *a.as_array();
      const Array& y = *b.as_array();
      if (x.elem_type != y.elem_type)
        return ::testing::AssertionFailure() << "array of " << value_type_name(x.elem_type) << " vs "
                                             << value_type_name(y.elem_type);
      if (x.items.size() != y.items.size())
        return ::testing::AssertionFailure() << "array length " << x.items.size() << " vs " << y.items.size();
      for (size_t i = 0; i < x.items.size(); ++i)
        if (auto r = values_equal(x.items[i], y.items[i]); !r) return r << " (array item " << i << ")";
      break;
    }
  }
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult check_consistent(const GgufFile& f) {
  for (const auto& [key, value] : f.metadata()) {
    if (f.find(key) != &value) return ::testing::AssertionFailure() << "find('" << key << "') is not its entry";
    if (value.to_display().empty()) return ::testing::AssertionFailure() << "empty rendering of " << key;
  }
  const uint64_t align = f.alignment();
  if (align == 0 || (align & (align - 1)) != 0) return ::testing::AssertionFailure() << "alignment " << align;
  if (!f.tensors().empty() && f.data_offset() % align != 0)
    return ::testing::AssertionFailure() << "data offset " << f.data_offset() << " not aligned";
  volatile uint8_t sink = 0;
  for (const auto& t : f.tensors()) {
    if (f.find_tensor(t.name) != &t) return ::testing::AssertionFailure() << "find_tensor('" << t.name << "')";
    auto ts = type_size(static_cast<uint32_t>(t.type));
    if (!ts) return ::testing::AssertionFailure() << t.name << ": unknown type accepted";
    uint64_t n = 1;
    for (uint32_t d = 0; d < t.n_dims; ++d) n *= t.dims[d];
    if (t.n_dims < 1 || t.n_dims > kMaxDims || n != t.n_elements || t.dims[0] % ts->block_elems != 0 ||
        t.n_bytes != n / ts->block_elems * ts->block_bytes)
      return ::testing::AssertionFailure() << t.name << ": inconsistent shape " << t.shape_string();
    if (t.offset % align != 0) return ::testing::AssertionFailure() << t.name << ": offset not aligned";
    if (t.data == nullptr || f.data_offset() + t.offset + t.n_bytes > f.file_size())
      return ::testing::AssertionFailure() << t.name << ": data outside the file";
    sink = sink + t.data[0] + t.data[t.n_bytes - 1];  // ASan flags these if the bounds were wrong
  }
  (void)sink;
  return ::testing::AssertionSuccess();
}

namespace {
// Removes the scratch directory when the test process exits.
struct ScratchDir {
  std::filesystem::path path;
  ScratchDir() : path(std::filesystem::temp_directory_path() / ("tern_test_gguf_" + std::to_string(::getpid()))) {
    std::filesystem::create_directories(path);
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
};
}  // namespace

std::string scratch_dir() {
  static const ScratchDir dir;
  return dir.path.string();
}

}  // namespace tern::gguf::test
