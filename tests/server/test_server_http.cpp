// A real tern server (the real engine on stories260K) on a loopback port,
// driven with raw HTTP: every error path, disconnects, slow readers,
// pipelining, the streaming format and a golden output over HTTP.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <thread>

#include "model/model_fixture.h"
#include "server/live_server.h"
#include "server/raw_client.h"
#include "server/server.h"

namespace tern::server {
namespace {

using nlohmann::json;
using test::fetch;
using test::RawConnection;

class ServerHttp : public SharedServerTest<ServerHttp> {};

const char* kChat = R"({"messages":[{"role":"user","content":"Once upon a time"}],"max_tokens":8,"temperature":0})";

TEST_F(ServerHttp, HealthAndModels) {
  EXPECT_EQ(fetch(port(), "GET", "/health").status, 200);
  const json m = body_json(fetch(port(), "GET", "/v1/models"));
  ASSERT_EQ(m["object"], "list");
  EXPECT_EQ(m["data"][0]["id"], "stories260K");
  EXPECT_EQ(fetch(port(), "GET", "/v1/models/stories260K").status, 200);
  expect_error(fetch(port(), "GET", "/v1/models/other"), 404);
}

TEST_F(ServerHttp, MalformedAndWrongTypesAre400) {
  expect_error(fetch(port(), "POST", "/v1/chat/completions", "{bad"), 400);
  expect_error(fetch(port(), "POST", "/v1/chat/completions", "[1,2]"), 400);
  expect_error(fetch(port(), "POST", "/v1/chat/completions", "{}"), 400, "messages");
  const std::string msgs = R"("messages":[{"role":"user","content":"hi"}])";
  const std::pair<const char*, const char*> cases[] = {
      {R"("temperature":"hot")", "temperature"}, {R"("temperature":3)", "temperature"},
      {R"("max_tokens":-1)", "max_tokens"},      {R"("max_tokens":1.5)", "max_tokens"},
      {R"("n":0)", "n"},                         {R"("n":100)", "n"},
      {R"("top_p":0)", "top_p"},                 {R"("stop":[1,2])", "stop"},
      {R"("stream":"yes")", "stream"},           {R"("top_logprobs":50,"logprobs":true)", "top_logprobs"},
      {R"("presence_penalty":5)", "presence_penalty"}, {R"("tools":[{"type":"function"}])", "tools[0]"},
      {R"("logit_bias":{"x":5})", "logit_bias"}, {R"("seed":"x")", "seed"},
  };
  for (const auto& [field, param] : cases) {
    SCOPED_TRACE(field);
    expect_error(fetch(port(), "POST", "/v1/chat/completions", "{" + msgs + "," + field + "}"), 400, param);
  }
  expect_error(fetch(port(), "POST", "/v1/chat/completions", R"({"messages":[{"role":"king","content":"x"}]})"), 400,
               "messages[0].role");
  expect_error(fetch(port(), "POST", "/v1/chat/completions",
                     R"({"messages":[{"role":"user","content":[{"type":"image_url","image_url":{}}]}]})"),
               400, "messages[0].content");
  expect_error(fetch(port(), "POST", "/v1/completions", R"({"prompt":{"a":1}})"), 400, "prompt");
  expect_error(fetch(port(), "POST", "/v1/completions", R"({"prompt":[1,-2]})"), 400, "prompt");
  expect_error(fetch(port(), "POST", "/v1/completions", R"({"prompt":[100000]})"), 400, "prompt");
  expect_error(fetch(port(), "POST", "/v1/chat/completions",
                     R"({"model":"gpt-9","messages":[{"role":"user","content":"x"}]})"), 404, "model");
}

TEST_F(ServerHttp, InvalidUtf8Is400) {
  std::string body = R"({"prompt":"abc)";
  body += "\xff\xfe";
  body += R"("})";
  expect_error(fetch(port(), "POST", "/v1/completions", body), 400);
}

