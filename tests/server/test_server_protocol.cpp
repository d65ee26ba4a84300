// Request parsing, error bodies and the Prometheus exposition, without a socket.
#include <gtest/gtest.h>

#include <algorithm>

#include <nlohmann/json.hpp>

#include "server/http_framing.h"
#include "server/metrics.h"
#include "server/openai_protocol.h"

namespace tern::server {
namespace {

using nlohmann::json;

TEST(OpenAiProtocol, ChatDefaultsFollowOpenAi) {
  auto r = parse_chat_request(R"({"messages":[{"role":"user","content":"hi"}]})");
  ASSERT_TRUE(std::holds_alternative<ChatRequest>(r));
  const auto& c = std::get<ChatRequest>(r);
  EXPECT_EQ(c.params.max_tokens, -1);
  EXPECT_EQ(c.params.n, 1);
  EXPECT_FLOAT_EQ(c.params.sampling.temperature, 1.0f);
  EXPECT_FLOAT_EQ(c.params.sampling.top_p, 1.0f);
  EXPECT_EQ(c.params.sampling.top_k, 0);
  EXPECT_FLOAT_EQ(c.params.sampling.min_p, 0.0f);
  EXPECT_FALSE(c.params.seeded);
  EXPECT_EQ(c.params.n_logprobs, -1);
  auto comp = parse_completion_request(R"({"prompt":"x"})");
  EXPECT_EQ(std::get<CompletionRequest>(comp).params.max_tokens, 16);
}

TEST(OpenAiProtocol, ChatFieldsAreRead) {
  auto r = parse_chat_request(R"({"model":"m","messages":[{"role":"developer","content":[{"type":"text","text":"a"},
      {"type":"text","text":"b"}]},{"role":"assistant","content":null},{"role":"user","content":"q"}],
      "max_completion_tokens":7,"n":2,"stream":true,"stream_options":{"include_usage":true},"temperature":0.5,
      "top_p":0.9,"top_k":5,"min_p":0.1,"seed":-3,"stop":["x","y"],"presence_penalty":1,"frequency_penalty":-1,
      "repetition_penalty":1.1,"logprobs":true,"top_logprobs":4,"priority":-2,"ignore_eos":true,"user":"u",
      "response_format":{"type":"text"},"unknown_field":123})");
  ASSERT_TRUE(std::holds_alternative<ChatRequest>(r)) << std::get<ApiError>(r).message;
  const auto& c = std::get<ChatRequest>(r);
  ASSERT_EQ(c.messages.size(), 3u);
  EXPECT_EQ(c.messages[0].role, "system");
  EXPECT_EQ(c.messages[0].content, "ab");
  EXPECT_EQ(c.messages[1].content, "");
  const auto& p = c.params;
  EXPECT_EQ(p.model, "m");
  EXPECT_EQ(p.max_tokens, 7);
  EXPECT_EQ(p.n, 2);
  EXPECT_TRUE(p.stream && p.include_usage && p.seeded && p.ignore_eos);
  EXPECT_EQ(p.sampling.seed, static_cast<uint64_t>(int64_t{-3}));
  EXPECT_EQ(p.sampling.top_k, 5);
  EXPECT_FLOAT_EQ(p.sampling.repetition_penalty, 1.1f);
  EXPECT_EQ(p.stop, (std::vector<std::string>{"x", "y"}));
  EXPECT_EQ(p.n_logprobs, 4);
  EXPECT_EQ(p.priority, -2);
  EXPECT_EQ(p.user, "u");
}

