// read_hf_tokenizer(): Hugging Face tokenizer directories as GGUF tokenizer metadata.
//
// The main check is end to end against llama.cpp's golden test vectors: each
// ../shared/testdata/tokenizers/ggml-vocab-NAME.gguf is written back as the
// tokenizer.json Hugging Face would have for it (hf_json_writer), read with
// read_hf_tokenizer, put through GGUF bytes and load_vocab, and must tokenize
// every test string to the same ids.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>

#include "gguf/reader.h"
#include "gguf/writer.h"
#include "hf_json_writer.h"
#include "tokenizer/hf_tokenizer.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer_test_util.h"

namespace tern {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using KeyValues = std::vector<std::pair<std::string, gguf::Value>>;

std::unique_ptr<Tokenizer> tokenizer_from(const KeyValues& kv) {
  gguf::GgufWriter w;
  w.set("general.architecture", gguf::Value::of_string("llama"));
  for (const auto& [key, value] : kv) w.set(key, value);
  return test::build(w);
}

const gguf::Value* find(const KeyValues& kv, const std::string& key) {
  for (const auto& [k, v] : kv) {
    if (k == key) return &v;
  }
  return nullptr;
}

std::string string_of(const KeyValues& kv, const std::string& key) {
  const gguf::Value* v = find(kv, key);
  return v != nullptr && v->as_string() ? *v->as_string() : "<absent>";
}

struct VectorCase {
  std::string vocab;  // ggml-vocab-NAME.gguf
  std::string model, pre;
  test::HfWriteOptions options;
};

// Shown instead of the struct's bytes when a case fails.
void PrintTo(const VectorCase& c, std::ostream* os) { *os << c.vocab; }

bool is_special(const Tokenizer& tok, TokenId id) {
  const TokenType t = tok.vocab().types[id];
  return t == TokenType::Control || t == TokenType::Unknown;
}

std::string case_name(const ::testing::TestParamInfo<VectorCase>& info) {
  std::string s = info.param.vocab;
  for (char& c : s) {
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  }
  return s;
}

// One vocabulary written as a tokenizer directory and read back.
struct Loaded {
  std::unique_ptr<test::TempDir> dir;
  std::unique_ptr<Tokenizer> original, tok;
  KeyValues kv;
  std::vector<std::string> inputs;
  std::vector<std::vector<TokenId>> expected;
};

// Skips the current test when the vector files are absent.
void load(const VectorCase& c, Loaded& out) {
  const fs::path base = test::vectors_dir() / ("ggml-vocab-" + c.vocab + ".gguf");
  for (const fs::path& p : {base, fs::path(base.string() + ".inp"), fs::path(base.string() + ".out")}) {
    if (!fs::exists(p)) GTEST_SKIP() << "test vector file absent: " << p.string();
  }
  auto file = gguf::GgufFile::open(base.string());
  ASSERT_TRUE(file.is_ok()) << file.status().message();
  auto original = Tokenizer::from_gguf(*file);
  ASSERT_TRUE(original.is_ok()) << original.status().message();
  out.original = std::move(original).value();

  out.dir = std::make_unique<test::TempDir>(c.vocab);
  out.dir->write_json("tokenizer.json", test::tokenizer_json_from_gguf(*file, c.options));
  out.dir->write_json("tokenizer_config.json", test::tokenizer_config_from_gguf(*file));
  out.dir->write_json("config.json", {{"vocab_size", out.original->n_vocab()}});
  auto kv = read_hf_tokenizer(out.dir->str());
  ASSERT_TRUE(kv.is_ok()) << kv.status().message();
  out.kv = std::move(kv).value();
  out.tok = tokenizer_from(out.kv);
  ASSERT_NE(out.tok, nullptr);
  out.inputs = test::split_inputs(test::read_all(base.string() + ".inp"));
  out.expected = test::parse_outputs(test::read_all(base.string() + ".out"));
  ASSERT_EQ(out.inputs.size(), out.expected.size());
}

size_t count_mismatches(const Tokenizer& tok, const Loaded& l) {
  size_t n = 0;
  for (size_t i = 0; i < l.inputs.size(); ++i) n += tok.encode(l.inputs[i], false, false) != l.expected[i];
  return n;
}

class HfVocabVectors : public ::testing::TestWithParam<VectorCase> {
 protected:
  void SetUp() override {
    load(GetParam(), loaded_);
    if (IsSkipped() || HasFatalFailure()) return;
    original_ = loaded_.original.get();
    tok_ = loaded_.tok.get();
  }