TEST_F(ServerHttp, OversizedBodyAndHeadersAreRefused) {
  const std::string big(100 * 1024, 'x');
  expect_error(fetch(port(), "POST", "/v1/completions", R"({"prompt":")" + big + R"("})"), 413);
  // Chunked, with no Content-Length: the limit is enforced while reading.
  RawConnection c(port());
  std::string req = "POST /v1/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n";
  for (int i = 0; i < 10; ++i) {
    char len[16];
    std::snprintf(len, sizeof len, "%x\r\n", 16 * 1024);
    req += len + std::string(16 * 1024, 'y') + "\r\n";
  }
  req += "0\r\n\r\n";
  c.send_all(req);
  EXPECT_EQ(test::parse_reply(c.read_to_eof()).status, 413);
  const std::string huge_header = "X-Big: " + std::string(20000, 'h') + "\r\n";
  EXPECT_EQ(fetch(port(), "GET", "/health", "", huge_header).status, 431);
  // Garbage instead of HTTP.
  RawConnection g(port());
  g.send_all("HELLO THERE\r\n\r\n");
  EXPECT_EQ(test::parse_reply(g.read_to_eof()).status, 400);
  // The server is still healthy after all of it.
  EXPECT_EQ(fetch(port(), "GET", "/health").status, 200);
}

TEST_F(ServerHttp, UnknownRoutesAndMethods) {
  expect_error(fetch(port(), "GET", "/v2/everything"), 404);
  expect_error(fetch(port(), "GET", "/v1/chat/completions"), 405);
  expect_error(fetch(port(), "DELETE", "/v1/models"), 405);
}

TEST_F(ServerHttp, PromptOverContextSaysByHowMuch) {
  std::string prompt;
  for (int i = 0; i < 600; ++i) prompt += "Once upon a time ";
  const auto r = fetch(port(), "POST", "/v1/completions", json({{"prompt", prompt}, {"max_tokens", 4}}).dump());
  expect_error(r, 400, "prompt");
  const std::string msg = body_json(r)["error"]["message"];
  EXPECT_NE(msg.find("512"), std::string::npos) << msg;
  EXPECT_NE(msg.find("over"), std::string::npos) << msg;
  const auto r2 = fetch(port(), "POST", "/v1/completions", R"({"prompt":"Once","max_tokens":600})");
  expect_error(r2, 400, "max_tokens");
  EXPECT_EQ(body_json(r2)["error"]["code"], "context_length_exceeded");
}

TEST_F(ServerHttp, GoldenGreedyOutputOverHttp) {
  // BOS alone, greedy, 200 tokens: llama2.c's own expected text.
  const auto r = fetch(port(), "POST", "/v1/completions",
                       R"({"prompt":[1],"max_tokens":200,"temperature":0,"ignore_eos":true})");
  ASSERT_EQ(r.status, 200) << r.body;
  const json j = body_json(r);
  EXPECT_EQ(j["choices"][0]["text"].get<std::string>(), test::golden_text());
  EXPECT_EQ(j["usage"]["prompt_tokens"], 1);
  EXPECT_EQ(j["usage"]["completion_tokens"], 200);
  EXPECT_EQ(j["usage"]["total_tokens"], 201);
}

TEST_F(ServerHttp, StreamEventsFollowTheOpenAiFormat) {
  RawConnection c(port());
  json req = json::parse(kChat);
  req["stream"] = true;
  req["stream_options"] = {{"include_usage", true}};
  c.send_all(test::http_request("POST", "/v1/chat/completions", req.dump()));
  const auto reply = test::parse_reply(c.read_to_eof());
  ASSERT_EQ(reply.status, 200);
  EXPECT_NE(reply.head.find("text/event-stream"), std::string::npos);
  std::vector<json> events;
  bool done = false;
  size_t pos = 0;
  while ((pos = reply.body.find("data: ", pos)) != std::string::npos) {
    const size_t end = reply.body.find("\n\n", pos);
    const std::string data = reply.body.substr(pos + 6, end - pos - 6);
    pos = end;
    if (data == "[DONE]") {
      done = true;
      continue;
    }
    ASSERT_FALSE(done) << "event after [DONE]";
    events.push_back(json::parse(data));
  }
  ASSERT_TRUE(done);
  ASSERT_GE(events.size(), 4u);
  EXPECT_EQ(events.front()["choices"][0]["delta"]["role"], "assistant");
  std::string text;
  for (size_t i = 0; i < events.size(); ++i) {
    EXPECT_EQ(events[i]["id"], events[0]["id"]);
    EXPECT_EQ(events[i]["object"], "chat.completion.chunk");
    if (i + 1 < events.size()) {
      EXPECT_TRUE(events[i]["usage"].is_null());
      const json& ch = events[i]["choices"][0];
      if (i + 2 < events.size()) {
        EXPECT_TRUE(ch["finish_reason"].is_null());
      }
      if (ch["delta"].contains("content")) text += ch["delta"]["content"].get<std::string>();
    }
  }
  EXPECT_EQ(events[events.size() - 2]["choices"][0]["finish_reason"], "length");
  const json& last = events.back();
  EXPECT_TRUE(last["choices"].empty());
  EXPECT_EQ(last["usage"]["completion_tokens"], 8);
  // The same request without streaming gives the same text (greedy).
  const json whole = body_json(fetch(port(), "POST", "/v1/chat/completions", kChat));
  EXPECT_EQ(whole["choices"][0]["message"]["content"].get<std::string>(), text);
}

