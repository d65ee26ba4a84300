// A real tern server (the real engine on stories260K) on a loopback port for
// the server tests, and small helpers over its JSON answers.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "model/model_fixture.h"
#include "server/raw_client.h"
#include "server/server.h"

namespace tern::server {

using nlohmann::json;
using test::fetch;
using test::RawConnection;

class LiveServer {
 public:
  explicit LiveServer(ServerConfig cfg) : server_(std::move(cfg)) {
    EXPECT_TRUE(server_.start().is_ok());
    io_ = std::thread([this] { server_.run_io(); });
    const Status s = server_.load_model();
    EXPECT_TRUE(s.is_ok()) << s.message();
  }
  ~LiveServer() {
    server_.shutdown(0);
    io_.join();
  }
  int port() const { return server_.port(); }
  Server& server() { return server_; }
  std::thread& io() { return io_; }

 private:
  Server server_;
  std::thread io_;
};

inline ServerConfig base_config() {
  ServerConfig c;
  c.http.port = 0;
  c.http.max_body_bytes = 64 * 1024;
  c.engine.model_path = test::stories_gguf();
  c.engine.n_threads = 1;
  c.engine.kv_memory_bytes = 8 << 20;
  return c;
}

// One sequence at a time, so a request of 16 long choices takes seconds and is
// certainly still running when the client goes away.
inline ServerConfig serial_config() {
  ServerConfig c = base_config();
  c.engine.max_num_seqs = 1;
  return c;
}

inline json body_json(const test::Reply& r) { return json::parse(r.body, nullptr, false); }

// Polls /stats until pred(stats) holds or max_s pass.
// (A bound, not a timing assertion: sanitizer builds on a loaded machine are
// many times slower, so tests that wait for generation to end give more.)
inline bool wait_stats(int port, const std::function<bool(const json&)>& pred, double max_s = 10.0) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(max_s);
  while (std::chrono::steady_clock::now() < until) {
    const json s = body_json(fetch(port, "GET", "/stats"));
    if (!s.is_discarded() && pred(s)) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

inline void expect_error(const test::Reply& r, int status, const std::string& param = "") {
  EXPECT_EQ(r.status, status) << r.head << "\n" << r.body;
  const json j = body_json(r);
  ASSERT_TRUE(j.is_object()) << r.body;
  ASSERT_TRUE(j.contains("error")) << r.body;
  const json& e = j["error"];
  EXPECT_TRUE(e["message"].is_string() && !e["message"].get<std::string>().empty());
  EXPECT_TRUE(e["type"].is_string());
  EXPECT_TRUE(e.contains("param") && e.contains("code"));
  if (!param.empty()) {
    EXPECT_EQ(e["param"], param) << r.body;
  }
}

// One LiveServer (base_config) shared by the tests of a suite:
// `class MySuite : public SharedServerTest<MySuite> {};`.
template <typename Suite>
class SharedServerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (test::stories_gguf().empty()) return;
    server_ = new LiveServer(base_config());
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }
  void SetUp() override { TERN_REQUIRE_STORIES(); }
  static int port() { return server_->port(); }
  static inline LiveServer* server_ = nullptr;
};

}  // namespace tern::server
