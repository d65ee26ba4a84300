// Tool calls out of model replies (every family's format, streamed in any split), the grammar
// schema that forces a call, and tool-related request fields.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "grammar/json_schema.h"
#include "server/openai_protocol.h"
#include "server/tool_calls.h"

namespace tern::server {
namespace {

using nlohmann::json;

ToolsRequest two_tools(ToolChoice choice = ToolChoice::Auto, bool parallel = true) {
  ToolsRequest t;
  t.tools = {{"get_weather", R"({"type":"object","properties":{"city":{"type":"string"}},"required":["city"]})"},
             {"get_time", ""}};
  t.tools_json = R"([{"type":"function","function":{"name":"get_weather"}},{"type":"function","function":{"name":"get_time"}}])";
  t.choice = choice;
  t.parallel = parallel;
  if (choice == ToolChoice::Named) t.named = "get_weather";
  return t;
}

struct Parsed {
  std::string content;
  std::vector<ParsedToolCall> calls;
};

// The reply fed in pieces of `step` bytes (0 = all at once), then finished.
Parsed parse(const ToolsRequest& tools, std::string_view reply, size_t step = 0) {
  ToolCallParser p(tools);
  Parsed out;
  auto take = [&](ToolCallParser::Delta d) {
    out.content += d.content;
    for (auto& c : d.calls) {
      if (!c.name.empty()) out.calls.push_back(std::move(c));  // a call begins
      else if (!out.calls.empty()) out.calls.back().arguments += c.arguments;
      else ADD_FAILURE() << "a piece of arguments with no call before it";
    }
  };
  if (step == 0) step = reply.size() + 1;
  for (size_t i = 0; i < reply.size(); i += step) take(p.feed(reply.substr(i, step)));
  take(p.finish());
  return out;
}

// Every split of the reply into pieces gives the answer of the whole reply.
Parsed parse_every_way(const ToolsRequest& tools, std::string_view reply) {
  const Parsed whole = parse(tools, reply);
  for (size_t step = 1; step <= 7; ++step) {
    const Parsed split = parse(tools, reply, step);
    EXPECT_EQ(split.content, whole.content) << "step " << step;
    EXPECT_EQ(split.calls.size(), whole.calls.size()) << "step " << step;
    for (size_t k = 0; k < std::min(split.calls.size(), whole.calls.size()); ++k) {
      EXPECT_EQ(split.calls[k].name, whole.calls[k].name);
      EXPECT_EQ(split.calls[k].arguments, whole.calls[k].arguments);
    }
  }
  return whole;
}

TEST(ToolCallParser, HermesTagsAnywhereWithContentAround) {
  const ToolsRequest tools = two_tools();
  Parsed p = parse_every_way(tools,
                             "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": "
                             "\"Paris\"}}\n</tool_call>\n<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n"
                             "</tool_call>\n");
  EXPECT_EQ(p.content, "Let me check.");
  ASSERT_EQ(p.calls.size(), 2u);
  EXPECT_EQ(p.calls[0].name, "get_weather");
  EXPECT_EQ(p.calls[0].arguments, R"({"city":"Paris"})");
  EXPECT_EQ(p.calls[1].name, "get_time");
  EXPECT_EQ(p.calls[1].arguments, "{}");
  // The end-of-turn may come before the closing tag.
  p = parse_every_way(tools, "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {\"tz\": \"UTC\"}}");
  ASSERT_EQ(p.calls.size(), 1u);
  EXPECT_EQ(p.calls[0].arguments, R"({"tz":"UTC"})");
  EXPECT_EQ(p.content, "");
}

TEST(ToolCallParser, Llama3AndMistralJsonReplies) {
  const ToolsRequest tools = two_tools();
  // Llama 3.x: "parameters"; two calls separated by ';'.
  Parsed p = parse_every_way(tools, R"( {"name": "get_weather", "parameters": {"city": "Oslo"}}; {"name": "get_time", "parameters": {}})");
  ASSERT_EQ(p.calls.size(), 2u);
  EXPECT_EQ(p.calls[0].arguments, R"({"city":"Oslo"})");
  EXPECT_EQ(p.content, "");
  // Mistral: an array after [TOOL_CALLS] (a control token, absent from the text); arguments as a string too.
  p = parse_every_way(tools, R"([{"name": "get_weather", "arguments": "{\"city\": \"Rome\"}", "id": "abcdefghi"}])");
  ASSERT_EQ(p.calls.size(), 1u);
  EXPECT_EQ(p.calls[0].name, "get_weather");
  EXPECT_EQ(p.calls[0].arguments, R"({"city":"Rome"})");
  // Argument key order is the model's, not sorted.
  p = parse(tools, R"({"name": "get_time", "arguments": {"z": 1, "a": 2}})");
  ASSERT_EQ(p.calls.size(), 1u);
  EXPECT_EQ(p.calls[0].arguments, R"({"z":1,"a":2})");
}

TEST(ToolCallParser, WhatIsNoCallStaysContentByteForByte) {
  const ToolsRequest tools = two_tools();
  const char* replies[] = {
      "Just text, no calls at all.  ",
      "  {\"answer\": 42}",                                                     // JSON, but no call
      "{\"name\": \"rm_rf\", \"arguments\": {}}",                               // undeclared function
      "{\"name\": \"get_time\", \"arguments\": [1]}",                           // arguments not an object
      "{\"name\": \"get_time\", \"arguments\": {} trailing",                    // broken JSON
      "Sure: <tool_call>\n{\"name\": \"nope\", \"arguments\": {}}\n</tool_call> done",  // bad call in tags
      "<tool_call>not json",                                                    // open tag, no call
      "a < b and <tool_ is not a tag",
      "Text first, then {\"name\": \"get_time\", \"arguments\": {}}",           // JSON after text is content
  };
  for (const char* r : replies) {
    SCOPED_TRACE(r);
    const Parsed p = parse_every_way(tools, r);
    EXPECT_TRUE(p.calls.empty());
    EXPECT_EQ(p.content, r);
  }
}

TEST(ToolCallParser, ParallelFalseKeepsTheFirstCall) {
  const ToolsRequest tools = two_tools(ToolChoice::Auto, /*parallel=*/false);
  const Parsed p = parse(tools, R"([{"name": "get_time", "arguments": {}}, {"name": "get_weather", "arguments": {"city": "x"}}])");
  ASSERT_EQ(p.calls.size(), 1u);
  EXPECT_EQ(p.calls[0].name, "get_time");
}

TEST(ToolCallParser, ForcedChoicesReadTheGrammarsJson) {
  // Arguments are the text as generated (braces and strings in them do not confuse the scan).
  Parsed p = parse_every_way(two_tools(ToolChoice::Named), R"( {"city": "Li}"ma", "x": [{}]})");
  ASSERT_EQ(p.calls.size(), 1u);
  EXPECT_EQ(p.calls[0].name, "get_weather");
  EXPECT_EQ(p.calls[0].arguments, R"({"city": "Li}"ma", "x": [{}]})");
  EXPECT_EQ(p.content, "");
  p = parse_every_way(two_tools(ToolChoice::Required),
                      R"([{"name": "get_time", "arguments": {}}, {"name":"get_weather","arguments":{"city": "B{e]rn"}} ])");
  ASSERT_EQ(p.calls.size(), 2u);
  EXPECT_EQ(p.calls[0].name, "get_time");
  EXPECT_EQ(p.calls[0].arguments, "{}");
  EXPECT_EQ(p.calls[1].name, "get_weather");
  EXPECT_EQ(p.calls[1].arguments, R"({"city": "B{e]rn"})");
  // Cut short (max_tokens) inside the arguments: the call with what was generated, as OpenAI
  // returns it; cut before any call began: the text is returned as content, not lost.
  p = parse(two_tools(ToolChoice::Named), R"({"city": "Li)");
  ASSERT_EQ(p.calls.size(), 1u);
  EXPECT_EQ(p.calls[0].arguments, R"({"city": "Li)");
  p = parse(two_tools(ToolChoice::Required), R"([{"name": "get_ti)");
  EXPECT_TRUE(p.calls.empty());
  EXPECT_EQ(p.content, R"([{"name": "get_ti)");
}