TEST_F(ServerHttp, KeepAliveAndPipelinedRequestsAreAnsweredInOrder) {
  RawConnection c(port());
  std::string reqs = test::http_request("GET", "/health", "", "", false) +
                     test::http_request("POST", "/tokenize", R"({"prompt":"Once upon"})", "", false) +
                     test::http_request("GET", "/v1/models", "", "", true);
  c.send_all(reqs);
  const std::string raw = c.read_to_eof();
  const size_t a = raw.find("\"status\":\"ok\""), b = raw.find("\"tokens\""), d = raw.find("\"object\":\"list\"");
  ASSERT_NE(a, std::string::npos) << raw;
  ASSERT_NE(b, std::string::npos) << raw;
  ASSERT_NE(d, std::string::npos) << raw;
  EXPECT_LT(a, b);
  EXPECT_LT(b, d);
}

TEST_F(ServerHttp, TokenizeDetokenizeRoundTrip) {
  const json t = body_json(fetch(port(), "POST", "/tokenize", R"({"prompt":"Once upon a time","add_special_tokens":false})"));
  ASSERT_TRUE(t["tokens"].is_array());
  EXPECT_EQ(t["count"], t["tokens"].size());
  const json d = body_json(fetch(port(), "POST", "/detokenize", json({{"tokens", t["tokens"]}}).dump()));
  EXPECT_EQ(d["prompt"], "Once upon a time");
  expect_error(fetch(port(), "POST", "/detokenize", R"({"tokens":[99999]})"), 400, "tokens");
}

const char* kLongStream =
    R"({"prompt":"Once upon a time","max_tokens":480,"ignore_eos":true,"stream":true,"n":16,"temperature":0})";

TEST(ServerDisconnect, DisconnectMidStreamCancelsAndFreesKv) {
  TERN_REQUIRE_STORIES();
  LiveServer s(serial_config());
  {
    RawConnection c(s.port());
    c.send_all(test::http_request("POST", "/v1/completions", kLongStream));
    const std::string first = c.read_until("\"text\":\" ");
    ASSERT_NE(first.find("\"text\""), std::string::npos);
  }  // closed mid-stream
  EXPECT_TRUE(wait_stats(s.port(), [](const json& st) {
    return st["n_running"] == 0 && st["n_waiting"] == 0 && st["kv_blocks_used"] == 0 && st["pending"] == 0;
  }));
  const json st = body_json(fetch(s.port(), "GET", "/stats"));
  EXPECT_LT(st["tokens_generated"].get<int>(), 16 * 480);
  const std::string metrics = fetch(s.port(), "GET", "/metrics").body;
  EXPECT_NE(metrics.find("finished_reason=\"abort\"} 16"), std::string::npos) << metrics;
}

TEST_F(ServerHttp, SlowReaderDoesNotBlockOthers) {
  // A client that never reads its stream: others are still served meanwhile.
  RawConnection slow(port(), 4096);
  slow.send_all(test::http_request(
      "POST", "/v1/completions",
      R"({"prompt":"Once upon a time","max_tokens":480,"ignore_eos":true,"stream":true,"n":4,"logprobs":5})"));
  for (int i = 0; i < 3; ++i) {
    const auto r = fetch(port(), "POST", "/v1/chat/completions", kChat);
    EXPECT_EQ(r.status, 200);
  }
  slow.close();
  EXPECT_TRUE(wait_stats(port(), [](const json& s) { return s["pending"] == 0 && s["kv_blocks_used"] == 0; }));
}

