// llama.cpp's tokenizer test vectors: every ../shared/testdata/tokenizers/ggml-vocab-*.gguf
// is one parameterised test, so a failure names its vocabulary.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "gguf/reader.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/tokenizer.h"
#include "core/utf8.h"
#include "tokenizer_test_util.h"

namespace tern {
namespace {

namespace fs = std::filesystem;
using test::parse_outputs;
using test::read_all;
using test::split_inputs;
using test::vectors_dir;

// The vocabularies the shared README lists, plus any other ggml-vocab-*.gguf found there.
std::vector<std::string> vocab_names() {
  std::vector<std::string> names = {"llama-spm", "phi-3",        "gpt-2",  "starcoder",
                                    "mpt",       "deepseek-llm", "refact", "bert-bge"};
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(vectors_dir(), ec)) {
    const std::string file = entry.path().filename().string();
    const std::string prefix = "ggml-vocab-", suffix = ".gguf";
    if (file.size() > prefix.size() + suffix.size() && file.starts_with(prefix) && file.ends_with(suffix)) {
      const std::string name = file.substr(prefix.size(), file.size() - prefix.size() - suffix.size());
      if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
    }
  }
  return names;
}

std::string printable(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '\n')
      out += "\\n";
    else if (c == '\t')
      out += "\\t";
    else
      out += c;
  }
  return out;
}

class VocabVectors : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    base_ = vectors_dir() / ("ggml-vocab-" + GetParam() + ".gguf");
    for (const fs::path& p : {base_, fs::path(base_.string() + ".inp"), fs::path(base_.string() + ".out")}) {
      if (!fs::exists(p)) GTEST_SKIP() << "test vector file absent: " << p.string();
    }
    auto file = gguf::GgufFile::open(base_.string());
    ASSERT_TRUE(file.is_ok()) << file.status().message();
    auto tok = Tokenizer::from_gguf(*file);
    ASSERT_TRUE(tok.is_ok()) << tok.status().message();
    tok_ = std::move(tok).value();
    inputs_ = split_inputs(read_all(base_.string() + ".inp"));
    expected_ = parse_outputs(read_all(base_.string() + ".out"));
    ASSERT_EQ(inputs_.size(), expected_.size()) << "the .inp and .out files disagree on the number of tests";
  }

  fs::path base_;
  std::unique_ptr<Tokenizer> tok_;
  std::vector<std::string> inputs_;
  std::vector<std::vector<TokenId>> expected_;
};

TEST_P(VocabVectors, EncodeMatchesLlamaCpp) {
  size_t n_failed = 0;
  for (size_t i = 0; i < inputs_.size(); ++i) {
    const std::vector<TokenId> ids = tok_->encode(inputs_[i], /*add_special=*/false, /*parse_special=*/false);
    if (ids != expected_[i]) ++n_failed;
    EXPECT_EQ(ids, expected_[i]) << "test string #" << i << ": \"" << printable(inputs_[i]) << "\"";
  }
  EXPECT_EQ(n_failed, 0u) << n_failed << " of " << inputs_.size() << " strings differ";
}

TEST_P(VocabVectors, DecodeRoundTrips) {
  if (tok_->kind() == VocabKind::WordPiece)
    GTEST_SKIP() << "WordPiece lower-cases and drops accents: no round trip";
  for (size_t i = 0; i < inputs_.size(); ++i) {
    const std::vector<TokenId> ids = tok_->encode(inputs_[i], false, false);
    EXPECT_EQ(tok_->decode(ids), inputs_[i]) << "test string #" << i;
    // BOS does not count as text: the space rule still applies to the first text token.
    EXPECT_EQ(tok_->decode(tok_->encode(inputs_[i], true, false)), inputs_[i]) << "test string #" << i;
  }
}