// Forced calls stream as OpenAI's do: the name as soon as it is whole, then the arguments in
// pieces as they are generated — not held back until the call ends.
TEST(ToolCallParser, ForcedCallsStreamTheirArgumentsInPieces) {
  const ToolsRequest tools = two_tools(ToolChoice::Required);  // the parser keeps a reference
  ToolCallParser p(tools);
  EXPECT_TRUE(p.feed(R"([{"name": "get_wea)").calls.empty());
  ToolCallParser::Delta d = p.feed(R"(ther", "arguments": {"ci)");
  ASSERT_EQ(d.calls.size(), 1u);
  EXPECT_EQ(d.calls[0].name, "get_weather");
  EXPECT_EQ(d.calls[0].arguments, R"({"ci)");
  d = p.feed(R"(ty": "Oslo"}}, {"name": "get_time", "argu)");
  ASSERT_EQ(d.calls.size(), 1u);
  EXPECT_EQ(d.calls[0].name, "");
  EXPECT_EQ(d.calls[0].arguments, R"(ty": "Oslo"})");
  d = p.feed(R"(ments": {}}])");
  ASSERT_EQ(d.calls.size(), 1u);
  EXPECT_EQ(d.calls[0].name, "get_time");
  EXPECT_EQ(d.calls[0].arguments, "{}");
  d = p.finish();
  EXPECT_TRUE(d.calls.empty());
  EXPECT_EQ(d.content, "");
  EXPECT_EQ(p.n_calls(), 2);
}