TEST(OpenAiProtocol, BadFieldsNameTheirParam) {
  const std::pair<const char*, const char*> cases[] = {
      {R"({"messages":"hi"})", "messages"},
      {R"({"messages":[]})", "messages"},
      {R"({"messages":[{"role":"user"}]})", "messages[0].content"},
      {R"({"messages":[{"role":"user","content":"x"}],"top_k":-5})", "top_k"},
      {R"({"messages":[{"role":"user","content":"x"}],"min_p":1.5})", "min_p"},
      {R"({"messages":[{"role":"user","content":"x"}],"repetition_penalty":0})", "repetition_penalty"},
      {R"({"messages":[{"role":"user","content":"x"}],"top_logprobs":2})", "top_logprobs"},
      {R"({"messages":[{"role":"user","content":"x"}],"stop":""})", "stop"},
      {R"({"messages":[{"role":"user","content":"x"}],"stream_options":5})", "stream_options"},
      {R"({"messages":[{"role":"user","content":"x"}],"response_format":{"type":"xml"}})", "response_format"},
      {R"({"messages":[{"role":"user","content":"x"}],"response_format":{"type":"json_schema"}})", "response_format"},
      {R"({"messages":[{"role":"user","content":"x"}],"grammar":5})", "grammar"},
      {R"({"messages":[{"role":"user","content":"x"}],"regex":""})", "regex"},
      {R"({"messages":[{"role":"user","content":"x"}],"logit_bias":{"12":101}})", "logit_bias"},
      {R"({"messages":[{"role":"user","content":"x"}],"logit_bias":{"-3":1}})", "logit_bias"},
      {R"({"messages":[{"role":"user","content":"x"}],"logit_bias":{"7":"x"}})", "logit_bias"},
      {R"({"messages":[{"role":"user","content":"x"}],"logit_bias":[1]})", "logit_bias"},
      {R"({"messages":[{"role":"user","content":"x"}],"grammar":"root ::= \"a\"","regex":"a"})", "response_format"},
      {R"({"messages":[{"role":"user","content":"x"}],"max_tokens":3000000000})", "max_tokens"},
  };
  for (const auto& [body, param] : cases) {
    SCOPED_TRACE(body);
    auto r = parse_chat_request(body);
    ASSERT_TRUE(std::holds_alternative<ApiError>(r));
    EXPECT_EQ(std::get<ApiError>(r).status, 400);
    EXPECT_EQ(std::get<ApiError>(r).param, param);
    EXPECT_FALSE(std::get<ApiError>(r).message.empty());
  }
}

TEST(OpenAiProtocol, ConstraintsFromResponseFormatAndExtensions) {
  auto constraint = [](const char* body) { return std::get<ChatRequest>(parse_chat_request(body)).params.constraint; };
  EXPECT_EQ(constraint(R"({"messages":[{"role":"user","content":"x"}]})").kind, ConstraintKind::None);
  EXPECT_EQ(constraint(R"({"messages":[{"role":"user","content":"x"}],"response_format":{"type":"text"}})").kind,
            ConstraintKind::None);
  EXPECT_EQ(constraint(R"({"messages":[{"role":"user","content":"x"}],"response_format":{"type":"json_object"}})").kind,
            ConstraintKind::JsonObject);
  const OutputConstraint s = constraint(
      R"({"messages":[{"role":"user","content":"x"}],"response_format":{"type":"json_schema","json_schema":{"name":"p","strict":true,"schema":{"type":"object"}}}})");
  EXPECT_EQ(s.kind, ConstraintKind::JsonSchema);
  EXPECT_EQ(s.text, R"({"type":"object"})");
  // The schema keeps the client's key order: generated JSON follows it.
  EXPECT_EQ(constraint(R"({"messages":[{"role":"user","content":"x"}],"json_schema":{"properties":{"z":{},"a":{}}}})").text,
            R"({"properties":{"z":{},"a":{}}})");
  const OutputConstraint g = constraint(R"({"messages":[{"role":"user","content":"x"}],"grammar":"root ::= \"a\""})");
  EXPECT_EQ(g.kind, ConstraintKind::Gbnf);
  EXPECT_EQ(g.text, R"(root ::= "a")");
  EXPECT_EQ(constraint(R"({"messages":[{"role":"user","content":"x"}],"regex":"[0-9]+"})").kind, ConstraintKind::Regex);
  EXPECT_EQ(constraint(R"({"messages":[{"role":"user","content":"x"}],"json_schema":{"type":"string"}})").kind,
            ConstraintKind::JsonSchema);
}

TEST(OpenAiProtocol, LogitBias) {
  auto r = std::get<ChatRequest>(
      parse_chat_request(R"({"messages":[{"role":"user","content":"x"}],"logit_bias":{"12":-100,"400":2.5}})"));
  std::vector<std::pair<int32_t, float>> bias = r.params.logit_bias;
  std::sort(bias.begin(), bias.end());
  EXPECT_EQ(bias, (std::vector<std::pair<int32_t, float>>{{12, -100.0f}, {400, 2.5f}}));
}