TEST_P(VocabVectors, StreamingEqualsWholeDecode) {
  if (tok_->kind() == VocabKind::WordPiece)
    GTEST_SKIP() << "WordPiece lower-cases and drops accents: no round trip";
  for (size_t i = 0; i < inputs_.size(); ++i) {
    StreamDecoder stream(*tok_, /*at_text_start=*/true);
    std::string text;
    for (TokenId id : tok_->encode(inputs_[i], true, false)) text += stream.push(id);
    text += stream.flush();
    EXPECT_EQ(text, inputs_[i]) << "test string #" << i;
  }
}

// Text that mixes words, whitespace runs, digits, punctuation, multi-byte
// characters and invalid bytes.
// Whether every byte of s has a normal token spelling it. Byte-level vocabularies
// may lack the never-valid UTF-8 bytes or spell them with user-defined tokens
// (deepseek's "ÿ"), whose piece is their literal text; such bytes cannot round trip.
bool bytes_have_normal_tokens(const Tokenizer& tok, std::string_view s) {
  if (tok.kind() != VocabKind::Bpe) return true;
  for (char c : s) {
    const TokenId id = tok.vocab().find(utf8::encode(byte_level::byte_to_codepoint(static_cast<uint8_t>(c))));
    if (id < 0 || tok.vocab().types[id] != TokenType::Normal) return false;
  }
  return true;
}

std::string random_text(std::mt19937& rng, const Tokenizer& tok) {
  static const std::vector<std::string> kPieces = {"a",
                                                   "Z",
                                                   "hello",
                                                   " ",
                                                   "  ",
                                                   "\n",
                                                   "\r\n",
                                                   "\t",
                                                   "1",
                                                   "234",
                                                   "'s",
                                                   "'LL",
                                                   "!",
                                                   "...",
                                                   "<",
                                                   "|>",
                                                   "\xC3\xA9",
                                                   "\xE4\xB8\x96",
                                                   "\xF0\x9F\x98\x80",
                                                   "\xCC\x81",
                                                   "\xD0\xB6",
                                                   "\xE3\x80\x80",
                                                   "\xEF\xBC\x81",
                                                   "\xFF",
                                                   "\xC3",
                                                   "\x80",
                                                   "\xE2\x82",
                                                   "\xED\xA0\x80",
                                                   std::string(1, '\0')};
  std::string s;
  const int n = std::uniform_int_distribution<int>(0, 24)(rng);
  for (int i = 0; i < n; ++i) {
    const std::string& piece = kPieces[std::uniform_int_distribution<size_t>(0, kPieces.size() - 1)(rng)];
    if (bytes_have_normal_tokens(tok, piece)) s += piece;
  }
  return s;
}

TEST_P(VocabVectors, RandomTextRoundTripsAndNeverBreaks) {
  std::mt19937 rng(1234);
  for (int i = 0; i < 300; ++i) {
    const std::string text = random_text(rng, *tok_);
    const std::vector<TokenId> ids = tok_->encode(text, true, i % 2 == 0);
    for (TokenId id : ids) ASSERT_TRUE(id >= 0 && id < tok_->n_vocab()) << "id " << id;
    if (tok_->kind() != VocabKind::WordPiece) {
      EXPECT_EQ(tok_->decode(ids), text) << "random text #" << i;
    }
  }
}

TEST_P(VocabVectors, StreamOfRandomIdsIsValidUtf8) {
  std::mt19937 rng(99);
  std::uniform_int_distribution<TokenId> any_id(-2, tok_->n_vocab() + 1);
  for (int round = 0; round < 20; ++round) {
    StreamDecoder stream(*tok_, round % 2 == 0);
    std::string text;
    for (int i = 0; i < 200; ++i) {
      const std::string piece = stream.push(any_id(rng));
      EXPECT_TRUE(utf8::is_valid(piece));
      text += piece;
    }
    text += stream.flush();
    EXPECT_TRUE(utf8::is_valid(text));
  }
}