TEST_F(ServerHttp, SeedsReproduceAndNGivesNChoices) {
  const char* req = R"({"messages":[{"role":"user","content":"Tell me a story"}],"max_tokens":24,"n":3,"seed":42,"temperature":1.0})";
  const json a = body_json(fetch(port(), "POST", "/v1/chat/completions", req));
  const json b = body_json(fetch(port(), "POST", "/v1/chat/completions", req));
  ASSERT_EQ(a["choices"].size(), 3u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(a["choices"][i]["index"], i);
    EXPECT_EQ(a["choices"][i]["message"]["content"], b["choices"][i]["message"]["content"]);
  }
  // Different seeds per choice: three identical samples would be a bug.
  EXPECT_FALSE(a["choices"][0]["message"]["content"] == a["choices"][1]["message"]["content"] &&
               a["choices"][1]["message"]["content"] == a["choices"][2]["message"]["content"]);
  EXPECT_EQ(a["usage"]["completion_tokens"], 72);
}

TEST_F(ServerHttp, LogprobsAreConsistent) {
  const json j = body_json(fetch(port(), "POST", "/v1/chat/completions",
                                 R"({"messages":[{"role":"user","content":"Once"}],"max_tokens":6,"temperature":0,
                                     "logprobs":true,"top_logprobs":3})"));
  const json& content = j["choices"][0]["logprobs"]["content"];
  ASSERT_EQ(content.size(), 6u);
  std::string joined;
  for (const json& e : content) {
    ASSERT_EQ(e["top_logprobs"].size(), 3u);
    EXPECT_LE(e["logprob"].get<double>(), 0.0);
    // Greedy: the chosen token is the most likely one.
    EXPECT_DOUBLE_EQ(e["logprob"].get<double>(), e["top_logprobs"][0]["logprob"].get<double>());
    EXPECT_GE(e["top_logprobs"][0]["logprob"].get<double>(), e["top_logprobs"][1]["logprob"].get<double>());
    joined += e["token"].get<std::string>();
  }
  EXPECT_EQ(joined, j["choices"][0]["message"]["content"].get<std::string>());
  // Completions: the legacy shape.
  const json c = body_json(fetch(port(), "POST", "/v1/completions",
                                 R"({"prompt":"Once upon","max_tokens":4,"temperature":0,"logprobs":2})"));
  const json& lp = c["choices"][0]["logprobs"];
  ASSERT_EQ(lp["tokens"].size(), 4u);
  EXPECT_EQ(lp["token_logprobs"].size(), 4u);
  EXPECT_EQ(lp["top_logprobs"][0].size(), 2u);
  EXPECT_EQ(lp["text_offset"][0], 0);
}