TEST(OpenAiProtocol, EmbeddingsRequests) {
  auto r = parse_embeddings_request(R"({"input":["a",[1,2]],"encoding_format":"base64","pooling":"last","normalize":false,"dimensions":64})");
  ASSERT_TRUE(std::holds_alternative<EmbeddingsRequest>(r)) << std::get<ApiError>(r).message;
  const auto& e = std::get<EmbeddingsRequest>(r);
  ASSERT_EQ(e.inputs.size(), 2u);
  EXPECT_EQ(e.inputs[0].text, "a");
  EXPECT_EQ(e.inputs[1].tokens, (std::vector<int32_t>{1, 2}));
  EXPECT_TRUE(e.base64);
  EXPECT_EQ(e.pooling, Pooling::Last);
  EXPECT_FALSE(e.normalize);
  EXPECT_EQ(e.dimensions, 64);
  auto d = std::get<EmbeddingsRequest>(parse_embeddings_request(R"({"input":"x"})"));
  EXPECT_FALSE(d.base64);
  EXPECT_FALSE(d.pooling.has_value());
  EXPECT_TRUE(d.normalize);
  const std::pair<const char*, const char*> cases[] = {
      {R"({})", "input"}, {R"({"input":5})", "input"}, {R"({"input":[]})", "input"}, {R"({"input":[1.5]})", "input"},
      {R"({"input":"x","encoding_format":"int8"})", "encoding_format"}, {R"({"input":"x","pooling":"cls"})", "pooling"},
      {R"({"input":"x","dimensions":0})", "dimensions"}, {R"({"input":"x","normalize":1})", "normalize"},
  };
  for (const auto& [body, param] : cases) {
    SCOPED_TRACE(body);
    auto bad = parse_embeddings_request(body);
    ASSERT_TRUE(std::holds_alternative<ApiError>(bad));
    EXPECT_EQ(std::get<ApiError>(bad).param, param);
  }
  std::string many = R"({"input":[)";
  for (size_t i = 0; i <= kMaxEmbeddingInputs; ++i) many += std::string(i ? "," : "") + "\"x\"";
  EXPECT_TRUE(std::holds_alternative<ApiError>(parse_embeddings_request(many + "]}")));
}

TEST(OpenAiProtocol, CompletionPromptShapes) {
  auto one = std::get<CompletionRequest>(parse_completion_request(R"({"prompt":[1,2,3]})"));
  ASSERT_EQ(one.prompts.size(), 1u);
  EXPECT_TRUE(one.prompts[0].is_tokens);
  EXPECT_EQ(one.prompts[0].tokens, (std::vector<int32_t>{1, 2, 3}));
  auto many = std::get<CompletionRequest>(parse_completion_request(R"({"prompt":["a",[4,5]],"logprobs":3})"));
  ASSERT_EQ(many.prompts.size(), 2u);
  EXPECT_EQ(many.prompts[0].text, "a");
  EXPECT_TRUE(many.prompts[1].is_tokens);
  EXPECT_EQ(many.params.n_logprobs, 3);
  EXPECT_TRUE(std::holds_alternative<ApiError>(parse_completion_request(R"({"prompt":"a","logprobs":9})")));
  // echo + logprobs scores the prompt too (OpenAI's legacy API); prompt_logprobs is vLLM's field.
  auto echo = std::get<CompletionRequest>(parse_completion_request(R"({"prompt":"a","echo":true,"logprobs":2})"));
  EXPECT_EQ(echo.params.prompt_logprobs, 2);
  EXPECT_EQ(std::get<CompletionRequest>(parse_completion_request(R"({"prompt":"a","logprobs":2})")).params.prompt_logprobs, -1);
  auto chat = parse_chat_request(R"({"messages":[{"role":"user","content":"x"}],"prompt_logprobs":5})");
  EXPECT_EQ(std::get<ChatRequest>(chat).params.prompt_logprobs, 5);
  auto bad = parse_chat_request(R"({"messages":[{"role":"user","content":"x"}],"prompt_logprobs":21})");
  ASSERT_TRUE(std::holds_alternative<ApiError>(bad));
  EXPECT_EQ(std::get<ApiError>(bad).param, "prompt_logprobs");
  EXPECT_TRUE(std::holds_alternative<ApiError>(parse_completion_request(R"({"prompt":[]})")));
  EXPECT_TRUE(std::holds_alternative<ApiError>(parse_completion_request(R"({"prompt":[1.5]})")));
}

