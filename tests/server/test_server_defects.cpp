// Regression tests for the defects found by probing `tern serve` as an
// attacker or a buggy client would (issue 12): metrics labels, request
// smuggling, HEAD, pipelining, integer overflow, deep JSON, unbounded
// buffering, slow clients, control-token injection and misleading messages.
// Each drove the real server over raw sockets and failed before its fix.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "server/live_server.h"
#include "server/raw_client.h"
#include "core/utf8.h"
#include "sanitized.h"

namespace tern::server {
namespace {

using nlohmann::json;
using test::fetch;
using test::RawConnection;

// Every status line in a raw byte stream, in order.
std::vector<int> statuses(const std::string& raw) {
  std::vector<int> out;
  for (size_t pos = 0; (pos = raw.find("HTTP/1.1 ", pos)) != std::string::npos; pos += 9)
    out.push_back(std::atoi(raw.c_str() + pos + 9));
  return out;
}

int count_of(const std::vector<int32_t>& v, int32_t x) { return static_cast<int>(std::count(v.begin(), v.end(), x)); }

class ServerDefects : public SharedServerTest<ServerDefects> {};

// 1. A refused request used to be counted under its full path: every unique
// path became a new metrics series (unbounded memory, without a key).
TEST(ServerDefectsAuth, MetricsLabelsStayAFixedSet) {
  TERN_REQUIRE_STORIES();
  ServerConfig cfg = base_config();
  cfg.api_key = "sk-test";
  LiveServer s(cfg);
  for (int i = 0; i < 150; ++i) {
    const std::string id = "model-" + std::to_string(i) + std::string(200, 'x');
    EXPECT_EQ(fetch(s.port(), "GET", "/v1/models/" + id).status, 401);
    EXPECT_EQ(fetch(s.port(), "GET", "/v1/models/%ff%fe" + id).status, 401);
    EXPECT_EQ(fetch(s.port(), "PUT", "/v1/models/" + id).status, 405);
    EXPECT_EQ(fetch(s.port(), "GET", "/nothing/" + id).status, 404);
  }
  EXPECT_EQ(fetch(s.port(), "GET", "/v1/models/\xff\xfe").status, 401);
  const std::string metrics = fetch(s.port(), "GET", "/metrics").body;
  EXPECT_TRUE(utf8::is_valid(metrics));
  EXPECT_LT(metrics.size(), 32u * 1024) << "metrics grew with the requests";
  const std::set<std::string> allowed = {"/",           "/health",     "/metrics",         "/stats",
                                         "/tokenize",   "/detokenize", "/v1/models",       "/v1/models/{id}",
                                         "/v1/chat/completions",       "/v1/completions",  "other"};
  int series = 0;
  for (size_t pos = 0; (pos = metrics.find("tern_http_requests_total{endpoint=\"", pos)) != std::string::npos;) {
    pos += 35;
    const std::string label = metrics.substr(pos, metrics.find('"', pos) - pos);
    EXPECT_TRUE(allowed.count(label)) << label;
    ++series;
  }
  EXPECT_GE(series, 3);
  EXPECT_LE(series, 8);
  EXPECT_NE(metrics.find("endpoint=\"/v1/models/{id}\",status=\"401\"} 301"), std::string::npos) << metrics;
}

// 2. A transfer coding other than a lone "chunked" made the body count as
// empty, and it was parsed as the next request (smuggling).
TEST_F(ServerDefects, TransferEncodingOtherThanChunkedIsRefused) {
  const std::string smuggled = "GET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n";
  const char* codings[] = {"gzip", "identity", "chunked, chunked", "gzip, chunked", "chunked\r\nTransfer-Encoding: chunked",
                           "chunked\r\nContent-Length: 38"};
  for (const char* te : codings) {
    SCOPED_TRACE(te);
    RawConnection c(port());
    c.send_all(std::string("POST /tokenize HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: ") +
               te + "\r\n\r\n" + smuggled);
    const std::string raw = c.read_to_eof();
    const std::vector<int> got = statuses(raw);
    ASSERT_EQ(got.size(), 1u) << raw;  // one answer, never one for the smuggled request
    EXPECT_TRUE(got[0] == 400 || got[0] == 501) << raw;
    EXPECT_EQ(raw.find("\"object\":\"list\""), std::string::npos) << raw;
  }
  // HTTP/1.0 with a Transfer-Encoding is faulty framing too.
  RawConnection c(port());
  c.send_all("POST /tokenize HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n");
  EXPECT_EQ(statuses(c.read_to_eof()), std::vector<int>{400});
  // A proper chunked body still works.
  RawConnection ok(port());
  const std::string body = R"({"prompt":"Once"})";
  char len[16];
  std::snprintf(len, sizeof len, "%zx", body.size());
  ok.send_all("POST /tokenize HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n" +
              std::string(len) + "\r\n" + body + "\r\n0\r\n\r\n");
  EXPECT_EQ(test::parse_reply(ok.read_to_eof()).status, 200);
}

// 3. HEAD answers carried the body, which the client then read as the next response.
TEST_F(ServerDefects, HeadAnswersHeadersOnly) {
  RawConnection c(port());
  c.send_all("HEAD / HTTP/1.1\r\nHost: x\r\n\r\nGET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  const std::string raw = c.read_to_eof();
  ASSERT_EQ(statuses(raw), (std::vector<int>{200, 200})) << raw.substr(0, 400);
  const size_t head_end = raw.find("\r\n\r\n");
  EXPECT_EQ(raw.compare(head_end + 4, 9, "HTTP/1.1 "), 0) << "bytes after a HEAD answer's head";
  EXPECT_NE(raw.find("Content-Length: "), std::string::npos);
  EXPECT_NE(raw.find("{\"status\":\"ok\"}"), std::string::npos);
}

std::string completion(const std::string& prompt, const char* version = "HTTP/1.1", bool close = false) {
  const std::string body = json({{"prompt", prompt}, {"max_tokens", 2}, {"temperature", 0}}).dump();
  return std::string("POST /v1/completions ") + version + "\r\nHost: x\r\nContent-Type: application/json\r\n" +
         "Content-Length: " + std::to_string(body.size()) + "\r\n" + (close ? "Connection: close\r\n" : "") + "\r\n" +
         body;
}

// 4. Pipelined requests after which the client closes (or speaks HTTP/1.0), or
// which are followed by garbage, lost every answer but the first.
TEST_F(ServerDefects, PipelinedRequestsAreAllAnsweredBeforeClose) {
  {
    RawConnection c(port());
    c.send_all(completion("Once") + completion("The cat") + completion("Lily", "HTTP/1.1", true));
    const std::string raw = c.read_to_eof();
    EXPECT_EQ(statuses(raw), (std::vector<int>{200, 200, 200})) << raw;
  }
  {
    RawConnection c(port());
    c.send_all(completion("Once") + completion("The cat") + completion("Lily", "HTTP/1.0"));
    const std::string raw = c.read_to_eof();
    EXPECT_EQ(statuses(raw), (std::vector<int>{200, 200, 200})) << raw;
  }
  {
    RawConnection c(port());
    c.send_all(completion("Once") + "HELLO THERE\r\n\r\n");
    const std::string raw = c.read_to_eof();
    EXPECT_EQ(statuses(raw), (std::vector<int>{200, 400})) << raw;
  }
  {
    RawConnection c(port());
    c.send_all(completion("Once") + "GET /health HTTP/1.1\r\nX-Big: " + std::string(20000, 'h') + "\r\n\r\n");
    const std::string raw = c.read_to_eof();
    EXPECT_EQ(statuses(raw), (std::vector<int>{200, 431})) << raw;
  }
}

// 8. n + max_tokens overflowed int: 2147483647 passed the context check.
TEST_F(ServerDefects, MaxTokensNearIntMaxIsAContextError) {
  for (const char* max : {"2147483647", "2147483000", "2147483646"}) {
    SCOPED_TRACE(max);
    const auto r = fetch(port(), "POST", "/v1/completions", std::string(R"({"prompt":"Once","max_tokens":)") + max + "}");
    expect_error(r, 400, "max_tokens");
    EXPECT_EQ(body_json(r)["error"]["code"], "context_length_exceeded");
  }
}

int64_t rss_bytes() {
  std::ifstream in("/proc/self/statm");
  int64_t pages = 0, resident = 0;
  in >> pages >> resident;
  return resident * sysconf(_SC_PAGESIZE);
}

// 9. Deeply nested JSON was parsed in full (hundreds of MB) on the I/O threads.
TEST(ServerDefectsBigBodies, DeepJsonIsRefusedAndMemoryIsGivenBack) {
  TERN_REQUIRE_STORIES();
  ServerConfig cfg = base_config();
  cfg.http.max_body_bytes = 8 << 20;
  LiveServer s(cfg);
  const auto deep = fetch(s.port(), "POST", "/v1/completions", std::string(4 << 20, '['));
  expect_error(deep, 400);
  EXPECT_NE(body_json(deep)["error"]["message"].get<std::string>().find("deeper than 64"), std::string::npos);
  std::string nested = R"({"messages":[{"role":"user","content":)" + std::string(70, '[') + std::string(70, ']') + "}]}";
  EXPECT_NE(body_json(fetch(s.port(), "POST", "/v1/chat/completions", nested))["error"]["message"].get<std::string>().find(
                "deeper than 64"),
            std::string::npos);
  // Big flat bodies are parsed, refused (too long), and their memory given back.
  std::string flat = R"({"prompt":[)";
  while (flat.size() < (7u << 20)) flat += "1,";
  flat += "1]}";
  const int64_t before = rss_bytes();
  // Under a sanitizer, whose quarantine keeps freed memory, once: the refusal, not the memory, is what it checks.
  for (int i = 0; i < (test::kSanitized ? 1 : 4); ++i) {
    const auto r = fetch(s.port(), "POST", "/v1/completions", flat);
    expect_error(r, 400, "prompt");
  }
  EXPECT_EQ(fetch(s.port(), "GET", "/health").status, 200);
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
  // (A sanitizer's allocator keeps freed memory in quarantine by design.)
  EXPECT_LT(rss_bytes() - before, int64_t{96} << 20) << "memory of parsed bodies was kept";
#endif
}

// 10a. Pipelined request bodies were buffered without a total cap (16 read
// ahead per connection, each up to the body limit).
TEST(ServerDefectsBuffers, PipelinedBodiesAreBounded) {
  TERN_REQUIRE_STORIES();
  ServerConfig cfg = serial_config();
  cfg.http.max_body_bytes = 1 << 20;
  cfg.http.max_pipelined_bytes = 256 << 10;
  LiveServer s(cfg);
  // One client keeps the only engine slot busy for a while (the polling below
  // takes ~1 s; a sanitized build generates ~10x slower, so 2 choices do)...
  RawConnection busy(s.port());
  const std::string n = test::kSanitized ? "2" : "16";
  busy.send_all(test::http_request("POST", "/v1/completions",
                                   R"({"prompt":"Once","max_tokens":480,"ignore_eos":true,"n":)" + n + "}"));
  // ...so another's first request waits, while it pipelines 24 MiB of bodies behind it.
  RawConnection c(s.port());
  c.send_all(test::http_request("POST", "/v1/completions", R"({"prompt":"Once","max_tokens":4})", "", false));
  const std::string body = R"({"tokens":[1],"pad":")" + std::string((1 << 20) - 40, 'p') + R"("})";
  const std::string one = "POST /detokenize HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: " +
                          std::to_string(body.size()) + "\r\n\r\n" + body;
  std::string all;
  for (int i = 0; i < 24; ++i) all += one;
  std::thread sender([&] { c.send_all(all); });  // blocks while the server holds back
  int64_t peak = 0;
  for (int i = 0; i < 40; ++i) {
    const json st = body_json(fetch(s.port(), "GET", "/stats"));
    peak = std::max<int64_t>(peak, st["http_buffered_bytes"].get<int64_t>());
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
  }
  // The read-ahead limit, plus at most one body beyond it (the kernel's socket
  // buffers hold the rest: the client's sends are not refused, just not read).
  EXPECT_LT(peak, int64_t{3} << 20);
  // Nothing was lost: every request is answered, in order, once the slot frees.
  const std::string raw = c.read_until("\r\n\r\n{\"prompt\":\"\"}", 60000);
  std::string rest = raw;
  for (int i = 0; i < 300 && statuses(rest).size() < 25; ++i) c.read_some(rest, 200);
  sender.join();
  EXPECT_EQ(statuses(rest), std::vector<int>(25, 200));
  c.close();
  busy.close();
  EXPECT_TRUE(wait_stats(s.port(), [](const json& st) { return st["http_buffered_bytes"] == 0 && st["pending"] == 0; },
                         300));
}

// 10b. Clients that never read their streams held up to 16 MiB each, with no
// server-wide cap.
TEST(ServerDefectsBuffers, NonReadingStreamsAreCutAtTheServerBudget) {
  TERN_REQUIRE_STORIES();
  ServerConfig cfg = base_config();
  cfg.http.max_buffered_bytes = 1 << 20;
  LiveServer s(cfg);
  // ~15 MB of events per stream: more than the kernel's socket buffers absorb
  // (4 MiB), less than the 16 MiB a single stream may hold.
  const char* req = R"({"messages":[{"role":"user","content":"Once"}],"max_tokens":440,"ignore_eos":true,
                        "stream":true,"n":16,"logprobs":true,"top_logprobs":20})";
  // Three streams (two under a sanitizer, where each takes ~20 s to generate).
  const int n_slow = test::kSanitized ? 2 : 3;
  std::vector<std::unique_ptr<RawConnection>> slow;
  for (int i = 0; i < n_slow; ++i) {
    slow.push_back(std::make_unique<RawConnection>(s.port(), 4096));
    slow.back()->send_all(test::http_request("POST", "/v1/chat/completions", req));
  }
  EXPECT_TRUE(wait_stats(s.port(), [](const json& st) { return st["pending"] == 0; }, 300));
  int cut = 0;
  for (auto& c : slow)
    if (c->read_to_eof(20000).find("data: [DONE]") == std::string::npos) ++cut;
  EXPECT_GE(cut, n_slow - 1) << "streams over the server budget must be cut";
  EXPECT_TRUE(wait_stats(s.port(), [](const json& st) { return st["http_buffered_bytes"] == 0; }, 60));
  EXPECT_EQ(fetch(s.port(), "GET", "/health").status, 200);
}

// 11. Slowloris: a head trickling in (or a stalled body) held its slot for the
// 120 s idle timeout, with no 408.
TEST(ServerDefectsSlow, StalledHeadsAndBodiesGet408) {
  TERN_REQUIRE_STORIES();
  ServerConfig cfg = base_config();
  cfg.http.header_timeout_s = 1;
  cfg.http.body_timeout_s = 1;
  LiveServer s(cfg);
  {
    RawConnection c(s.port());
    c.send_all("GET /health HTTP/1.1\r\nHost: x\r\n");
    std::string got;
    for (int i = 0; i < 40 && got.find("\r\n\r\n") == std::string::npos; ++i) {
      c.send_all("X-Trickle: 1\r\n");
      if (!c.read_some(got, 250)) break;
    }
    EXPECT_EQ(test::parse_reply(got + c.read_to_eof(3000)).status, 408) << got;
  }
  {
    RawConnection c(s.port());
    c.send_all("POST /tokenize HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{\"prompt\":");
    EXPECT_EQ(test::parse_reply(c.read_to_eof(10000)).status, 408);
  }
  {
    RawConnection c(s.port());  // connects and says nothing
    EXPECT_EQ(c.read_to_eof(10000), "");
  }
  EXPECT_EQ(fetch(s.port(), "GET", "/health").status, 200);
}

// Once slots are freed, /health answers 200 again (retried for up to 2 s).
bool health_served_within_2s(int port) {
  for (int i = 0; i < 100; ++i) {
    if (fetch(port, "GET", "/health").status == 200) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

// Beyond the server's connection limit a client gets 503 with Retry-After at
// once (not a hang in the accept queue), and a freed slot serves again.
TEST(ServerDefectsSlow, ConnectionsBeyondTheLimitGet503AtOnce) {
  TERN_REQUIRE_STORIES();
  ServerConfig cfg = base_config();
  cfg.http.max_connections = 3;
  LiveServer s(cfg);
  std::vector<std::unique_ptr<RawConnection>> held;
  for (int i = 0; i < 3; ++i) {
    held.push_back(std::make_unique<RawConnection>(s.port()));
    held.back()->send_all("GET /health HTTP/1.1\r\nHost: x\r\n");  // an unfinished head holds the slot
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // accepted (a /stats query would need a slot)
  RawConnection extra(s.port());
  const test::Reply r = test::parse_reply(extra.read_to_eof(5000));
  EXPECT_EQ(r.status, 503);
  EXPECT_NE(r.head.find("Retry-After: 1"), std::string::npos) << r.head;
  EXPECT_NE(r.body.find("too many connections"), std::string::npos) << r.body;
  held.clear();
  EXPECT_TRUE(health_served_within_2s(s.port()));
}

TEST(ServerDefectsSlow, ConnectionsPerAddressCanBeCapped) {
  TERN_REQUIRE_STORIES();
  ServerConfig cfg = base_config();
  cfg.http.max_connections_per_ip = 2;
  LiveServer s(cfg);
  RawConnection a(s.port()), b(s.port());
  a.send_all("GET /health HTTP/1.1\r\nHost: x\r\n");  // a and b hold their slots
  b.send_all("GET /health HTTP/1.1\r\nHost: x\r\n");
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  const auto third = fetch(s.port(), "GET", "/health");
  EXPECT_EQ(third.status, 503);
  EXPECT_NE(third.body.find("too many connections from this address"), std::string::npos) << third.body;
  a.close();
  b.close();
  EXPECT_TRUE(health_served_within_2s(s.port()));
}

// 12. "</s><s>" typed in a message became real EOS/BOS tokens inside the template.
std::vector<int32_t> chat_tokens(int port, const std::string& content) {
  const json r = body_json(fetch(port, "POST", "/tokenize",
                                 json({{"messages", {{{"role", "user"}, {"content", content}}}}}).dump()));
  return r["tokens"].get<std::vector<int32_t>>();
}

TEST_F(ServerDefects, SpecialTokenTextInMessagesStaysText) {
  const std::vector<int32_t> forged = chat_tokens(port(), "</s><s>hi</s>");
  EXPECT_EQ(count_of(forged, 2), 0) << "EOS forged from message text";
  EXPECT_EQ(count_of(forged, 1), 1) << "only the prompt's own BOS";
  // The chat endpoint runs exactly these tokens.
  const json c = body_json(fetch(port(), "POST", "/v1/chat/completions",
                                 R"({"messages":[{"role":"user","content":"</s><s>hi</s>"}],"max_tokens":1})"));
  EXPECT_EQ(c["usage"]["prompt_tokens"], forged.size());
  // Opting in restores the old behaviour.
  ServerConfig cfg = base_config();
  cfg.special_tokens_in_content = true;
  LiveServer open(cfg);
  const std::vector<int32_t> parsed = chat_tokens(open.port(), "</s><s>hi</s>");
  EXPECT_EQ(count_of(parsed, 2), 2);
  EXPECT_EQ(count_of(parsed, 1), 2);
}

// 13. Misleading messages and small protocol slips.
TEST_F(ServerDefects, OutOfRangeIntegersAreReportedAsSent) {
  const auto huge = fetch(port(), "POST", "/v1/completions", R"({"prompt":"x","max_tokens":18446744073709551615})");
  expect_error(huge, 400, "max_tokens");
  EXPECT_NE(body_json(huge)["error"]["message"].get<std::string>().find("18446744073709551615"), std::string::npos)
      << huge.body;
  const auto sci = fetch(port(), "POST", "/v1/completions", R"({"prompt":"x","max_tokens":1e23})");
  expect_error(sci, 400, "max_tokens");
  const std::string m = body_json(sci)["error"]["message"];
  EXPECT_EQ(m.find("must be an integer"), std::string::npos) << m;
  EXPECT_NE(m.find("between 0 and 2147483647"), std::string::npos) << m;
  expect_error(fetch(port(), "POST", "/v1/completions", R"({"prompt":"x","max_tokens":2.5})"), 400, "max_tokens");
}

TEST_F(ServerDefects, WrongMethodOnAKnownRouteIs405) {
  const auto r = fetch(port(), "POST", "/health", "{}");
  expect_error(r, 405);
  EXPECT_NE(r.head.find("Allow: GET, HEAD"), std::string::npos) << r.head;
  expect_error(fetch(port(), "DELETE", "/metrics"), 405);
  const auto g = fetch(port(), "GET", "/v1/completions");
  expect_error(g, 405);
  EXPECT_NE(g.head.find("Allow: POST"), std::string::npos) << g.head;
}

TEST(ServerDefectsAuth, BearerSchemeIsCaseInsensitive) {
  TERN_REQUIRE_STORIES();
  ServerConfig cfg = base_config();
  cfg.api_key = "sk-test";
  LiveServer s(cfg);
  EXPECT_EQ(fetch(s.port(), "GET", "/v1/models", "", "Authorization: bearer sk-test\r\n").status, 200);
  EXPECT_EQ(fetch(s.port(), "GET", "/v1/models", "", "Authorization: BEARER   sk-test\r\n").status, 200);
  EXPECT_EQ(fetch(s.port(), "GET", "/v1/models", "", "Authorization: Basic sk-test\r\n").status, 401);
  EXPECT_EQ(fetch(s.port(), "GET", "/v1/models", "", "Authorization: Bearersk-test\r\n").status, 401);
  // A wrong method is a 405 whatever the key.
  EXPECT_EQ(fetch(s.port(), "POST", "/health", "{}").status, 405);
}

TEST(ServerDefectsKv, KvPoolSmallerThanTheContextIsTheAdvertisedLimit) {
  TERN_REQUIRE_STORIES();
  ServerConfig cfg = base_config();
  cfg.engine.kv_memory_bytes = 8 * 16 * 640;  // 8 blocks of 16 positions (stories260K: 640 B per position)
  LiveServer s(cfg);
  const json stats = body_json(fetch(s.port(), "GET", "/stats"));
  const int positions = stats["kv_blocks_total"].get<int>() * 16;
  ASSERT_LT(positions, 512);
  const json models = body_json(fetch(s.port(), "GET", "/v1/models"));
  EXPECT_EQ(models["data"][0]["max_model_len"], positions);
  const auto r = fetch(s.port(), "POST", "/v1/completions",
                       json({{"prompt", "Once"}, {"max_tokens", positions}}).dump());
  expect_error(r, 400, "max_tokens");
  EXPECT_NE(body_json(r)["error"]["message"].get<std::string>().find("--kv-memory"), std::string::npos) << r.body;
  // Chat with the default max_tokens runs to the pool's end and says "length".
  const json c = body_json(fetch(s.port(), "POST", "/v1/chat/completions",
                                 R"({"messages":[{"role":"user","content":"Once"}],"ignore_eos":true,"temperature":0})"));
  EXPECT_EQ(c["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(c["usage"]["total_tokens"], positions);
}

}  // namespace
}  // namespace tern::server
