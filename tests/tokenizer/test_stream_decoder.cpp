// StreamDecoder: only complete UTF-8 leaves it; U+FFFD only for bytes that can never complete.
#include <gtest/gtest.h>

#include "tokenizer/tokenizer.h"
#include "core/utf8.h"
#include "tokenizer_test_util.h"

namespace tern {
namespace {

using test::byte_token;
using test::TinySpm;

const std::string kFffd = "\xEF\xBF\xBD";

class Stream : public ::testing::Test {
 protected:
  void SetUp() override {
    tok_ = test::build(TinySpm().writer());
    ASSERT_TRUE(tok_);
  }
  std::unique_ptr<Tokenizer> tok_;
};

TEST_F(Stream, MultiByteCharacterAcrossByteTokens) {
  StreamDecoder s(*tok_, true);
  EXPECT_EQ(s.push(TinySpm::kBos), "");
  EXPECT_EQ(s.push(TinySpm::kSpace), "");  // the leading space of the first text token goes
  EXPECT_EQ(s.push(byte_token(0xC3)), "");
  EXPECT_EQ(s.push(byte_token(0xA9)), "\xC3\xA9");  // é
  EXPECT_EQ(s.push(byte_token(0xF0)), "");
  EXPECT_EQ(s.push(byte_token(0x9F)), "");
  EXPECT_EQ(s.push(byte_token(0x98)), "");
  EXPECT_EQ(s.push(byte_token(0x80)), "\xF0\x9F\x98\x80");  // 😀
  EXPECT_EQ(s.push(TinySpm::kSpaceHello), " hello");
  EXPECT_EQ(s.flush(), "");
}

TEST_F(Stream, LeadingSpaceOnlyAtTextStart) {
  StreamDecoder first(*tok_, true);
  EXPECT_EQ(first.push(TinySpm::kSpaceHello), "hello");
  EXPECT_EQ(first.push(TinySpm::kSpaceWorld), " world");
  StreamDecoder later(*tok_, false);
  EXPECT_EQ(later.push(TinySpm::kSpaceHello), " hello");
}

TEST_F(Stream, ControlTokensAreSilent) {
  StreamDecoder s(*tok_, true);
  EXPECT_EQ(s.push(byte_token(0xE2)), "");
  EXPECT_EQ(s.push(TinySpm::kImEnd), "");  // does not break the pending sequence
  EXPECT_EQ(s.push(byte_token(0x82)), "");
  EXPECT_EQ(s.push(byte_token(0xAC)), "\xE2\x82\xAC");  // €
  EXPECT_EQ(s.push(-1), "");
}

TEST_F(Stream, InvalidBytesBecomeReplacementWhenCertain) {
  StreamDecoder s(*tok_, false);
  EXPECT_EQ(s.push(byte_token(0x80)), kFffd);  // a stray continuation byte can never complete
  EXPECT_EQ(s.push(byte_token(0xC3)), "");
  EXPECT_EQ(s.push(byte_token('A')), kFffd + "A");  // C3 followed by ASCII: broken
  EXPECT_EQ(s.push(byte_token(0xFF)), kFffd);
  EXPECT_EQ(s.push(byte_token(0xE0)), "");
  EXPECT_EQ(s.push(byte_token(0x80)), kFffd + kFffd);  // E0 80 would be overlong: both bytes are invalid
  EXPECT_EQ(s.push(byte_token(0xED)), "");
  EXPECT_EQ(s.push(byte_token(0xA0)), kFffd + kFffd);  // a surrogate
}

TEST_F(Stream, FlushReplacesIncompleteTail) {
  StreamDecoder s(*tok_, false);
  EXPECT_EQ(s.push(byte_token(0xE2)), "");
  EXPECT_EQ(s.push(byte_token(0x82)), "");
  EXPECT_EQ(s.flush(), kFffd);
  EXPECT_EQ(s.flush(), "");
  EXPECT_EQ(s.push(TinySpm::kSpaceHello), " hello");
}

TEST(Utf8, ClassifyAndDecode) {
  EXPECT_TRUE(utf8::is_valid("h\xC3\xA9llo \xF0\x9F\x98\x80"));
  EXPECT_FALSE(utf8::is_valid("\xC0\xAF"));          // overlong
  EXPECT_FALSE(utf8::is_valid("\xF4\x90\x80\x80"));  // above U+10FFFF
  EXPECT_FALSE(utf8::is_valid("\xE2\x82"));          // truncated
  const utf8::Decoded d = utf8::decode("\xE2\x82\xAC", 0);
  EXPECT_TRUE(d.valid);
  EXPECT_EQ(d.cp, 0x20ACu);
  EXPECT_EQ(d.n_bytes, 3u);
  EXPECT_EQ(utf8::classify("\xF0\x9F", 0).kind, utf8::Prefix::Incomplete);
  EXPECT_EQ(utf8::classify("\xF0\x9F"
                           "A",
                           0)
                .kind,
            utf8::Prefix::Invalid);
  EXPECT_EQ(utf8::classify("\xF0\x9F"
                           "A",
                           0)
                .n_bytes,
            2u);
  EXPECT_EQ(utf8::encode(0x1F600), "\xF0\x9F\x98\x80");
  EXPECT_EQ(utf8::encode(0xD800), kFffd);
}

}  // namespace
}  // namespace tern