  Loaded loaded_;
  const Tokenizer* original_ = nullptr;
  const Tokenizer* tok_ = nullptr;
  const KeyValues& kv_ = loaded_.kv;
  const std::vector<std::string>& inputs_ = loaded_.inputs;
  const std::vector<std::vector<TokenId>>& expected_ = loaded_.expected;
};

TEST_P(HfVocabVectors, NamesModelAndPreTokenizer) {
  EXPECT_EQ(string_of(kv_, "tokenizer.ggml.model"), GetParam().model);
  EXPECT_EQ(string_of(kv_, "tokenizer.ggml.pre"), GetParam().pre);
}

TEST_P(HfVocabVectors, SameVocabularyAndSpecials) {
  ASSERT_EQ(tok_->n_vocab(), original_->n_vocab());
  size_t n_pads = 0;
  for (TokenId id = 0; id < tok_->n_vocab(); ++id) {
    const std::string& orig = original_->token_text(id);
    if (orig == "[PAD" + std::to_string(id) + "]") {
      // Left out of tokenizer.json: filled as llama.cpp fills holes.
      EXPECT_EQ(tok_->token_text(id), orig);
      EXPECT_EQ(tok_->vocab().types[id], TokenType::Unused);
      ++n_pads;
      continue;
    }
    ASSERT_EQ(tok_->token_text(id), orig) << "id " << id;
    // <unk> may be CONTROL (phi-3's GGUF) or UNKNOWN (ours, as SentencePiece has it): both are special.
    EXPECT_EQ(is_special(*tok_, id), is_special(*original_, id)) << "id " << id << " '" << orig << "'";
  }
  EXPECT_EQ(tok_->bos_id(), original_->bos_id());
  EXPECT_EQ(tok_->eos_id(), original_->eos_id());
  EXPECT_EQ(tok_->add_bos(), original_->add_bos());
  EXPECT_EQ(tok_->add_eos(), original_->add_eos());
  if (GetParam().vocab == "phi-3") {
    EXPECT_EQ(n_pads, 53u);  // [PAD32011] ... [PAD32063]
  }
}

TEST_P(HfVocabVectors, EncodeMatchesLlamaCpp) {
  size_t n_failed = 0;
  for (size_t i = 0; i < inputs_.size(); ++i) {
    const std::vector<TokenId> ids = tok_->encode(inputs_[i], /*add_special=*/false, /*parse_special=*/false);
    if (ids != expected_[i]) ++n_failed;
    EXPECT_EQ(ids, expected_[i]) << "test string #" << i;
  }
  EXPECT_EQ(n_failed, 0u) << n_failed << " of " << inputs_.size() << " strings differ";
}

INSTANTIATE_TEST_SUITE_P(
    Shared, HfVocabVectors,
    ::testing::Values(VectorCase{"llama-spm", "llama", "default", {}},
                      VectorCase{"phi-3", "llama", "default", {.merges_as_pairs = true, .metaspace = true}},
                      VectorCase{"gpt-2", "gpt2", "gpt-2", {}},
                      VectorCase{"mpt", "gpt2", "gpt-2", {.merges_as_pairs = true}},
                      VectorCase{"starcoder", "gpt2", "starcoder", {.merges_as_pairs = true}},
                      VectorCase{"refact", "gpt2", "starcoder", {}},
                      VectorCase{"deepseek-llm", "gpt2", "deepseek-llm", {.merges_as_pairs = true}},
                      VectorCase{"bert-bge", "bert", "default", {}}),
    case_name);

// The checks above can fail: what llama.cpp's LlamaHfVocab writes as scores
// (-1000 for every token) or a near-miss pre-tokenizer tokenizes differently.
TEST(HfVocabVectorsSwitchedOff, FlatSpmScoresBreakLlamaSpm) {
  Loaded l;
  load({"llama-spm", "llama", "default", {}}, l);
  if (IsSkipped() || HasFatalFailure()) return;
  ASSERT_EQ(count_mismatches(*l.tok, l), 0u);
  KeyValues flat = l.kv;
  for (auto& [key, value] : flat) {
    if (key == "tokenizer.ggml.scores")
      value = gguf::Value::of_f32s(std::vector<float>(static_cast<size_t>(l.tok->n_vocab()), -1000.0f));
  }
  auto tok = tokenizer_from(flat);
  ASSERT_NE(tok, nullptr);
  EXPECT_GT(count_mismatches(*tok, l), 0u);
}

TEST(HfVocabVectorsSwitchedOff, WrongPreTokenizerBreaksStarcoder) {
  Loaded l;
  load({"starcoder", "gpt2", "starcoder", {}}, l);
  if (IsSkipped() || HasFatalFailure()) return;
  KeyValues wrong = l.kv;
  for (auto& [key, value] : wrong) {
    if (key == "tokenizer.ggml.pre") value = gguf::Value::of_string("gpt-2");  // digits not split one by one
  }
  auto tok = tokenizer_from(wrong);
  ASSERT_NE(tok, nullptr);
  EXPECT_GT(count_mismatches(*tok, l), 0u);
}

}  // namespace
}  // namespace tern