TEST_F(ServerHttp, CompletionPromptsEchoAndStop) {
  const json e = body_json(fetch(port(), "POST", "/v1/completions",
                                 R"({"prompt":["Once upon a time","The cat"],"max_tokens":5,"temperature":0,"echo":true})"));
  ASSERT_EQ(e["choices"].size(), 2u);
  EXPECT_EQ(e["choices"][0]["text"].get<std::string>().rfind("Once upon a time", 0), 0u);
  EXPECT_EQ(e["choices"][1]["text"].get<std::string>().rfind("The cat", 0), 0u);
  // Token-id prompts give the same greedy text as the string they encode.
  const json toks = body_json(fetch(port(), "POST", "/tokenize", R"({"prompt":"Once upon a time"})"));
  const json by_ids = body_json(fetch(port(), "POST", "/v1/completions",
                                      json({{"prompt", toks["tokens"]}, {"max_tokens", 6}, {"temperature", 0}}).dump()));
  const json by_text = body_json(fetch(port(), "POST", "/v1/completions",
                                       R"({"prompt":"Once upon a time","max_tokens":6,"temperature":0})"));
  EXPECT_EQ(by_ids["choices"][0]["text"], by_text["choices"][0]["text"]);
  // A stop string that occurs in the greedy text ends the choice before it.
  const std::string full = by_text["choices"][0]["text"];
  const std::string stop = full.substr(full.size() / 2, 3);
  const json s = body_json(fetch(port(), "POST", "/v1/completions",
                                 json({{"prompt", "Once upon a time"}, {"max_tokens", 6}, {"temperature", 0},
                                       {"stop", stop}}).dump()));
  EXPECT_EQ(s["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(s["choices"][0]["text"].get<std::string>().find(stop), std::string::npos);
  EXPECT_EQ(full.rfind(s["choices"][0]["text"].get<std::string>(), 0), 0u);
}

TEST(ServerAuth, KeyIsRequiredWhereDocumented) {
  TERN_REQUIRE_STORIES();
  ServerConfig cfg = base_config();
  cfg.api_key = "sk-test-123";
  LiveServer s(cfg);
  expect_error(fetch(s.port(), "GET", "/v1/models"), 401);
  expect_error(fetch(s.port(), "GET", "/v1/models", "", "Authorization: Bearer sk-test-124\r\n"), 401);
  expect_error(fetch(s.port(), "GET", "/v1/models", "", "Authorization: Bearer sk-test-12\r\n"), 401);
  expect_error(fetch(s.port(), "POST", "/v1/chat/completions", kChat), 401);
  EXPECT_EQ(fetch(s.port(), "GET", "/v1/models", "", "Authorization: Bearer sk-test-123\r\n").status, 200);
  EXPECT_EQ(fetch(s.port(), "GET", "/health").status, 200);  // probes need no key
}

TEST(ServerQueue, FullQueueIs429AndShutdownEndsStreams) {
  TERN_REQUIRE_STORIES();
  ServerConfig cfg = serial_config();
  cfg.max_pending = 16;
  auto s = std::make_unique<LiveServer>(cfg);
  RawConnection c(s->port());
  c.send_all(test::http_request("POST", "/v1/completions", kLongStream));
  ASSERT_NE(c.read_until("\"text\"").find("\"text\""), std::string::npos);
  const auto r = fetch(s->port(), "POST", "/v1/chat/completions", kChat);
  expect_error(r, 429);
  EXPECT_EQ(body_json(r)["error"]["type"], "rate_limit_error");
  EXPECT_NE(r.head.find("Retry-After: 1"), std::string::npos) << r.head;
  // Graceful shutdown with a zero deadline: the stream is cut short with
  // finish_reason "abort" and still ends with [DONE].
  std::thread stopper([&] { s->server().shutdown(0); });
  const std::string rest = c.read_to_eof();
  stopper.join();
  EXPECT_NE(rest.find("\"finish_reason\":\"abort\""), std::string::npos);
  EXPECT_NE(rest.find("data: [DONE]"), std::string::npos);
}

TEST(ServerLoading, HealthIs503UntilTheModelIsLoaded) {
  TERN_REQUIRE_STORIES();
  Server s(base_config());
  ASSERT_TRUE(s.start().is_ok());
  std::thread io([&] { s.run_io(); });
  expect_error(fetch(s.port(), "GET", "/health"), 503);
  expect_error(fetch(s.port(), "POST", "/v1/chat/completions", kChat), 503);
  ASSERT_TRUE(s.load_model().is_ok());
  EXPECT_EQ(fetch(s.port(), "GET", "/health").status, 200);
  s.shutdown(0);
  io.join();
}

}  // namespace
}  // namespace tern::server

