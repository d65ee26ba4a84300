// GGUF files written by llama.cpp's converter (shared/testdata/tokenizers):
// each parses through mmap, has the keys a tokenizer needs with consistent
// array lengths, and our writer reproduces each file byte for byte.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "gguf/reader.h"
#include "gguf/writer.h"
#include "gguf_test_util.h"

namespace tern::gguf {
namespace {

std::vector<std::string> tokenizer_files() {
  std::vector<std::string> out;
  const std::filesystem::path dir = std::filesystem::path(TERN_SHARED_DIR) / "testdata" / "tokenizers";
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec))
    if (e.path().extension() == ".gguf") out.push_back(e.path().string());
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<uint8_t> read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::vector<uint8_t> out(std::filesystem::file_size(path));
  in.read(reinterpret_cast<char*>(out.data()), static_cast<std::streamsize>(out.size()));
  EXPECT_TRUE(in.good()) << "cannot read " << path;
  return out;
}

TEST(GgufRealFiles, TokenizerVocabsParse) {
  const auto files = tokenizer_files();
  if (files.empty()) GTEST_SKIP() << "no .gguf files under " << TERN_SHARED_DIR << "/testdata/tokenizers";
  for (const auto& path : files) {
    SCOPED_TRACE(path);
    auto f = GgufFile::open(path);
    ASSERT_TRUE(f.is_ok()) << f.status().message();
    EXPECT_TRUE(f->version() == 2 || f->version() == 3);
    EXPECT_TRUE(test::check_consistent(*f));

    auto arch = f->get_string("general.architecture");
    ASSERT_TRUE(arch.is_ok()) << arch.status().message();
    EXPECT_FALSE(arch->empty());

    auto model = f->get_string("tokenizer.ggml.model");
    ASSERT_TRUE(model.is_ok()) << model.status().message();

    auto tokens = f->get_array("tokenizer.ggml.tokens", ValueType::String);
    ASSERT_TRUE(tokens.is_ok()) << tokens.status().message();
    const size_t n_vocab = (*tokens)->items.size();
    EXPECT_GT(n_vocab, 100u);
    for (const Value& t : (*tokens)->items) ASSERT_NE(t.as_string(), nullptr);

    if (f->find("tokenizer.ggml.scores")) {
      auto scores = f->get_array("tokenizer.ggml.scores", ValueType::F32);
      ASSERT_TRUE(scores.is_ok()) << scores.status().message();
      EXPECT_EQ((*scores)->items.size(), n_vocab);
    }
    if (f->find("tokenizer.ggml.token_type")) {
      auto types = f->get_array("tokenizer.ggml.token_type", ValueType::I32);
      ASSERT_TRUE(types.is_ok()) << types.status().message();
      EXPECT_EQ((*types)->items.size(), n_vocab);
      for (const Value& t : (*types)->items) {
        const int64_t v = *t.as_i64();
        ASSERT_TRUE(v >= 1 && v <= 6) << "token type " << v;
      }
    }
    if (f->find("tokenizer.ggml.merges")) {
      auto merges = f->get_array("tokenizer.ggml.merges", ValueType::String);
      ASSERT_TRUE(merges.is_ok()) << merges.status().message();
      for (const Value& m : (*merges)->items) ASSERT_NE(m.as_string()->find(' '), std::string::npos) << *m.as_string();
    }
    for (const char* id_key : {"tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id",
                               "tokenizer.ggml.unknown_token_id", "tokenizer.ggml.padding_token_id"}) {
      auto id = f->get_u64_or(id_key, 0);
      ASSERT_TRUE(id.is_ok()) << id.status().message();
      EXPECT_LT(*id, n_vocab) << id_key;
    }
  }
}

TEST(GgufRealFiles, OpenAndFromBytesAgree) {
  const auto files = tokenizer_files();
  if (files.empty()) GTEST_SKIP() << "no tokenizer .gguf files";
  for (const auto& path : files) {
    SCOPED_TRACE(path);
    auto mapped = GgufFile::open(path);
    auto owned = GgufFile::from_bytes(read_bytes(path));
    ASSERT_TRUE(mapped.is_ok() && owned.is_ok());
    EXPECT_EQ(mapped->file_size(), owned->file_size());
    ASSERT_EQ(mapped->metadata().size(), owned->metadata().size());
    for (size_t i = 0; i < mapped->metadata().size(); ++i) {
      EXPECT_EQ(mapped->metadata()[i].first, owned->metadata()[i].first);
      EXPECT_TRUE(test::values_equal(mapped->metadata()[i].second, owned->metadata()[i].second));
    }
  }
}

// Copying every key into our writer reproduces llama.cpp's bytes: evidence
// that reader and writer agree with another implementation, not only with each other.
TEST(GgufRealFiles, WriterReproducesTheFileExactly) {
  const auto files = tokenizer_files();
  if (files.empty()) GTEST_SKIP() << "no tokenizer .gguf files";
  for (const auto& path : files) {
    SCOPED_TRACE(path);
    auto f = GgufFile::open(path);
    ASSERT_TRUE(f.is_ok()) << f.status().message();
    if (f->version() != 3 || !f->tensors().empty()) continue;  // our writer emits v3; tensors not copied here
    GgufWriter w;
    for (const auto& [k, v] : f->metadata()) w.set(k, v);
    const auto original = read_bytes(path);
    const auto rewritten = w.to_bytes();
    ASSERT_EQ(rewritten.size(), original.size());
    EXPECT_TRUE(rewritten == original) << "first difference at byte "
                                       << (std::mismatch(rewritten.begin(), rewritten.end(), original.begin()).first -
                                           rewritten.begin());
  }
}

}  // namespace
}  // namespace tern::gguf