// Special-token facts of the real vocabularies (skipped when absent).
std::unique_ptr<Tokenizer> open_shared(const std::string& name) {
  const fs::path path = vectors_dir() / ("ggml-vocab-" + name + ".gguf");
  if (!fs::exists(path)) return nullptr;
  auto file = gguf::GgufFile::open(path.string());
  EXPECT_TRUE(file.is_ok()) << file.status().message();
  if (!file.is_ok()) return nullptr;
  auto tok = Tokenizer::from_gguf(*file);
  EXPECT_TRUE(tok.is_ok()) << tok.status().message();
  return tok.is_ok() ? std::move(tok).value() : nullptr;
}

TEST(SharedVocabSpecials, LlamaSpm) {
  auto tok = open_shared("llama-spm");
  if (!tok) GTEST_SKIP() << "ggml-vocab-llama-spm.gguf absent";
  EXPECT_EQ(tok->kind(), VocabKind::Spm);
  EXPECT_EQ(tok->n_vocab(), 32000);
  EXPECT_EQ(tok->bos_id(), 1);
  EXPECT_EQ(tok->eos_id(), 2);
  EXPECT_TRUE(tok->add_bos());
  EXPECT_FALSE(tok->add_eos());
  EXPECT_EQ(tok->encode("Hello world", true, false), (std::vector<TokenId>{1, 15043, 3186}));
  EXPECT_EQ(tok->encode("<s>Hello world", false, true), (std::vector<TokenId>{1, 15043, 3186}));
  EXPECT_TRUE(tok->is_eog(2));
  EXPECT_TRUE(tok->is_control(1));
  EXPECT_EQ(tok->token_to_piece(13), "\n");  // <0x0A>
  EXPECT_EQ(tok->decode(std::vector<TokenId>{1, 15043, 3186, 2}, true), "<s>Hello world</s>");
}

TEST(SharedVocabSpecials, Phi3) {
  auto tok = open_shared("phi-3");
  if (!tok) GTEST_SKIP() << "ggml-vocab-phi-3.gguf absent";
  EXPECT_EQ(tok->eos_id(), 32000);
  EXPECT_TRUE(tok->is_eog(32000));  // <|endoftext|>
  EXPECT_TRUE(tok->is_eog(32007));  // <|end|>
  EXPECT_FALSE(tok->is_eog(32010));
  const std::vector<TokenId> ids = tok->encode("<|user|>\nHi<|end|>", false, true);
  ASSERT_GE(ids.size(), 3u);
  EXPECT_EQ(ids.front(), 32010);
  EXPECT_EQ(ids.back(), 32007);
  EXPECT_EQ(std::count(ids.begin(), ids.end(), 32010), 1);
  const std::vector<TokenId> plain = tok->encode("<|user|>", false, false);
  EXPECT_EQ(std::count(plain.begin(), plain.end(), 32010), 0);
}

TEST(SharedVocabSpecials, Gpt2AndDeepseek) {
  if (auto tok = open_shared("gpt-2")) {
    EXPECT_EQ(tok->kind(), VocabKind::Bpe);
    EXPECT_FALSE(tok->add_bos());
    EXPECT_TRUE(tok->is_eog(50256));
    EXPECT_EQ(tok->encode("<|endoftext|>", false, true), std::vector<TokenId>{50256});
    EXPECT_GT(tok->encode("<|endoftext|>", false, false).size(), 1u);
    EXPECT_EQ(tok->token_to_piece(50256, true), "<|endoftext|>");
    EXPECT_EQ(tok->token_to_piece(50256), "");
  }
  if (auto tok = open_shared("deepseek-llm")) {
    EXPECT_TRUE(tok->add_bos());
    EXPECT_EQ(tok->bos_id(), 100000);
    EXPECT_TRUE(tok->is_eog(100001));
    EXPECT_EQ(tok->encode("Hi", true, false).front(), 100000);
  }
}

std::string test_name(const ::testing::TestParamInfo<std::string>& info) {
  std::string s = info.param;
  for (char& c : s) {
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  }
  return s;
}

INSTANTIATE_TEST_SUITE_P(Shared, VocabVectors, ::testing::ValuesIn(vocab_names()), test_name);

}  // namespace
}  // namespace tern
