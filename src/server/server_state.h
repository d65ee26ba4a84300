// server/server_state.h — what the route handlers share (internal to src/server).
#pragma once

#include <atomic>
#include <boost/asio/thread_pool.hpp>
#include <chrono>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "server/http_server.h"
#include "server/metrics.h"
#include "server/openai_protocol.h"
#include "server/server.h"
#include "tokenizer/chat_template.h"

namespace tern::server {

struct Server::State {
  ServerConfig config;
  std::unique_ptr<Engine> engine;       // set once by load_model(), before `loaded`
  std::atomic<bool> loaded{false};      // engine and the fields below are ready
  std::atomic<bool> draining{false};    // shutting down: new requests get 503
  std::atomic<int> pending{0};          // unfinished engine requests (choices)
  Metrics metrics;
  const HttpServer* http = nullptr;     // the transport, for its buffer figures (outlives every handler)
  std::unique_ptr<boost::asio::thread_pool> workers;  // request parsing and tokenisation
  std::optional<ChatTemplate> chat_template;
  std::string model_name;
  ModelInfo info;
  int64_t created_unix = 0;
  std::chrono::steady_clock::time_point started = std::chrono::steady_clock::now();

  // /stats rates: recent (time, generated, prompt) samples.
  struct RateSample {
    double t_s;
    int64_t generated, prompt;
  };
  std::mutex rate_mu;
  std::deque<RateSample> rate_samples;  // guarded by rate_mu

  double uptime_s() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  }
};

// Answers and counts (the /metrics request counter) in one place.
void send_json(Server::State& st, const Responder& r, const std::string& endpoint, int status, std::string body);
void send_error(Server::State& st, const Responder& r, const std::string& endpoint, const ApiError& e,
                HeaderList headers = {});

// A chat's prompt tokens: rendered with the model's template, special-token
// text in message content kept as text unless the server allows it, BOS added
// unless the template wrote it (generation.cpp).
// The chat template applied to `messages` (the text /apply-template returns).
// continue_final_message: cut after the last message's content, so its turn stays open.
Result<std::string> chat_prompt_text(const Server::State& st, std::vector<ChatMessage> messages,
                                     const ChatPromptOptions& opts);
Result<std::vector<int32_t>> chat_prompt_tokens(const Server::State& st, std::vector<ChatMessage> messages,
                                                const ChatPromptOptions& opts);

// POST /v1/chat/completions and /v1/completions (generation.cpp).
void handle_chat(const std::shared_ptr<Server::State>& st, HttpRequest req, Responder r);
void handle_completion(const std::shared_ptr<Server::State>& st, HttpRequest req, Responder r);
// Takes n slots of the server's queue of unfinished engine requests, or answers 429 (and
// counts the rejection) and returns false when the queue cannot hold them (generation.cpp).
bool reserve_pending(Server::State& st, int n, const Responder& r, const std::string& endpoint);
// POST /v1/embeddings (embeddings.cpp).
void handle_embeddings(const std::shared_ptr<Server::State>& st, HttpRequest req, Responder r);
// The 404 for a request naming another model (generation.cpp); false when it was answered.
bool check_model(Server::State& st, const Responder& r, const std::string& endpoint, const std::string& model);

}  // namespace tern::server