TEST(OpenAiProtocol, ErrorBodyShapeAndStatusMapping) {
  ApiError e;
  e.message = "bad \"thing\"";
  e.param = "x";
  const json j = json::parse(api_error_body(e));
  EXPECT_EQ(j["error"]["message"], "bad \"thing\"");
  EXPECT_EQ(j["error"]["type"], "invalid_request_error");
  EXPECT_EQ(j["error"]["param"], "x");
  EXPECT_TRUE(j["error"]["code"].is_null());
  EXPECT_EQ(api_error_from_status(error(ErrorKind::OutOfRange, "m")).status, 400);
  EXPECT_EQ(api_error_from_status(error(ErrorKind::NotFound, "m")).status, 404);
  EXPECT_EQ(api_error_from_status(error(ErrorKind::IoError, "m")).status, 500);
}

TEST(Metrics, HistogramBucketsAreCumulative) {
  Histogram h({0.1, 1.0});
  h.observe(0.05);
  h.observe(0.5);
  h.observe(0.7);
  h.observe(5.0);
  std::string out;
  h.render("x", out);
  EXPECT_NE(out.find("x_bucket{le=\"0.10000000000000001\"} 1\n"), std::string::npos) << out;
  EXPECT_NE(out.find("x_bucket{le=\"1\"} 3\n"), std::string::npos) << out;
  EXPECT_NE(out.find("x_bucket{le=\"+Inf\"} 4\n"), std::string::npos) << out;
  EXPECT_NE(out.find("x_count 4\n"), std::string::npos) << out;
  EXPECT_NE(out.find("x_sum 6.25\n"), std::string::npos) << out;
}

TEST(Metrics, RenderHasEveryFamilyWithHelpAndType) {
  Metrics m;
  m.count_request("/v1/completions", 200);
  m.count_request("/v1/completions", 400);
  RequestOutput o;
  o.n_tokens_prompt = 10;
  o.n_tokens_generated = 5;
  o.ttft_ms = 20;
  o.e2e_ms = 100;
  m.observe_generation(o, "length");
  EngineStats s;
  s.kv_blocks_total = 10;
  s.kv_blocks_used = 4;
  const std::string out = m.render(s, "a\"b");
  for (const char* family : {"tern_http_requests_total", "tern_time_to_first_token_seconds",
                             "tern_inter_token_latency_seconds", "tern_e2e_request_latency_seconds",
                             "tern_prompt_tokens_total", "tern_generation_tokens_total", "tern_num_requests_running",
                             "tern_num_requests_waiting", "tern_kv_cache_usage_ratio", "tern_prefix_cache_hit_ratio",
                             "tern_num_preemptions_total"}) {
    EXPECT_NE(out.find(std::string("# TYPE ") + family + " "), std::string::npos) << family;
    EXPECT_NE(out.find(std::string("# HELP ") + family + " "), std::string::npos) << family;
  }
  EXPECT_NE(out.find("tern_kv_cache_usage_ratio{model_name=\"a\\\"b\"} 0.40000000000000002"), std::string::npos);
  EXPECT_NE(out.find("endpoint=\"/v1/completions\",status=\"400\"} 1"), std::string::npos);
  EXPECT_NE(out.find("tern_generation_tokens_total{model_name=\"a\\\"b\"} 5"), std::string::npos);
}

// One series per expert (a label set bounded by expert_count), only for MoE models.
TEST(Metrics, MoeExpertTokensOnePerExpert) {
  Metrics m;
  EngineStats s;
  s.moe_expert_tokens = {7, 0, 12};
  const std::string out = m.render(s, "moe");
  EXPECT_NE(out.find("# TYPE tern_moe_expert_tokens_total counter"), std::string::npos);
  EXPECT_NE(out.find("tern_moe_expert_tokens_total{model_name=\"moe\",expert=\"0\"} 7\n"), std::string::npos) << out;
  EXPECT_NE(out.find("tern_moe_expert_tokens_total{model_name=\"moe\",expert=\"1\"} 0\n"), std::string::npos) << out;
  EXPECT_NE(out.find("tern_moe_expert_tokens_total{model_name=\"moe\",expert=\"2\"} 12\n"), std::string::npos) << out;
  EXPECT_EQ(out.find("expert=\"3\""), std::string::npos);
  EXPECT_EQ(m.render(EngineStats{}, "dense").find("tern_moe_expert_tokens_total"), std::string::npos)
      << "a dense model exports no expert series";
}

