// Truncation at every byte offset, a byte-by-byte sweep of the header region,
// and ~20k random mutations: each parse either succeeds with a consistent
// result or returns a Status; it never crashes, over-reads (ASan) or allocates
// more than a small multiple of the image.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <random>

#include "gguf/reader.h"
#include "gguf/writer.h"
#include "gguf_test_util.h"

namespace tern::gguf {
namespace {

// Metadata + 2 tensors; the last tensor ends exactly at the end of the file
// (96 + 288 bytes, both multiples of 32), so no trailing padding exists.
std::vector<uint8_t> small_valid_image() {
  GgufWriter w;
  w.set("general.architecture", Value::of_string("llama"));
  w.set("llama.block_count", Value::of_u32(1));
  w.set("llama.rope.freq_base", Value::of_f32(10000.0f));
  w.set("tokenizer.ggml.add_bos_token", Value::of_bool(true));
  w.set("tokenizer.ggml.tokens", Value::of_strings({"<unk>", "a", "bc"}));
  w.set("tokenizer.ggml.scores", Value::of_f32s({0.0f, -1.0f, -2.0f}));
  w.set("x.nested", Value::of_array(ValueType::Array, {Value::of_strings({"p", "q"}), Value::of_i32s({-5})}));
  w.set("x.i64", Value::of_i64(-3));
  std::vector<uint8_t> a(96), b(288);
  for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<uint8_t>(i * 7);
  for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<uint8_t>(i * 13 + 1);
  EXPECT_TRUE(w.add_tensor("token_embd.weight", GgmlType::F32, {8, 3}, a).is_ok());
  EXPECT_TRUE(w.add_tensor("blk.0.ffn_down.weight", GgmlType::Q4_0, {32, 16}, b).is_ok());
  return w.to_bytes();
}

bool contains(const std::string& s, std::string_view w) { return s.find(w) != std::string::npos; }

TEST(GgufRobustness, TruncationAtEveryOffsetFails) {
  const std::vector<uint8_t> full = small_valid_image();
  auto ok = GgufFile::from_bytes(full);
  ASSERT_TRUE(ok.is_ok()) << ok.status().message();
  ASSERT_EQ(ok->tensors().size(), 2u);
  const TensorInfo& last = ok->tensors().back();
  ASSERT_EQ(ok->data_offset() + last.offset + last.n_bytes, full.size()) << "test image must end with tensor data";
  const uint64_t data_offset = ok->data_offset();

  test::reset_peak_allocation();
  for (size_t len = 0; len < full.size(); ++len) {
    std::vector<uint8_t> prefix(full.begin(), full.begin() + static_cast<std::ptrdiff_t>(len));
    auto f = GgufFile::from_bytes(std::move(prefix));
    ASSERT_FALSE(f.is_ok()) << "prefix of " << len << " of " << full.size() << " bytes parsed";
    const Status& s = f.status();
    ASSERT_EQ(s.kind(), ErrorKind::InvalidFile) << len << ": " << s.message();
    const std::string& m = s.message();
    EXPECT_TRUE(contains(m, "truncated") || contains(m, "beyond the end") || contains(m, "file can hold") ||
                contains(m, "remaining bytes"))
        << "prefix " << len << ": message does not say the file is short: " << m;
    if (len > data_offset) {
      // Only tensor data is missing: the error names a tensor whose bytes are out of range.
      EXPECT_TRUE(contains(m, "outside") && (contains(m, "'token_embd.weight'") || contains(m, "'blk.0.ffn_down.weight'")))
          << len << ": " << m;
    }
  }
  EXPECT_LT(test::peak_allocation(), 64 * full.size());
}

TEST(GgufRobustness, TruncatedFilesOnDiskFailThroughMmap) {
  const std::vector<uint8_t> full = small_valid_image();
  const std::string path = test::scratch_dir() + "/truncated.gguf";
  for (size_t len = 0; len <= full.size(); len += (len < full.size() - 40 ? 23 : 1)) {
    std::ofstream(path, std::ios::binary | std::ios::trunc)
        .write(reinterpret_cast<const char*>(full.data()), static_cast<std::streamsize>(len));
    auto f = GgufFile::open(path);
    if (len == full.size()) {
      ASSERT_TRUE(f.is_ok()) << f.status().message();
      EXPECT_TRUE(test::check_consistent(*f));
    } else {
      ASSERT_FALSE(f.is_ok()) << "prefix of " << len << " bytes opened";
      EXPECT_TRUE(test::failed_with(f.status(), ErrorKind::InvalidFile, {"truncated.gguf"})) << len;
    }
  }
  std::filesystem::remove(path);
}

TEST(GgufRobustness, EveryHeaderByteSetToSpecialValues) {
  const std::vector<uint8_t> full = small_valid_image();
  const uint64_t data_offset = GgufFile::from_bytes(full)->data_offset();
  size_t n_ok = 0, n_err = 0;
  test::reset_peak_allocation();
  for (size_t pos = 0; pos < data_offset; ++pos) {
    for (int v : {0x00, 0xFF, 0x80, 0x7F, 0x01, 0x09, full[pos] ^ 0x01, full[pos] ^ 0x40}) {
      std::vector<uint8_t> img = full;
      img[pos] = static_cast<uint8_t>(v);
      auto f = GgufFile::from_bytes(std::move(img));
      if (f.is_ok()) {
        ++n_ok;
        ASSERT_TRUE(test::check_consistent(*f)) << "byte " << pos << " = " << v;
      } else {
        ++n_err;
        ASSERT_FALSE(f.status().message().empty());
        ASSERT_TRUE(f.status().kind() == ErrorKind::InvalidFile || f.status().kind() == ErrorKind::Unsupported)
            << f.status().message();
      }
    }
  }
  EXPECT_GT(n_ok, 0u);
  EXPECT_GT(n_err, 0u);
  EXPECT_LT(test::peak_allocation(), 64 * full.size());
}

// One random mutation of `img`; positions favour the header and tensor infos,
// where the parser makes its decisions.
void mutate(std::vector<uint8_t>& img, uint64_t data_offset, std::mt19937_64& rng) {
  auto pick_pos = [&]() -> size_t {
    if (img.empty()) return 0;
    const uint64_t hi = (rng() % 5 != 0 && data_offset < img.size()) ? data_offset : img.size();
    return static_cast<size_t>(rng() % hi);
  };
  static const uint64_t kInteresting[] = {0, 1, 2, 7, 8, 9, 12, 13, 31, 32, 33, 64, 255, 256, 0x7FFFFFFF,
                                          0x80000000, 0xFFFFFFFF, uint64_t{1} << 32, uint64_t{1} << 56,
                                          uint64_t{1} << 63, ~uint64_t{0}, ~uint64_t{0} - 31};
  const int n_ops = 1 + static_cast<int>(rng() % 3);
  for (int op = 0; op < n_ops && !img.empty(); ++op) {
    switch (rng() % 6) {
      case 0: {  // flip bits
        for (int i = 0, n = 1 + static_cast<int>(rng() % 4); i < n; ++i) img[pick_pos()] ^= static_cast<uint8_t>(1u << (rng() % 8));
        break;
      }
      case 1: {  // random bytes
        for (int i = 0, n = 1 + static_cast<int>(rng() % 8); i < n; ++i) img[pick_pos()] = static_cast<uint8_t>(rng());
        break;
      }
      case 2: {  // an interesting integer, 4 or 8 bytes wide
        const uint64_t v = kInteresting[rng() % std::size(kInteresting)];
        const size_t width = rng() % 2 ? 8 : 4;
        const size_t pos = pick_pos();
        for (size_t i = 0; i < width && pos + i < img.size(); ++i) img[pos + i] = static_cast<uint8_t>(v >> (8 * i));
        break;
      }
      case 3: {  // truncate
        img.resize(static_cast<size_t>(rng() % (img.size() + 1)));
        break;
      }
      case 4: {  // delete a byte (shifts everything after it)
        img.erase(img.begin() + static_cast<std::ptrdiff_t>(pick_pos()));
        break;
      }
      default: {  // insert a byte
        img.insert(img.begin() + static_cast<std::ptrdiff_t>(pick_pos()), static_cast<uint8_t>(rng()));
        break;
      }
    }
  }
}

TEST(GgufRobustness, RandomMutationsNeverCrash) {
  const std::vector<uint8_t> base = small_valid_image();
  const uint64_t data_offset = GgufFile::from_bytes(base)->data_offset();
  std::mt19937_64 rng(0x7E4E5EEDull);
  constexpr int kIterations = 20000;
  size_t n_ok = 0, n_err = 0, peak = 0;
  for (int it = 0; it < kIterations; ++it) {
    std::vector<uint8_t> img = base;
    mutate(img, data_offset, rng);
    const size_t size = img.size();
    test::reset_peak_allocation();
    auto f = GgufFile::from_bytes(std::move(img));
    if (f.is_ok()) {
      ++n_ok;
      ASSERT_TRUE(test::check_consistent(*f)) << "iteration " << it;
    } else {
      ++n_err;
      const Status& s = f.status();
      ASSERT_FALSE(s.message().empty()) << "iteration " << it;
      ASSERT_TRUE(s.kind() == ErrorKind::InvalidFile || s.kind() == ErrorKind::Unsupported)
          << "iteration " << it << ": " << error_kind_name(s.kind()) << " " << s.message();
    }
    // The parser's stated bound: a small multiple of the file size (plus the copy of it).
    ASSERT_LT(test::peak_allocation(), 64 * size + 4096) << "iteration " << it;
    peak = std::max(peak, test::peak_allocation());
  }
  // Both outcomes must occur, or the mutations are not exercising the parser.
  EXPECT_GT(n_ok, 100u);
  EXPECT_GT(n_err, 1000u);
  RecordProperty("parsed_ok", static_cast<int>(n_ok));
  RecordProperty("refused", static_cast<int>(n_err));
  RecordProperty("peak_single_allocation", static_cast<int>(peak));
}

TEST(GgufRobustness, RandomBytesNeverCrash) {
  // Pure noise behind a valid magic and version.
  std::mt19937_64 rng(42);
  for (int it = 0; it < 2000; ++it) {
    std::vector<uint8_t> img(static_cast<size_t>(8 + rng() % 200));
    for (auto& b : img) b = static_cast<uint8_t>(rng());
    img[0] = 'G'; img[1] = 'G'; img[2] = 'U'; img[3] = 'F';
    img[4] = static_cast<uint8_t>(2 + it % 2); img[5] = img[6] = img[7] = 0;
    auto f = GgufFile::from_bytes(std::move(img));
    if (f.is_ok()) ASSERT_TRUE(test::check_consistent(*f));
    else ASSERT_FALSE(f.status().message().empty());
  }
}

}  // namespace
}  // namespace tern::gguf
