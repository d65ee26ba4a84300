// Speculative decoding behind the OpenAI API: a server started with prompt
// lookup answers greedy completions exactly as one without it, per request
// `spec_k: 0` turns it off, /metrics and /stats count proposals, and the
// `stop_token_ids` extension ends a choice with finish_reason "stop";
// bad values of both fields are 400s naming the field.
#include <gtest/gtest.h>

#include "live_server.h"

namespace tern::server {
namespace {

const char* kGreedy = R"({"prompt":"Once upon a time","max_tokens":80,"temperature":0,"ignore_eos":true)";

std::string text_of(int port, const std::string& extra) {
  const auto r = fetch(port, "POST", "/v1/completions", std::string(kGreedy) + extra + "}");
  EXPECT_EQ(r.status, 200) << r.body;
  const json j = body_json(r);
  return j.is_discarded() ? "" : j["choices"][0]["text"].get<std::string>();
}

TEST(ServerSpec, LookupGivesTheSameTextAndIsCounted) {
  TERN_REQUIRE_STORIES();
  std::string plain_text;
  {
    LiveServer plain(base_config());
    plain_text = text_of(plain.port(), "");
  }
  ServerConfig cfg = base_config();
  cfg.engine.spec = SpecMethod::Ngram;
  cfg.engine.spec_k = 6;
  cfg.engine.spec_adaptive = false;  // proposals whenever lookup has them, whatever the step timings say
  LiveServer s(cfg);
  EXPECT_EQ(text_of(s.port(), ""), plain_text);
  const json after_one = body_json(fetch(s.port(), "GET", "/stats"));
  EXPECT_GT(after_one["spec_proposed"].get<int64_t>(), 0);
  EXPECT_EQ(text_of(s.port(), R"(,"spec_k":0)"), plain_text);
  const json after_two = body_json(fetch(s.port(), "GET", "/stats"));
  EXPECT_EQ(after_two["spec_proposed"], after_one["spec_proposed"]) << "spec_k 0 proposes nothing";
  // A token tree per request (the spec_tree extension): the same text again.
  EXPECT_EQ(text_of(s.port(), R"(,"spec_tree":3)"), plain_text);
  const json after_tree = body_json(fetch(s.port(), "GET", "/stats"));
  EXPECT_GT(after_tree["spec_proposed"].get<int64_t>(), after_two["spec_proposed"].get<int64_t>());
  EXPECT_TRUE(after_tree.contains("spec_branch_accepted"));
  const std::string metrics = fetch(s.port(), "GET", "/metrics").body;
  EXPECT_NE(metrics.find("tern_spec_branch_accepted_tokens_total{"), std::string::npos);
  EXPECT_NE(metrics.find("tern_spec_proposed_tokens_total{"), std::string::npos);
  EXPECT_NE(metrics.find("tern_spec_accepted_tokens_total{"), std::string::npos);
  EXPECT_NE(metrics.find("tern_spec_verify_steps_total{"), std::string::npos);
  EXPECT_NE(metrics.find("tern_spec_draft_seconds_total{"), std::string::npos);
}

TEST(ServerSpec, StopTokenIdsEndAChoice) {
  TERN_REQUIRE_STORIES();
  LiveServer s(base_config());
  // The first token of the greedy continuation (the tokens of prompt + its
  // text past the prompt's own), then that token as a stop.
  const json first = body_json(
      fetch(s.port(), "POST", "/v1/completions", R"({"prompt":"Once upon a time","max_tokens":1,"temperature":0})"));
  auto tokens_of = [&](const std::string& text) {
    return body_json(fetch(s.port(), "POST", "/tokenize", json{{"prompt", text}}.dump()))["tokens"];
  };
  const json both = tokens_of("Once upon a time" + first["choices"][0]["text"].get<std::string>());
  const json prompt = tokens_of("Once upon a time");
  ASSERT_EQ(both.size(), prompt.size() + 1) << both.dump() << " vs " << prompt.dump();
  const int id = both.back().get<int>();
  const auto r = fetch(s.port(), "POST", "/v1/completions",
                       R"({"prompt":"Once upon a time","max_tokens":50,"temperature":0,"stop_token_ids":[)" +
                           std::to_string(id) + "]}");
  ASSERT_EQ(r.status, 200) << r.body;
  const json j = body_json(r);
  EXPECT_EQ(j["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(j["usage"]["completion_tokens"], 1);
  for (const char* bad : {R"("stop_token_ids":[-1])", R"("stop_token_ids":"x")", R"("stop_token_ids":[100000])",
                          R"("spec_k":17)", R"("spec_k":-1)", R"("spec_tree":0)", R"("spec_tree":9)"}) {
    const auto e = fetch(s.port(), "POST", "/v1/completions", R"({"prompt":"a","max_tokens":2,)" + std::string(bad) + "}");
    EXPECT_EQ(e.status, 400) << bad << ": " << e.body;
  }
}

// The kv_evict extension: a request evicts by importance within its budget
// (counted in /stats and /metrics); bad values and a clash with streaming are
// 400s naming the field.
TEST(ServerKvEvict, PerRequestFieldIsHonouredAndChecked) {
  TERN_REQUIRE_STORIES();
  LiveServer s(base_config());
  const auto r = fetch(s.port(), "POST", "/v1/completions",
                       R"({"prompt":"Once upon a time","max_tokens":300,"temperature":0,"ignore_eos":true,)"
                       R"("kv_evict":"h2o:128,32"})");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(body_json(r)["usage"]["completion_tokens"], 300);
  EXPECT_GE(body_json(fetch(s.port(), "GET", "/stats"))["kv_blocks_evicted"].get<int64_t>(), (300 + 5 + 15) / 16 - 9);
  EXPECT_NE(fetch(s.port(), "GET", "/metrics").body.find("tern_kv_blocks_evicted_total{"), std::string::npos);
  for (const char* bad : {R"("kv_evict":"h2o:32,32")", R"("kv_evict":"lru:1,2")", R"("kv_evict":7)",
                          R"("kv_evict":"h2o:128,32","streaming":"4,60")"}) {
    const auto e = fetch(s.port(), "POST", "/v1/completions", R"({"prompt":"a","max_tokens":2,)" + std::string(bad) + "}");
    EXPECT_EQ(e.status, 400) << bad << ": " << e.body;
    EXPECT_NE(e.body.find("evict"), std::string::npos) << bad << ": " << e.body;
  }
}

}  // namespace
}  // namespace tern::server