TEST(ToolCallSchema, ForcedSchemasCompileAndSayWhatTheyMean) {
  auto named = forced_tool_schema(two_tools(ToolChoice::Named));
  ASSERT_TRUE(named.is_ok()) << named.status().message();
  EXPECT_EQ(json::parse(named.value()), json::parse(two_tools().tools[0].parameters));
  auto required = forced_tool_schema(two_tools(ToolChoice::Required, /*parallel=*/false));
  ASSERT_TRUE(required.is_ok());
  const json r = json::parse(required.value());
  EXPECT_EQ(r["type"], "array");
  EXPECT_EQ(r["minItems"], 1);
  EXPECT_EQ(r["maxItems"], 1);
  ASSERT_EQ(r["items"]["anyOf"].size(), 2u);
  EXPECT_EQ(r["items"]["anyOf"][0]["properties"]["name"]["const"], "get_weather");
  EXPECT_EQ(r["items"]["anyOf"][1]["properties"]["arguments"], json({{"type", "object"}}));
  EXPECT_FALSE(r.contains("$defs"));
  for (const auto& s : {named.value(), required.value()}) {
    auto g = grammar::json_schema_to_gbnf(s);
    EXPECT_TRUE(g.is_ok()) << g.status().message();
  }
}

TEST(ToolCallSchema, DefsAreHoistedToTheRootAndClashesRefused) {
  ToolsRequest t;
  t.choice = ToolChoice::Required;
  t.tools = {{"a", R"({"type":"object","properties":{"p":{"$ref":"#/$defs/P"}},"$defs":{"P":{"type":"integer"}}})"},
             {"b", R"({"type":"object","properties":{"q":{"$ref":"#/definitions/Q"}},"definitions":{"Q":{"type":"string"}}})"}};
  auto s = forced_tool_schema(t);
  ASSERT_TRUE(s.is_ok()) << s.status().message();
  const json j = json::parse(s.value());
  EXPECT_EQ(j["$defs"]["P"]["type"], "integer");
  EXPECT_EQ(j["$defs"]["Q"]["type"], "string");
  EXPECT_EQ(j["items"]["anyOf"][1]["properties"]["arguments"]["properties"]["q"]["$ref"], "#/$defs/Q");
  EXPECT_TRUE(grammar::json_schema_to_gbnf(s.value()).is_ok());
  t.tools[1].parameters = R"({"type":"object","$defs":{"P":{"type":"string"}}})";
  auto clash = forced_tool_schema(t);
  ASSERT_FALSE(clash.is_ok());
  EXPECT_NE(clash.status().message().find("'P'"), std::string::npos);
}

TEST(ToolCallIds, NineLettersOrDigits) {
  for (int i = 0; i < 50; ++i) {
    const std::string id = new_tool_call_id();
    ASSERT_EQ(id.size(), 9u);
    for (char c : id) EXPECT_TRUE(std::isalnum(static_cast<unsigned char>(c))) << id;
  }
  EXPECT_NE(new_tool_call_id(), new_tool_call_id());
}

TEST(ToolRequests, ToolsChoiceAndHistoryAreRead) {
  auto r = parse_chat_request(R"({"messages":[
      {"role":"user","content":"weather?"},
      {"role":"assistant","content":null,"tool_calls":[{"id":"abcdefghi","type":"function",
        "function":{"name":"get_weather","arguments":"{\"city\": \"Paris\"}"}}]},
      {"role":"tool","tool_call_id":"abcdefghi","name":"get_weather","content":"21C"}],
    "tools":[{"type":"function","function":{"name":"get_weather","description":"d",
      "parameters":{"type":"object","properties":{"z":{"type":"string"},"a":{"type":"string"}}}}}],
    "tool_choice":{"type":"function","function":{"name":"get_weather"}},"parallel_tool_calls":false})");
  ASSERT_TRUE(std::holds_alternative<ChatRequest>(r)) << std::get<ApiError>(r).message;
  const ChatRequest& c = std::get<ChatRequest>(r);
  ASSERT_EQ(c.messages.size(), 3u);
  ASSERT_EQ(c.messages[1].tool_calls.size(), 1u);
  EXPECT_EQ(c.messages[1].tool_calls[0].id, "abcdefghi");
  EXPECT_EQ(c.messages[1].tool_calls[0].name, "get_weather");
  EXPECT_EQ(c.messages[1].tool_calls[0].arguments, R"({"city": "Paris"})");
  EXPECT_EQ(c.messages[2].tool_call_id, "abcdefghi");
  EXPECT_EQ(c.messages[2].name, "get_weather");
  const ToolsRequest& t = c.prompt.tools;
  EXPECT_EQ(t.choice, ToolChoice::Named);
  EXPECT_EQ(t.named, "get_weather");
  EXPECT_FALSE(t.parallel);
  ASSERT_EQ(t.tools.size(), 1u);
  // Key order as sent (z before a), for the template's tojson and the schema's property order.
  EXPECT_LT(t.tools[0].parameters.find("\"z\""), t.tools[0].parameters.find("\"a\""));
  EXPECT_LT(t.tools_json.find("\"type\""), t.tools_json.find("\"function\""));
  EXPECT_TRUE(t.active());
  // tool_choice none: the reply is not parsed (and the prompt carries no tools).
  auto none = parse_chat_request(R"({"messages":[{"role":"user","content":"x"}],"tool_choice":"none",
      "tools":[{"type":"function","function":{"name":"f"}}]})");
  ASSERT_TRUE(std::holds_alternative<ChatRequest>(none));
  EXPECT_FALSE(std::get<ChatRequest>(none).prompt.tools.active());
}

