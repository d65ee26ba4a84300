// SSE framing on split and partial pieces, and OpenAI chunk interpretation.
#include <gtest/gtest.h>

#include "loadgen/sse.h"

namespace tern::loadgen {
namespace {

std::vector<std::string> parse_in_pieces(const std::string& body, size_t piece, bool finish = true) {
  std::vector<std::string> events;
  SseParser p([&](std::string_view d) { events.emplace_back(d); });
  for (size_t i = 0; i < body.size(); i += piece) p.feed(std::string_view(body).substr(i, piece));
  if (finish) p.finish();
  return events;
}

TEST(Sse, EventsSurviveAnySplit) {
  const std::string body =
      ": keep-alive\n\n"
      "data: {\"a\":1}\n\n"
      "data: {\"b\":\"x\\ny\"}\r\n\r\n"
      "event: message\ndata:no-space\n\n"
      "data: line1\ndata: line2\n\n"
      "data: [DONE]\n\n";
  const std::vector<std::string> want = {"{\"a\":1}", "{\"b\":\"x\\ny\"}", "no-space", "line1\nline2", "[DONE]"};
  for (size_t piece = 1; piece <= body.size(); ++piece) EXPECT_EQ(parse_in_pieces(body, piece), want) << piece;
}

TEST(Sse, CountsCommentsAndFlushesAtEnd) {
  std::vector<std::string> events;
  SseParser p([&](std::string_view d) { events.emplace_back(d); });
  p.feed(": ping\n\n: ping\n\ndata: tail");
  EXPECT_TRUE(events.empty());
  EXPECT_EQ(p.n_comments(), 2u);
  p.finish();
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0], "tail");
  // Without finish() an event lacking its blank line is not delivered.
  EXPECT_TRUE(parse_in_pieces("data: half", 3, false).empty());
}

TEST(Sse, UnicodeSplitInsideACharacter) {
  const std::string body = "data: {\"choices\":[{\"text\":\"h\xC3\xA9llo \xE2\x9C\x93\"}]}\n\n";
  for (size_t piece = 1; piece < 8; ++piece) {
    const auto ev = parse_in_pieces(body, piece);
    ASSERT_EQ(ev.size(), 1u);
    EXPECT_EQ(interpret_chunk(ev[0]).content, "h\xC3\xA9llo \xE2\x9C\x93");
  }
}

TEST(Chunk, ChatCompletionsAndUsage) {
  ChunkInfo role = interpret_chunk(
      R"({"id":"x","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant"},"finish_reason":null}],"usage":null})");
  EXPECT_FALSE(role.malformed);
  EXPECT_TRUE(role.content.empty());
  EXPECT_FALSE(role.completion_tokens.has_value());
  ChunkInfo text = interpret_chunk(R"({"choices":[{"index":0,"delta":{"content":"Hi"},"finish_reason":null}]})");
  EXPECT_EQ(text.content, "Hi");
  ChunkInfo last = interpret_chunk(R"({"choices":[{"index":0,"delta":{},"finish_reason":"length"}]})");
  EXPECT_EQ(last.finish_reason, "length");
  ChunkInfo usage =
      interpret_chunk(R"({"choices":[],"usage":{"prompt_tokens":12,"completion_tokens":5,"total_tokens":17}})");
  EXPECT_FALSE(usage.malformed);
  EXPECT_EQ(usage.prompt_tokens, 12);
  EXPECT_EQ(usage.completion_tokens, 5);
}

TEST(Chunk, CompletionsDoneErrorsAndGarbage) {
  EXPECT_EQ(interpret_chunk(R"({"object":"text_completion","choices":[{"index":0,"text":" once"}]})").content, " once");
  EXPECT_TRUE(interpret_chunk("[DONE]").done);
  ChunkInfo err = interpret_chunk(R"({"error":{"message":"boom","type":"server_error","code":null}})");
  EXPECT_TRUE(err.is_error);
  EXPECT_EQ(err.error_type, "server_error");
  EXPECT_EQ(err.error_message, "boom");
  EXPECT_TRUE(interpret_chunk("{not json").malformed);
  EXPECT_TRUE(interpret_chunk("[1,2]").malformed);
  EXPECT_TRUE(interpret_chunk(R"({"choices":"x"})").malformed);
  EXPECT_TRUE(interpret_chunk(R"({"choices":[{"delta":{"content":5}}]})").content.empty());
}

TEST(Chunk, ErrorBodies) {
  std::string type, message;
  read_error_body(R"({"error":{"message":"queue full","type":"rate_limit_error"}})", type, message);
  EXPECT_EQ(type, "rate_limit_error");
  EXPECT_EQ(message, "queue full");
  read_error_body("<html>bad gateway</html>", type, message);
  EXPECT_EQ(type, "");
  EXPECT_EQ(message, "<html>bad gateway</html>");
}

}  // namespace
}  // namespace tern::loadgen
