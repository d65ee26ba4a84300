// Pre-tokenizer split rules against what their regexes match.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tokenizer/pre_tokenizer.h"

namespace tern {
namespace {

using Words = std::vector<std::string>;

Words split(std::string_view pre, std::string_view text) {
  auto p = PreTokenizer::from_name(pre);
  EXPECT_TRUE(p.is_ok()) << p.status().message();
  if (!p.is_ok()) return {};
  Words words;
  size_t expected_begin = 0;
  for (const ByteRange& r : p->split(text)) {
    EXPECT_EQ(r.begin, expected_begin) << "words must tile the text";
    EXPECT_LT(r.begin, r.end) << "no empty words";
    expected_begin = r.end;
    words.emplace_back(text.substr(r.begin, r.end - r.begin));
  }
  EXPECT_EQ(expected_begin, text.size());
  return words;
}

TEST(PreTokenizer, Gpt2) {
  EXPECT_EQ(split("gpt-2", "Hello world's 123  foo\n"),
            (Words{"Hello", " world", "'s", " 123", " ", " foo", "\n"}));
  EXPECT_EQ(split("gpt-2", "I'VE x"), (Words{"I", "'", "VE", " x"}));  // contractions are case-sensitive
  EXPECT_EQ(split("gpt-2", "a   "), (Words{"a", "   "}));              // trailing whitespace stays whole
  EXPECT_EQ(split("gpt-2", "\t\tb"), (Words{"\t", "\t", "b"}));
  EXPECT_EQ(split("gpt-2", "!!?? ..."), (Words{"!!??", " ..."}));
  EXPECT_EQ(split("gpt-2", ""), Words{});
}

TEST(PreTokenizer, Llama3) {
  EXPECT_EQ(split("llama-bpe", "I'VE got 12345 apples!!\n\n  ok"),
            (Words{"I", "'VE", " got", " ", "123", "45", " apples", "!!\n\n", " ", " ok"}));
  EXPECT_EQ(split("llama-bpe", "\tword"), (Words{"\tword"}));
  EXPECT_EQ(split("llama-bpe", "a \n\n b"), (Words{"a", " \n\n", " b"}));
}

TEST(PreTokenizer, Qwen2SplitsEveryDigit) {
  EXPECT_EQ(split("qwen2", "abc 123"), (Words{"abc", " ", "1", "2", "3"}));
}

TEST(PreTokenizer, StarcoderIsolatesDigitsFirst) {
  EXPECT_EQ(split("starcoder", "x=12 a1"), (Words{"x", "=", "1", "2", " a", "1"}));
}

TEST(PreTokenizer, TekkenAndO200kSplitCase) {
  EXPECT_EQ(split("tekken", "HelloWorld ABC def"), (Words{"Hello", "World", " ABC", " def"}));
  EXPECT_EQ(split("tekken", "don't"), (Words{"don", "'t"}));
  EXPECT_EQ(split("gpt-4o", "don't 12345"), (Words{"don't", " ", "123", "45"}));
}

TEST(PreTokenizer, DeepseekLlm) {
  EXPECT_EQ(split("deepseek-llm", "Hello, \xE4\xB8\x96\xE7\x95\x8C 123\n"),
            (Words{"Hello", ",", " ", "\xE4\xB8\x96\xE7\x95\x8C", " ", "123", "\n"}));
  EXPECT_EQ(split("deepseek-llm", "ab  "), (Words{"ab", "  "}));
}

TEST(PreTokenizer, InvalidUtf8IsKept) {
  const std::string text = "ab\xFF\xC3 cd";
  Words w = split("gpt-2", text);
  std::string joined;
  for (const auto& s : w) joined += s;
  EXPECT_EQ(joined, text);
}

TEST(PreTokenizer, LongWhitespaceRunsAreLinear) {
  const std::string text = std::string(200000, ' ') + "x" + std::string(200000, '\n') + "y";
  for (std::string_view name : PreTokenizer::known_names()) {
    auto p = PreTokenizer::from_name(name);
    ASSERT_TRUE(p.is_ok());
    EXPECT_FALSE(p->split(text).empty()) << name;
  }
}

TEST(PreTokenizer, UnknownNameIsUnsupported) {
  auto p = PreTokenizer::from_name("kimi-k2-not-yet");
  ASSERT_FALSE(p.is_ok());
  EXPECT_EQ(p.status().kind(), ErrorKind::Unsupported);
  EXPECT_NE(p.status().message().find("kimi-k2-not-yet"), std::string::npos);
}

}  // namespace
}  // namespace tern