TEST(ToolRequests, BadToolFieldsNameTheirParam) {
  const std::string m = R"("messages":[{"role":"user","content":"x"}])";
  const std::string f = R"("tools":[{"type":"function","function":{"name":"f"}}])";
  const std::pair<std::string, const char*> cases[] = {
      {R"("tools":5)", "tools"},
      {R"("tools":[{"type":"retrieval"}])", "tools[0]"},
      {R"("tools":[{"type":"function","function":{"name":"bad name!"}}])", "tools[0]"},
      {R"("tools":[{"type":"function","function":{"name":"f","parameters":[1]}}])", "tools[0]"},
      {R"("tools":[{"type":"function","function":{"name":"f"}},{"type":"function","function":{"name":"f"}}])", "tools[1]"},
      {f + R"(,"tool_choice":"sometimes")", "tool_choice"},
      {f + R"(,"tool_choice":{"type":"function","function":{"name":"g"}})", "tool_choice"},
      {R"("tool_choice":"required")", "tool_choice"},
      {f + R"(,"tool_choice":"required","response_format":{"type":"json_object"})", "tool_choice"},
      {f + R"(,"parallel_tool_calls":"yes")", "parallel_tool_calls"},
      {R"("functions":[{"name":"f"}])", "functions"},
      {R"("function_call":"auto")", "function_call"},
  };
  for (const auto& [field, param] : cases) {
    SCOPED_TRACE(field);
    auto r = parse_chat_request("{" + m + "," + field + "}");
    ASSERT_TRUE(std::holds_alternative<ApiError>(r));
    EXPECT_EQ(std::get<ApiError>(r).status, 400);
    EXPECT_EQ(std::get<ApiError>(r).param, param);
  }
  auto r = parse_chat_request(R"({"messages":[{"role":"user","content":"x","tool_calls":[]}]})");
  ASSERT_TRUE(std::holds_alternative<ApiError>(r));
  EXPECT_EQ(std::get<ApiError>(r).param, "messages[0].tool_calls");
  r = parse_chat_request(R"({"messages":[{"role":"assistant","tool_calls":[{"id":"x","function":{"arguments":"{}"}}]}]})");
  ASSERT_TRUE(std::holds_alternative<ApiError>(r));
  EXPECT_EQ(std::get<ApiError>(r).param, "messages[0].tool_calls[0]");
}

}  // namespace
}  // namespace tern::server
