// server/server.h — `tern serve`: the OpenAI-compatible HTTP front of the engine.
//
// Contract: start() binds the socket and serves at once (GET /health answers
// 503 "loading" until load_model() has built the engine, 200 after); every
// route answers in the OpenAI wire format (see docs/server.md for the routes,
// the extensions and the metric names). Errors are {"error": {...}} bodies
// with the status api_error_from_status() picks. A client that disconnects
// has its engine requests cancelled (their KV blocks are freed at the next
// engine step).
//
// Lifecycle: start() -> run_io() on a thread -> load_model() -> ... ->
// shutdown(deadline): stops accepting, answers new requests 503, lets in-flight
// generations finish until the deadline, cancels the rest (streams end with
// finish_reason "abort"), flushes, stops the I/O threads; run_io() returns.
//
// Threading: handlers run on the I/O threads and never block; the engine's
// outputs are written from its step thread through non-blocking streams.
#pragma once

#include <atomic>
#include <memory>
#include <string>

#include "core/status.h"
#include "server/http_server.h"
#include "tern/engine.h"

namespace tern::server {

struct ServerConfig {
  HttpServerConfig http;
  EngineConfig engine;
  std::string api_key;            // empty = no authentication
  std::string served_model_name;  // empty = general.name, else the file name
  int max_pending = 4096;         // unfinished generations (choices) beyond which requests get 429
  int n_workers = 2;              // threads that parse JSON bodies and tokenise prompts (off the I/O threads)
  // Special-token text (e.g. "</s>", "<|im_end|>") inside chat message content
  // is tokenised as plain text unless this is set: a user cannot forge the
  // template's control tokens.
  bool special_tokens_in_content = false;
  // A Jinja chat template used instead of the model's (--chat-template-file);
  // one that does not parse stops the server at load.
  std::string chat_template;
  // How /v1/embeddings pools hidden states unless a request says (--pooling): the mean over the
  // input's tokens, or the last token's (for models trained to embed with it).
  Pooling pooling = Pooling::Mean;
};

class Server {
 public:
  explicit Server(ServerConfig config);
  ~Server();
  Status start();
  int port() const;
  // Serves until shutdown() finishes (call on its own thread).
  void run_io();
  // Builds the engine (slow); /health turns 200 when it returns ok.
  Status load_model();
  // Graceful stop; returns once every connection is closed.
  void shutdown(double deadline_s);

  struct State;  // shared with the route handlers (server.cpp, generation.cpp)

 private:
  std::shared_ptr<State> state_;
  std::unique_ptr<HttpServer> http_;
};

}  // namespace tern::server
