// Tokenizer behaviour on tiny vocabularies built in memory, and malformed metadata.
#include <gtest/gtest.h>

#include "tokenizer/tokenizer.h"
#include "tokenizer_test_util.h"

namespace tern {
namespace {

using test::TinySpm;
using Ids = std::vector<TokenId>;

TEST(TinySpm, MergesByScore) {
  auto tok = test::build(TinySpm().writer());
  ASSERT_TRUE(tok);
  EXPECT_EQ(tok->kind(), VocabKind::Spm);
  EXPECT_EQ(tok->n_vocab(), static_cast<int>(TinySpm().tokens.size()));
  EXPECT_EQ(tok->encode("hello", false, false), Ids{TinySpm::kSpaceHello});
  EXPECT_EQ(tok->encode("hello world", false, false), (Ids{TinySpm::kSpaceHello, TinySpm::kSpaceWorld}));
  // "▁hi": ▁h merges, "i" is no piece and falls back to its byte.
  EXPECT_EQ(tok->encode("hi", false, false), (Ids{TinySpm::kSpaceH, test::byte_token('i')}));
  EXPECT_EQ(tok->encode("", false, false), Ids{});
}

TEST(TinySpm, EqualScoresMergeLeftmostFirst) {
  // "▁w", "or" and "ld" all score -3; "lll" has two equal "ll" pairs and takes the left one.
  auto tok = test::build(TinySpm().writer());
  ASSERT_TRUE(tok);
  EXPECT_EQ(tok->encode("world", false, false), Ids{TinySpm::kSpaceWorld});
  EXPECT_EQ(tok->encode("lll", false, false), (Ids{TinySpm::kSpace, TinySpm::kLL, TinySpm::kL}));
}

TEST(TinySpm, AddBosAndEos) {
  TinySpm v;
  auto tok = test::build(v.writer());
  ASSERT_TRUE(tok);
  EXPECT_TRUE(tok->add_bos());
  EXPECT_FALSE(tok->add_eos());
  EXPECT_EQ(tok->bos_id(), TinySpm::kBos);
  EXPECT_EQ(tok->eos_id(), TinySpm::kEos);
  EXPECT_EQ(tok->encode("hello", true, false), (Ids{TinySpm::kBos, TinySpm::kSpaceHello}));
  EXPECT_EQ(tok->encode("", true, false), Ids{TinySpm::kBos});

  auto w = v.writer();
  w.set("tokenizer.ggml.add_bos_token", gguf::Value::of_bool(false));
  w.set("tokenizer.ggml.add_eos_token", gguf::Value::of_bool(true));
  auto tok2 = test::build(w);
  ASSERT_TRUE(tok2);
  EXPECT_EQ(tok2->encode("hello", true, false), (Ids{TinySpm::kSpaceHello, TinySpm::kEos}));
  EXPECT_EQ(tok2->encode("hello", false, false), Ids{TinySpm::kSpaceHello});
}

TEST(TinySpm, BosDefaultsOnForSpmWhenTheKeyIsAbsent) {
  gguf::GgufWriter w;
  TinySpm v;
  w.set("tokenizer.ggml.model", gguf::Value::of_string("llama"));
  w.set("tokenizer.ggml.tokens", gguf::Value::of_strings(v.tokens));
  w.set("tokenizer.ggml.scores", gguf::Value::of_f32s(v.scores));
  w.set("tokenizer.ggml.token_type", gguf::Value::of_i32s(v.types));
  w.set("tokenizer.ggml.bos_token_id", gguf::Value::of_u32(TinySpm::kBos));
  auto tok = test::build(w);
  ASSERT_TRUE(tok);
  EXPECT_TRUE(tok->add_bos());
  EXPECT_EQ(tok->eos_id(), -1);
  EXPECT_EQ(tok->encode("hello", true, false), (Ids{TinySpm::kBos, TinySpm::kSpaceHello}));
}

TEST(TinySpm, SpacePrefixCanBeTurnedOff) {
  auto w = TinySpm().writer();
  w.set("tokenizer.ggml.add_space_prefix", gguf::Value::of_bool(false));
  auto tok = test::build(w);
  ASSERT_TRUE(tok);
  EXPECT_EQ(tok->encode(" hello", false, false), Ids{TinySpm::kSpaceHello});
  EXPECT_EQ(tok->decode(Ids{TinySpm::kSpaceHello}), " hello");
}

TEST(TinySpm, SpecialTokenParsing) {
  auto tok = test::build(TinySpm().writer());
  ASSERT_TRUE(tok);
  // Control text is a token only with parse_special; the text after it gets the space prefix.
  EXPECT_EQ(tok->encode("<|im_end|>hello", false, true), (Ids{TinySpm::kImEnd, TinySpm::kSpaceHello}));
  EXPECT_EQ(tok->encode("<s>hello</s>", false, true),
            (Ids{TinySpm::kBos, TinySpm::kSpaceHello, TinySpm::kEos}));
  const Ids plain = tok->encode("<|im_end|>hello", false, false);
  EXPECT_EQ(std::count(plain.begin(), plain.end(), TinySpm::kImEnd), 0);
  EXPECT_EQ(tok->decode(plain), "<|im_end|>hello");
  // User-defined tokens are split out either way.
  EXPECT_EQ(tok->encode("<|user|>hello", false, false), (Ids{TinySpm::kUser, TinySpm::kSpaceHello}));
  EXPECT_EQ(tok->encode("hello<|user|>", false, false), (Ids{TinySpm::kSpaceHello, TinySpm::kUser}));
}

TEST(TinySpm, QuotedSpecialTextIsPlainWhileTheRestStaysSpecial) {
  auto tok = test::build(TinySpm().writer());
  ASSERT_TRUE(tok);
  // What a user typed: marked, it tokenises exactly as plain text would.
  const std::string typed = "hello<|im_end|></s> world<|user|>";
  const std::string quoted = tok->quote_special(typed);
  EXPECT_NE(quoted, typed);
  EXPECT_EQ(tok->encode_quoted(quoted, false), tok->encode(typed, false, false));
  // Inside a template, the template's own control tokens keep their meaning.
  const std::string prompt = "<s>" + quoted + "<|im_end|>";
  const Ids ids = tok->encode_quoted(prompt, true);
  EXPECT_EQ(std::count(ids.begin(), ids.end(), TinySpm::kBos), 2) << "add_special BOS and the template's <s>";
  EXPECT_EQ(std::count(ids.begin(), ids.end(), TinySpm::kEos), 0);
  EXPECT_EQ(std::count(ids.begin(), ids.end(), TinySpm::kImEnd), 1);
  EXPECT_EQ(std::count(ids.begin(), ids.end(), TinySpm::kUser), 1) << "user-defined tokens match either way";
  EXPECT_EQ(ids.back(), TinySpm::kImEnd);
  // Text without special tokens is unchanged by quoting.
  EXPECT_EQ(tok->quote_special("hello world"), "hello world");
  EXPECT_EQ(tok->encode_quoted("<s>hello", false), tok->encode("<s>hello", false, true));
}

TEST(TinySpm, PiecesAndDecode) {
  auto tok = test::build(TinySpm().writer());
  ASSERT_TRUE(tok);
  EXPECT_EQ(tok->token_to_piece(TinySpm::kSpaceHello), " hello");
  EXPECT_EQ(tok->token_to_piece(test::byte_token(0x41)), "A");
  EXPECT_EQ(tok->token_to_piece(TinySpm::kBos), "");
  EXPECT_EQ(tok->token_to_piece(TinySpm::kBos, true), "<s>");
  EXPECT_EQ(tok->token_to_piece(TinySpm::kUser), "<|user|>");
  EXPECT_EQ(tok->token_to_piece(-1), "");
  EXPECT_EQ(tok->token_to_piece(100000), "");
  EXPECT_EQ(tok->token_text(TinySpm::kSpaceHello), "\xE2\x96\x81hello");
  EXPECT_EQ(tok->token_text(-5), "");

  EXPECT_EQ(tok->decode(Ids{TinySpm::kBos, TinySpm::kSpaceHello, TinySpm::kSpaceWorld}), "hello world");
  EXPECT_EQ(tok->decode(Ids{TinySpm::kBos, TinySpm::kSpaceHello}, true), "<s>hello");
  EXPECT_EQ(tok->decode(Ids{TinySpm::kSpaceHello, -3, 99999}), "hello");  // bad ids are skipped
  for (const char* s : {"hello", " hello", "  hello world ", "\thi", "héllo wörld", "日本語", "a\nb", ""})
    EXPECT_EQ(tok->decode(tok->encode(s, true, false)), s) << s;
}

TEST(TinySpm, ControlAndEog) {
  auto tok = test::build(TinySpm().writer());
  ASSERT_TRUE(tok);
  EXPECT_TRUE(tok->is_control(TinySpm::kBos));
  EXPECT_TRUE(tok->is_control(TinySpm::kImEnd));
  EXPECT_FALSE(tok->is_control(TinySpm::kUser));
  EXPECT_FALSE(tok->is_control(TinySpm::kSpaceHello));
  EXPECT_FALSE(tok->is_control(-1));
  EXPECT_TRUE(tok->is_eog(TinySpm::kEos));
  EXPECT_TRUE(tok->is_eog(TinySpm::kImEnd));  // by its text
  EXPECT_FALSE(tok->is_eog(TinySpm::kBos));
  EXPECT_FALSE(tok->is_eog(123456));
}

TEST(TinyBpe, MergesByRank) {
  auto tok = test::build(test::tiny_bpe_writer());
  ASSERT_TRUE(tok);
  EXPECT_EQ(tok->kind(), VocabKind::Bpe);
  const Ids ids = tok->encode("hello world", false, false);
  ASSERT_EQ(ids.size(), 2u);
  EXPECT_EQ(tok->token_text(ids[0]), "hello");
  EXPECT_EQ(tok->token_text(ids[1]), "\xC4\xA0world");
  EXPECT_EQ(tok->token_to_piece(ids[1]), " world");
  EXPECT_EQ(tok->decode(ids), "hello world");
  EXPECT_FALSE(tok->add_bos());  // BPE does not add BOS unless told
  EXPECT_EQ(tok->encode("hello", true, false).size(), 1u);
  for (const char* s : {"hello hello", "  x\n\n\ty ", "12 123 ü€😀", "'s 're"})
    EXPECT_EQ(tok->decode(tok->encode(s, false, false)), s) << s;
  // Invalid UTF-8 survives byte-level encoding.
  const std::string bad = "a\xFF\xC3(b\xE2\x82";
  EXPECT_EQ(tok->decode(tok->encode(bad, false, false)), bad);
}

TEST(TinyBpe, ParseSpecial) {
  auto tok = test::build(test::tiny_bpe_writer());
  ASSERT_TRUE(tok);
  const TokenId eot = tok->n_vocab() - 1;
  EXPECT_EQ(tok->encode("hello<|endoftext|>", false, true),
            (Ids{tok->encode("hello", false, false)[0], eot}));
  EXPECT_GT(tok->encode("<|endoftext|>", false, false).size(), 1u);
  EXPECT_TRUE(tok->is_eog(eot));
  EXPECT_EQ(tok->decode(Ids{eot}), "");
  EXPECT_EQ(tok->decode(Ids{eot}, true), "<|endoftext|>");
}

TEST(TinyBpe, ByteWithoutTokenIsDroppedNotTurnedIntoEndOfText) {
  // The byte 0xFF ('ÿ') loses its token; the vocabulary's unknown token is <|endoftext|>.
  auto file = test::to_file(test::tiny_bpe_writer());
  ASSERT_TRUE(file.is_ok());
  std::vector<std::string> tokens;
  for (const auto& item : file->find("tokenizer.ggml.tokens")->as_array()->items)
    tokens.push_back(*item.as_string());
  tokens[0xFF] = "[unused]";
  auto w = test::tiny_bpe_writer();
  w.set("tokenizer.ggml.tokens", gguf::Value::of_strings(tokens));
  w.set("tokenizer.ggml.unknown_token_id", gguf::Value::of_u32(static_cast<uint32_t>(tokens.size() - 1)));
  auto tok = test::build(w);
  ASSERT_TRUE(tok);
  const Ids ids = tok->encode(
      "a\xFF"
      "b",
      false, false);
  EXPECT_EQ(tok->decode(ids), "ab");
  EXPECT_EQ(std::count(ids.begin(), ids.end(), tok->n_vocab() - 1), 0);
}

TEST(TinyBpe, Llama3FamilyAddsBosByDefault) {
  auto tok = test::build(test::tiny_bpe_writer("llama-bpe"));
  ASSERT_TRUE(tok);
  EXPECT_TRUE(tok->add_bos());
  EXPECT_EQ(tok->encode("hello", true, false).front(), tok->bos_id());
}

// ---- malformed metadata: a Status, never a crash ----

Status open_status(const gguf::GgufWriter& w) {
  auto file = test::to_file(w);
  if (!file.is_ok()) return file.status();
  auto tok = Tokenizer::from_gguf(*file);
  return tok.status();
}

TEST(TokenizerMetadata, UnknownModelIsUnsupported) {
  auto w = TinySpm().writer();
  w.set("tokenizer.ggml.model", gguf::Value::of_string("rwkv-world"));
  const Status s = open_status(w);
  EXPECT_EQ(s.kind(), ErrorKind::Unsupported);
  EXPECT_NE(s.message().find("rwkv-world"), std::string::npos) << s.message();
}

TEST(TokenizerMetadata, UnknownPreIsUnsupported) {
  const Status s = open_status(test::tiny_bpe_writer("my-new-pre"));
  EXPECT_EQ(s.kind(), ErrorKind::Unsupported);
  EXPECT_NE(s.message().find("my-new-pre"), std::string::npos) << s.message();
}

TEST(TokenizerMetadata, MissingModel) {
  gguf::GgufWriter w;
  w.set("tokenizer.ggml.tokens", gguf::Value::of_strings({"a"}));
  EXPECT_FALSE(open_status(w).is_ok());
}

TEST(TokenizerMetadata, MissingOrBadTokens) {
  gguf::GgufWriter w;
  w.set("tokenizer.ggml.model", gguf::Value::of_string("llama"));
  EXPECT_EQ(open_status(w).kind(), ErrorKind::NotFound);
  w.set("tokenizer.ggml.tokens", gguf::Value::of_i32s({1, 2, 3}));
  EXPECT_EQ(open_status(w).kind(), ErrorKind::InvalidFile);
  w.set("tokenizer.ggml.tokens", gguf::Value::of_strings({}));
  EXPECT_EQ(open_status(w).kind(), ErrorKind::InvalidFile);
  w.set("tokenizer.ggml.tokens", gguf::Value::of_string("not an array"));
  EXPECT_EQ(open_status(w).kind(), ErrorKind::InvalidFile);
}

TEST(TokenizerMetadata, ScoresOrTypesLengthMismatch) {
  TinySpm v;
  auto w = v.writer();
  std::vector<float> scores = v.scores;
  scores.pop_back();
  w.set("tokenizer.ggml.scores", gguf::Value::of_f32s(scores));
  Status s = open_status(w);
  EXPECT_EQ(s.kind(), ErrorKind::InvalidFile);
  EXPECT_NE(s.message().find("tokenizer.ggml.scores"), std::string::npos) << s.message();

  w = v.writer();
  std::vector<int32_t> types = v.types;
  types.push_back(1);
  w.set("tokenizer.ggml.token_type", gguf::Value::of_i32s(types));
  EXPECT_EQ(open_status(w).kind(), ErrorKind::InvalidFile);

  w = v.writer();
  w.set("tokenizer.ggml.scores", gguf::Value::of_strings(v.tokens));
  EXPECT_EQ(open_status(w).kind(), ErrorKind::InvalidFile);
}

TEST(TokenizerMetadata, SpecialIdsOutOfRange) {
  TinySpm v;
  for (const char* key : {"tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id",
                          "tokenizer.ggml.unknown_token_id", "tokenizer.ggml.seperator_token_id"}) {
    auto w = v.writer();
    w.set(key, gguf::Value::of_u32(static_cast<uint32_t>(v.tokens.size())));
    const Status s = open_status(w);
    EXPECT_EQ(s.kind(), ErrorKind::OutOfRange) << key;
    EXPECT_NE(s.message().find(key), std::string::npos) << s.message();
  }
  auto w = v.writer();
  w.set("tokenizer.ggml.bos_token_id", gguf::Value::of_i32(-1));
  EXPECT_FALSE(open_status(w).is_ok());
}

// llama.cpp's tools write 0xFFFFFFFF (-1 as uint32) for "no such token" (its
// llama2.c converter does for the separator and padding ids); that loads as
// no token, on every optional special-token key, and the rest still load.
TEST(TokenizerMetadata, SpecialIdAllOnesMeansNone) {
  TinySpm v;
  for (const char* key : {"tokenizer.ggml.eos_token_id", "tokenizer.ggml.unknown_token_id",
                          "tokenizer.ggml.seperator_token_id", "tokenizer.ggml.eot_token_id",
                          "tokenizer.ggml.eom_token_id"}) {
    SCOPED_TRACE(key);
    auto w = v.writer();
    w.set(key, gguf::Value::of_u32(0xFFFFFFFFu));
    w.set("tokenizer.ggml.padding_token_id", gguf::Value::of_u32(0xFFFFFFFFu));
    auto tok = test::build(w);
    ASSERT_TRUE(tok);
    EXPECT_EQ(tok->encode("hello", true, false), (Ids{TinySpm::kBos, TinySpm::kSpaceHello}));
    if (std::string(key) == "tokenizer.ggml.eos_token_id") {
      EXPECT_EQ(tok->eos_id(), -1);
    }
  }
  auto w = v.writer();  // bos as "none": nothing is prepended even when asked
  w.set("tokenizer.ggml.bos_token_id", gguf::Value::of_u32(0xFFFFFFFFu));
  auto tok = test::build(w);
  ASSERT_TRUE(tok);
  EXPECT_EQ(tok->encode("hello", true, false), Ids{TinySpm::kSpaceHello});
  // One below is an ordinary id and still out of range.
  w.set("tokenizer.ggml.seperator_token_id", gguf::Value::of_u32(0xFFFFFFFEu));
  EXPECT_EQ(open_status(w).kind(), ErrorKind::OutOfRange);
}

TEST(TokenizerMetadata, BadMerges) {
  auto w = test::tiny_bpe_writer();
  w.set("tokenizer.ggml.merges", gguf::Value::of_strings({"h e", "nospace"}));
  Status s = open_status(w);
  EXPECT_EQ(s.kind(), ErrorKind::InvalidFile);
  EXPECT_NE(s.message().find("nospace"), std::string::npos) << s.message();

  w.set("tokenizer.ggml.merges", gguf::Value::of_strings({"h "}));
  EXPECT_EQ(open_status(w).kind(), ErrorKind::InvalidFile);

  // Merges naming tokens that do not exist are ignored, not fatal.
  w.set("tokenizer.ggml.merges", gguf::Value::of_strings({"h e", "q z", "zz yy"}));
  EXPECT_TRUE(open_status(w).is_ok());

  auto missing = test::tiny_bpe_writer();
  missing.set("tokenizer.ggml.merges", gguf::Value::of_u32(3));
  EXPECT_EQ(open_status(missing).kind(), ErrorKind::InvalidFile);
}

TEST(TokenizerMetadata, BpeWithoutMerges) {
  auto w = test::tiny_bpe_writer();
  gguf::GgufWriter copy;
  auto file = test::to_file(w);
  ASSERT_TRUE(file.is_ok());
  for (const auto& [key, value] : file->metadata()) {
    if (key != "tokenizer.ggml.merges") copy.set(key, value);
  }
  EXPECT_EQ(open_status(copy).kind(), ErrorKind::InvalidFile);
}

}  // namespace
}  // namespace tern
