// The HTTP/SSE client and the runner against a scripted local server.
#include <gtest/gtest.h>

#include <limits>
#include <nlohmann/json.hpp>

#include "loadgen/metrics.h"
#include "loadgen/runner.h"
#include "loadgen/fake_server.h"

namespace tern::loadgen {
namespace {

using test::FakeServer;
using test::http_chunk;

constexpr const char* kSseHeader =
    "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n";

// A completions stream: "Hello" and " world" (the second event split across
// two writes), a usage chunk, [DONE].
std::vector<std::string> good_stream(const std::string&) {
  return {kSseHeader,
          http_chunk(": ping\n\ndata: {\"choices\":[{\"index\":0,\"text\":\"Hello\",\"finish_reason\":null}]}\n\n"),
          http_chunk("data: {\"choices\":[{\"index\":0,\"te"),
          http_chunk("xt\":\" world\",\"finish_reason\":\"length\"}]}\n\n"),
          http_chunk("data: {\"choices\":[],\"usage\":{\"prompt_tokens\":7,\"completion_tokens\":2}}\n\ndata: [DONE]\n\n"),
          "0\r\n\r\n"};
}

RunConfig config_for(const FakeServer& server) {
  RunConfig cfg;
  cfg.url = *parse_http_url(server.url());
  cfg.model = "m";
  cfg.arrivals.rate_per_s = std::numeric_limits<double>::infinity();
  cfg.timeout_s = 10;
  return cfg;
}

std::vector<RequestSpec> specs(size_t n) { return std::vector<RequestSpec>(n, RequestSpec{"once upon", 3, 2}); }

TEST(Client, StreamsTimestampsAndUsage) {
  FakeServer server(good_stream);
  RunConfig cfg = config_for(server);
  cfg.ignore_eos = true;
  const RunResult run = run_requests(cfg, specs(1));
  ASSERT_EQ(run.requests.size(), 1u);
  const CallRecord& c = run.requests[0].call;
  ASSERT_TRUE(c.ok()) << c.error_type << ": " << c.error_message;
  EXPECT_EQ(c.http_status, 200);
  ASSERT_EQ(c.t_chunks.size(), 2u);
  ASSERT_TRUE(c.t_first_token.has_value());
  EXPECT_EQ(*c.t_first_token, c.t_chunks[0]);
  EXPECT_LE(c.t_start, c.t_chunks[0]);
  EXPECT_LE(c.t_chunks[0], c.t_chunks[1]);
  EXPECT_LE(c.t_chunks[1], c.t_end);
  EXPECT_EQ(c.usage_prompt_tokens, 7);
  EXPECT_EQ(c.usage_completion_tokens, 2);
  EXPECT_EQ(c.finish_reason, "length");
  EXPECT_EQ(c.n_output_bytes, 11u);
  EXPECT_GE(run.duration_s, c.t_end - 1e-9);

  const std::string req = server.requests().at(0);
  EXPECT_EQ(req.rfind("POST /v1/completions HTTP/1.1\r\n", 0), 0u) << req;
  const std::string body = req.substr(req.find("\r\n\r\n") + 4);
  const auto j = nlohmann::json::parse(body);
  EXPECT_EQ(j["model"], "m");
  EXPECT_EQ(j["prompt"], "once upon");
  EXPECT_EQ(j["max_tokens"], 2);
  EXPECT_EQ(j["stream"], true);
  EXPECT_EQ(j["stream_options"]["include_usage"], true);
  EXPECT_EQ(j["ignore_eos"], true);
}

TEST(Client, ChatBodyAndEofDelimitedStream) {
  FakeServer server([](const std::string&) -> std::vector<std::string> {
    return {"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n",
            "data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\"}}]}\n\n",
            "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hi\"}}]}\n\n", "data: [DONE]\n\n"};
  });
  RunConfig cfg = config_for(server);
  cfg.chat = true;
  const RunResult run = run_requests(cfg, specs(1));
  const CallRecord& c = run.requests[0].call;
  ASSERT_TRUE(c.ok()) << c.error_type << ": " << c.error_message;
  EXPECT_EQ(c.t_chunks.size(), 1u);  // the role-only delta is not a token
  EXPECT_FALSE(c.usage_completion_tokens.has_value());
  const std::string req = server.requests().at(0);
  EXPECT_EQ(req.rfind("POST /v1/chat/completions HTTP/1.1\r\n", 0), 0u);
  const auto j = nlohmann::json::parse(req.substr(req.find("\r\n\r\n") + 4));
  EXPECT_EQ(j["messages"][0]["role"], "user");
  EXPECT_EQ(j["messages"][0]["content"], "once upon");
  EXPECT_FALSE(j.contains("ignore_eos"));
  EXPECT_EQ(compute_metrics(run, Slo{}, CostConfig{}).total_output_tokens, 1u);  // counted chunks
}

struct ErrorCase {
  const char* name;
  std::vector<std::string> pieces;
  const char* error_type;
  const char* message_part;
};

TEST(Client, ErrorsByType) {
  const std::string err_body = R"({"error":{"message":"queue full","type":"rate_limit_error"}})";
  const std::vector<ErrorCase> cases = {
      {"429", {"HTTP/1.1 429 Too Many Requests\r\nContent-Type: application/json\r\nContent-Length: " +
                   std::to_string(err_body.size()) + "\r\n\r\n" + err_body},
       "http_429", "queue full"},
      {"no [DONE]", {kSseHeader, http_chunk("data: {\"choices\":[{\"text\":\"a\"}]}\n\n"), "0\r\n\r\n"},
       "incomplete_stream", "DONE"},
      {"stream error",
       {kSseHeader, http_chunk("data: {\"error\":{\"message\":\"engine died\",\"type\":\"server_error\"}}\n\n"),
        http_chunk("data: [DONE]\n\n"), "0\r\n\r\n"},
       "stream_error", "engine died"},
      {"garbage chunk", {kSseHeader, http_chunk("data: {oops\n\ndata: [DONE]\n\n"), "0\r\n\r\n"}, "malformed_chunk", "oops"},
      {"cut off", {kSseHeader, http_chunk("data: {\"choices\":[{\"text\":\"a\"}]}\n\n")}, "io_error", ""},
      {"timeout", {kSseHeader, "<hang>"}, "timeout", ""},
  };
  for (const ErrorCase& ec : cases) {
    FakeServer server([&](const std::string&) { return ec.pieces; });
    RunConfig cfg = config_for(server);
    cfg.timeout_s = 0.5;
    const RunResult run = run_requests(cfg, specs(1));
    const CallRecord& c = run.requests[0].call;
    EXPECT_EQ(c.error_type, ec.error_type) << ec.name << ": " << c.error_message;
    EXPECT_NE(c.error_message.find(ec.message_part), std::string::npos) << ec.name << ": " << c.error_message;
    const RunMetrics m = compute_metrics(run, Slo{}, CostConfig{});
    EXPECT_EQ(m.failed, 1u);
    EXPECT_EQ(m.errors.at(ec.error_type), 1u);
  }
}

TEST(Client, ConnectionRefused) {
  uint16_t port = 0;
  {
    FakeServer gone(good_stream);
    port = gone.port();
  }
  RunConfig cfg;
  cfg.url = *parse_http_url("http://127.0.0.1:" + std::to_string(port));
  cfg.arrivals.rate_per_s = std::numeric_limits<double>::infinity();
  const RunResult run = run_requests(cfg, specs(2));
  for (const auto& r : run.requests) EXPECT_EQ(r.call.error_type, "connect");
}

TEST(Runner, ConcurrencyCapHolds) {
  FakeServer server(good_stream);
  RunConfig cfg = config_for(server);
  cfg.max_concurrency = 2;
  size_t last_progress = 0;
  cfg.on_progress = [&](size_t done, size_t total) {
    EXPECT_EQ(total, 8u);
    last_progress = done;
  };
  const RunResult run = run_requests(cfg, specs(8));
  EXPECT_EQ(last_progress, 8u);
  for (const auto& r : run.requests) EXPECT_TRUE(r.call.ok()) << r.call.error_type;
  EXPECT_LE(server.max_in_flight(), 2);
  EXPECT_EQ(server.requests().size(), 8u);
  const RunMetrics m = compute_metrics(run, Slo{}, CostConfig{});
  EXPECT_EQ(m.completed, 8u);
  EXPECT_EQ(m.total_output_tokens, 16u);
  EXPECT_EQ(m.total_input_tokens, 56u);
}

TEST(Runner, PacedArrivalsAllComplete) {
  FakeServer server(good_stream);
  RunConfig cfg = config_for(server);
  cfg.arrivals = {200.0, 1.0, 9};
  const RunResult run = run_requests(cfg, specs(10));
  for (const auto& r : run.requests) EXPECT_TRUE(r.call.ok()) << r.call.error_type;
}

TEST(Runner, MaxDurationCancelsAndStops) {
  FakeServer server([](const std::string&) -> std::vector<std::string> { return {kSseHeader, "<hang>"}; });
  RunConfig cfg = config_for(server);
  cfg.max_concurrency = 1;
  cfg.max_duration_s = 0.3;
  const RunResult run = run_requests(cfg, specs(3));
  EXPECT_TRUE(run.hit_max_duration);
  EXPECT_EQ(run.requests[0].call.error_type, "cancelled");
  EXPECT_FALSE(run.requests[1].sent);
  EXPECT_FALSE(run.requests[2].sent);
  const RunMetrics m = compute_metrics(run, Slo{}, CostConfig{});
  EXPECT_EQ(m.failed, 1u);
  EXPECT_EQ(m.not_sent, 2u);
}

TEST(Client, DiscoverModel) {
  const std::string body = R"({"object":"list","data":[{"id":"stories","object":"model"},{"id":"other"}]})";
  FakeServer server([&](const std::string&) -> std::vector<std::string> {
    return {"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) +
            "\r\n\r\n" + body};
  });
  auto url = parse_http_url(server.url() + "/v1/");
  ASSERT_TRUE(url.is_ok());
  auto id = discover_model(*url, "", 5);
  ASSERT_TRUE(id.is_ok()) << id.status().message();
  EXPECT_EQ(*id, "stories");
  EXPECT_EQ(server.requests().at(0).rfind("GET /v1/models HTTP/1.1\r\n", 0), 0u);
}

TEST(Url, ParsesAndRefuses) {
  auto u = parse_http_url("http://127.0.0.1:8080");
  ASSERT_TRUE(u.is_ok());
  EXPECT_EQ(u->host, "127.0.0.1");
  EXPECT_EQ(u->port, 8080);
  EXPECT_EQ(u->base_path, "");
  auto v = parse_http_url("http://localhost/api/v1");
  ASSERT_TRUE(v.is_ok());
  EXPECT_EQ(v->port, 80);
  EXPECT_EQ(v->base_path, "/api");
  auto six = parse_http_url("http://[::1]:9000/");
  ASSERT_TRUE(six.is_ok());
  EXPECT_EQ(six->host, "::1");
  EXPECT_EQ(six->port, 9000);
  for (const char* bad : {"https://api.example.com", "ftp://x", "127.0.0.1:8080", "http://", "http://h:0",
                          "http://h:99999", "http://user:pw@h:1", "http://h:12ab"}) {
    auto r = parse_http_url(bad);
    EXPECT_EQ(r.status().kind(), ErrorKind::InvalidArgument) << bad;
  }
  EXPECT_NE(parse_http_url("https://x").status().message().find("only plain http://"), std::string::npos);
}

}  // namespace
}  // namespace tern::loadgen