namespace tern::server {
namespace {

class ServerTemplate : public SharedServerTest<ServerTemplate> {};

TEST_F(ServerTemplate, ApplyTemplateReturnsWhatChatWouldTokenize) {
  const char* msgs = R"({"messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Hi"}]})";
  const json a = body_json(fetch(port(), "POST", "/apply-template", msgs));
  ASSERT_TRUE(a["prompt"].is_string()) << a.dump();
  const std::string prompt = a["prompt"];
  EXPECT_NE(prompt.find("Be brief."), std::string::npos);
  EXPECT_NE(prompt.find("Hi"), std::string::npos);
  // The same messages through /tokenize give the tokens of that text.
  const json t = body_json(fetch(port(), "POST", "/tokenize", msgs));
  const json pt = body_json(fetch(port(), "POST", "/tokenize",
                                  json{{"prompt", prompt}, {"add_special_tokens", true}}.dump()));
  EXPECT_EQ(t["tokens"], pt["tokens"]);
  // Without the generation prompt the text is a prefix of the one with it.
  const json b = body_json(fetch(port(), "POST", "/apply-template",
      R"({"messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Hi"}],"add_generation_prompt":false})"));
  EXPECT_EQ(prompt.rfind(b["prompt"].get<std::string>(), 0), 0u);
  EXPECT_LT(b["prompt"].get<std::string>().size(), prompt.size());
  expect_error(fetch(port(), "POST", "/apply-template", R"({"prompt":"x"})"), 400, "messages");
  expect_error(fetch(port(), "POST", "/apply-template", R"({"messages":"x"})"), 400, "messages");
}

// Reasoning models' templates read the reasoning a client sends back with an assistant turn, and
// switches such as enable_thinking from chat_template_kwargs.
TEST(ServerTemplateFile, ReasoningContentAndTemplateKwargsReachTheTemplate) {
  if (test::stories_gguf().empty()) GTEST_SKIP();
  ServerConfig cfg = base_config();
  cfg.chat_template =
      "{% for m in messages %}<{{ m.role }}>{% if m.reasoning_content is defined %}[{{ m.reasoning_content }}]{% endif %}"
      "{{ m.content }}{% endfor %}{% if enable_thinking is defined and not enable_thinking %}<nothink>{% endif %}"
      "{% if style is defined %}{{ style | tojson }}{% endif %}";
  LiveServer s(cfg);
  const char* history =
      R"({"messages":[{"role":"user","content":"2+2?"},{"role":"assistant","content":"4","reasoning_content":"add"}],)"
      R"("add_generation_prompt":false)";
  EXPECT_EQ(body_json(fetch(s.port(), "POST", "/apply-template", std::string(history) + "}"))["prompt"],
            "<user>2+2?<assistant>[add]4");
  EXPECT_EQ(body_json(fetch(s.port(), "POST", "/apply-template",
                            std::string(history) + R"(,"chat_template_kwargs":{"enable_thinking":false,"style":{"b":1,"a":2}}})"))["prompt"],
            R"(<user>2+2?<assistant>[add]4<nothink>{"b": 1, "a": 2})");
  const json c = body_json(fetch(s.port(), "POST", "/v1/chat/completions",
      R"({"messages":[{"role":"user","content":"Hi"}],"chat_template_kwargs":{"enable_thinking":false},"max_tokens":2})"));
  EXPECT_EQ(c["usage"]["completion_tokens"], 2) << c.dump();
  const std::pair<const char*, const char*> refused[] = {
      {R"({"messages":[{"role":"user","content":"Hi","reasoning_content":"x"}]})", "messages[0].reasoning_content"},
      {R"({"messages":[{"role":"user","content":"Hi"}],"chat_template_kwargs":[1]})", "chat_template_kwargs"},
      {R"({"messages":[{"role":"user","content":"Hi"}],"chat_template_kwargs":{"messages":[]}})", "chat_template_kwargs"}};
  for (const auto& [body, param] : refused)
    expect_error(fetch(s.port(), "POST", "/v1/chat/completions", body), 400, param);
}

TEST(ServerTemplateFile, AChatTemplateFileReplacesTheModels) {
  if (test::stories_gguf().empty()) GTEST_SKIP();
  ServerConfig cfg = base_config();
  cfg.chat_template = "{% for m in messages %}<{{ m.role }}>{{ m.content }}{% if m.role == 'user' %}{% else %}</s>{% endif %}{% endfor %}"
                      "{% if add_generation_prompt %}<assistant>{% endif %}";
  LiveServer s(cfg);
  const json a = body_json(fetch(s.port(), "POST", "/apply-template", R"({"messages":[{"role":"user","content":"Hi"}]})"));
  EXPECT_EQ(a["prompt"], "<user>Hi<assistant>");
  // continue_final_message leaves the last (assistant) turn open for the model to continue.
  const char* cont =
      R"({"messages":[{"role":"user","content":"Hi"},{"role":"assistant","content":"Once upon"}],"continue_final_message":true})";
  EXPECT_EQ(body_json(fetch(s.port(), "POST", "/apply-template", cont))["prompt"], "<user>Hi<assistant>Once upon");
  const json c = body_json(fetch(s.port(), "POST", "/v1/chat/completions",
      R"({"messages":[{"role":"user","content":"Hi"},{"role":"assistant","content":"Once upon"}],)"
      R"("continue_final_message":true,"add_generation_prompt":false,"max_tokens":4,"temperature":0})"));
  EXPECT_EQ(c["usage"]["completion_tokens"], 4) << c.dump();
  expect_error(fetch(s.port(), "POST", "/v1/chat/completions",
                     R"({"messages":[{"role":"user","content":"Hi"}],"continue_final_message":true})"),
               400, "continue_final_message");
  expect_error(fetch(s.port(), "POST", "/v1/chat/completions",
                     R"({"messages":[{"role":"assistant","content":"x"}],"continue_final_message":true,"add_generation_prompt":true})"),
               400, "continue_final_message");
  ServerConfig bad = base_config();
  bad.chat_template = "{% for m in messages %}";  // never closed
  Server broken(bad);
  ASSERT_TRUE(broken.start().is_ok());
  const Status st = broken.load_model();
  EXPECT_FALSE(st.is_ok());
  EXPECT_NE(st.message().find("--chat-template-file"), std::string::npos);
  broken.shutdown(0);
}

}  // namespace
}  // namespace tern::server