TEST(Metrics, RequestLabelsAreAFixedSetAndValidUtf8) {
  EXPECT_STREQ(route_label("/v1/models/anything"), "/v1/models/{id}");
  EXPECT_STREQ(route_label("/v1/completions"), "/v1/completions");
  EXPECT_STREQ(route_label("/v1/completions/x"), "other");
  EXPECT_STREQ(route_label("/\xff"), "other");
  Metrics m;
  m.count_request("/secret/path/\xff\n", 401);
  m.count_request("/v1/models/x", 401);
  m.count_request("/v1/models", 99999);
  const std::string out = m.render(EngineStats{}, "bad\xff\nname");
  EXPECT_EQ(out.find("secret"), std::string::npos) << out;
  EXPECT_NE(out.find("endpoint=\"other\",status=\"401\"} 1"), std::string::npos) << out;
  EXPECT_NE(out.find("endpoint=\"/v1/models\",status=\"0\"} 1"), std::string::npos) << out;
  EXPECT_NE(out.find("model_name=\"bad\xef\xbf\xbd\\nname\""), std::string::npos) << out;
}

TEST(Framing, OnlyALoneChunkedCodingIsAccepted) {
  using V = std::vector<std::string_view>;
  EXPECT_EQ(check_request_framing({}, false, 11).status, 0);
  EXPECT_EQ(check_request_framing({}, true, 10).status, 0);
  EXPECT_EQ(check_request_framing(V{"chunked"}, false, 11).status, 0);
  EXPECT_EQ(check_request_framing(V{" Chunked "}, false, 11).status, 0);
  EXPECT_EQ(check_request_framing(V{"gzip"}, false, 11).status, 400);
  EXPECT_EQ(check_request_framing(V{"identity"}, false, 11).status, 400);
  EXPECT_EQ(check_request_framing(V{"chunked, gzip"}, false, 11).status, 400);
  EXPECT_EQ(check_request_framing(V{"chunked, chunked"}, false, 11).status, 400);
  EXPECT_EQ(check_request_framing(V{"chunked", "chunked"}, false, 11).status, 400);
  EXPECT_EQ(check_request_framing(V{"gzip, chunked"}, false, 11).status, 501);
  EXPECT_EQ(check_request_framing(V{"gzip", "chunked"}, false, 11).status, 501);
  EXPECT_EQ(check_request_framing(V{"chunked"}, true, 11).status, 400);
  EXPECT_EQ(check_request_framing(V{"chunked"}, false, 10).status, 400);
  EXPECT_EQ(check_request_framing(V{","}, false, 11).status, 400);
  EXPECT_NE(check_request_framing(V{"gzip"}, false, 11).message.find("gzip"), std::string::npos);
}

TEST(Protocol, UnavailableIs503) {
  const ApiError e = api_error_from_status(error(ErrorKind::Unavailable, "the engine is shutting down"));
  EXPECT_EQ(e.status, 503);
  EXPECT_EQ(e.type, "server_error");
}

TEST(Protocol, NestingDeeperThanTheLimitIsRefused) {
  const std::string ok = R"({"prompt":"x","stop":)" + std::string(62, '[') + std::string(62, ']') + "}";
  auto a = parse_completion_request(ok);
  ASSERT_TRUE(std::holds_alternative<ApiError>(a));
  EXPECT_EQ(std::get<ApiError>(a).param, "stop");  // parsed; refused for its shape only
  const std::string deep = R"({"prompt":"x","stop":)" + std::string(64, '[') + std::string(64, ']') + "}";
  auto b = parse_completion_request(deep);
  ASSERT_TRUE(std::holds_alternative<ApiError>(b));
  EXPECT_NE(std::get<ApiError>(b).message.find("deeper than 64"), std::string::npos);
  // Brackets inside strings do not count.
  const std::string quoted = R"({"prompt":")" + std::string(200, '[') + R"(\"[[["})";
  EXPECT_TRUE(std::holds_alternative<CompletionRequest>(parse_completion_request(quoted)));
}

}  // namespace
}  // namespace tern::server
