// GgufStreamWriter: the same bytes as GgufWriter for the same content (default
// and custom alignment, odd tensor sizes), and failures that leave no file.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>

#include "gguf/reader.h"
#include "gguf/writer.h"
#include "gguf_test_util.h"

namespace tern::gguf {
namespace {

using test::failed_with;
using test::scratch_dir;

struct SampleTensor {
  std::string name;
  GgmlType type;
  std::vector<uint64_t> dims;
  std::vector<uint8_t> bytes;
};

std::vector<SampleTensor> sample_tensors() {
  auto fill = [](size_t n, uint8_t seed) {
    std::vector<uint8_t> b(n);
    for (size_t i = 0; i < n; ++i) b[i] = static_cast<uint8_t>(seed + i * 7);
    return b;
  };
  return {
      {"a.weight", GgmlType::F32, {3}, fill(12, 1)},              // 12 bytes: padded
      {"b.weight", GgmlType::Q8_0, {64, 3}, fill(6 * 34, 2)},     // 204 bytes
      {"c.weight", GgmlType::F16, {5, 2, 3}, fill(60, 3)},
      {"d.weight", GgmlType::Q4_K, {256, 2}, fill(2 * 144, 4)},
  };
}

std::vector<uint8_t> read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void check_same_as_buffered(uint32_t alignment) {
  GgufWriter buffered;
  GgufStreamWriter stream;
  auto set_both = [&](const std::string& k, const Value& v) {
    buffered.set(k, v);
    stream.set(k, v);
  };
  set_both("general.architecture", Value::of_string("llama"));
  if (alignment) set_both("general.alignment", Value::of_u32(alignment));
  set_both("x.list", Value::of_strings({"p", "q", ""}));
  set_both("general.architecture", Value::of_string("llama2"));  // replaced in place, order kept
  const auto tensors = sample_tensors();
  for (const auto& t : tensors) {
    ASSERT_TRUE(buffered.add_tensor(t.name, t.type, t.dims, t.bytes));
    ASSERT_TRUE(stream.declare_tensor(t.name, t.type, t.dims));
  }
  const std::string path = scratch_dir() + "/stream_" + std::to_string(alignment) + ".gguf";
  ASSERT_TRUE(stream.open(path));
  EXPECT_FALSE(std::filesystem::exists(path)) << "the final name appears only on commit";
  for (const auto& t : tensors) ASSERT_TRUE(stream.write_tensor(t.bytes));
  ASSERT_TRUE(stream.commit());
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
  EXPECT_EQ(read_all(path), buffered.to_bytes());
  auto f = GgufFile::open(path);
  ASSERT_TRUE(f) << f.status().message();
  EXPECT_EQ(f->alignment(), alignment ? alignment : kDefaultAlignment);
  ASSERT_EQ(f->tensors().size(), tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    const TensorInfo& info = f->tensors()[i];
    EXPECT_EQ(info.name, tensors[i].name);
    EXPECT_EQ(std::vector<uint8_t>(info.data, info.data + info.n_bytes), tensors[i].bytes);
  }
}

TEST(StreamWriter, SameBytesAsBufferedWriter) { check_same_as_buffered(0); }
TEST(StreamWriter, SameBytesWithCustomAlignment) { check_same_as_buffered(64); }
TEST(StreamWriter, AlignmentLargerThanPaddingBuffer) { check_same_as_buffered(4096); }

TEST(StreamWriter, NoTensorsIsAValidFile) {
  GgufStreamWriter w;
  w.set("general.architecture", Value::of_string("llama"));
  const std::string path = scratch_dir() + "/stream_empty.gguf";
  ASSERT_TRUE(w.open(path));
  ASSERT_TRUE(w.commit());
  GgufWriter b;
  b.set("general.architecture", Value::of_string("llama"));
  EXPECT_EQ(read_all(path), b.to_bytes());
}

TEST(StreamWriter, WrongSizeAndOrderErrors) {
  GgufStreamWriter w;
  ASSERT_TRUE(w.declare_tensor("t", GgmlType::F32, {4}));
  EXPECT_TRUE(failed_with(w.declare_tensor("t", GgmlType::F32, {4}), ErrorKind::InvalidArgument, {"twice"}));
  EXPECT_TRUE(failed_with(w.declare_tensor("q", GgmlType::Q4_0, {33}), ErrorKind::InvalidArgument, {"block size"}));
  EXPECT_TRUE(failed_with(w.write_tensor({}), ErrorKind::InvalidArgument, {"not open"}));
  const std::string path = scratch_dir() + "/stream_sizes.gguf";
  ASSERT_TRUE(w.open(path));
  EXPECT_TRUE(failed_with(w.declare_tensor("late", GgmlType::F32, {4}), ErrorKind::InvalidArgument, {"after open"}));
  std::vector<uint8_t> three(3), sixteen(16);
  EXPECT_TRUE(failed_with(w.write_tensor(three), ErrorKind::InvalidArgument, {"'t'", "3 bytes", "16 expected"}));
  ASSERT_TRUE(w.write_tensor(sixteen));
  EXPECT_TRUE(failed_with(w.write_tensor(sixteen), ErrorKind::InvalidArgument, {"more tensors"}));
  ASSERT_TRUE(w.commit());
  EXPECT_TRUE(GgufFile::open(path));
}

TEST(StreamWriter, IncompleteCommitLeavesNoFile) {
  const std::string path = scratch_dir() + "/stream_incomplete.gguf";
  GgufStreamWriter w;
  ASSERT_TRUE(w.declare_tensor("a", GgmlType::F32, {4}));
  ASSERT_TRUE(w.declare_tensor("b", GgmlType::F32, {4}));
  ASSERT_TRUE(w.open(path));
  ASSERT_TRUE(w.write_tensor(std::vector<uint8_t>(16)));
  EXPECT_TRUE(failed_with(w.commit(), ErrorKind::InvalidArgument, {"1 of 2"}));
  EXPECT_FALSE(std::filesystem::exists(path));
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
}

TEST(StreamWriter, AbandonedStreamLeavesNoFileAndKeepsTheOldOne) {
  const std::string path = scratch_dir() + "/stream_abandoned.gguf";
  { std::ofstream(path) << "previous contents"; }
  {
    GgufStreamWriter w;
    ASSERT_TRUE(w.declare_tensor("a", GgmlType::F32, {4}));
    ASSERT_TRUE(w.open(path));
    EXPECT_TRUE(std::filesystem::exists(path + ".tmp"));
  }
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
  auto bytes = read_all(path);
  EXPECT_EQ(std::string(bytes.begin(), bytes.end()), "previous contents");
}

TEST(StreamWriter, UnwritableDirectoryIsAnIoError) {
  GgufStreamWriter w;
  EXPECT_TRUE(failed_with(w.open("/nonexistent-dir/x.gguf"), ErrorKind::IoError, {"cannot create"}));
}

}  // namespace
}  // namespace tern::gguf
