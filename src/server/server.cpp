// Routing, authentication and the small endpoints; generation lives in
// generation.cpp.
#include "server/server.h"

#include <malloc.h>

#include <boost/asio/post.hpp>
#include <boost/asio/thread_pool.hpp>
#include <cctype>
#include <filesystem>
#include <new>
#include <nlohmann/json.hpp>
#include <optional>
#include <thread>

#include "core/log.h"
#include "server/playground_asset.h"
#include "server/server_state.h"

namespace tern::server {

using nlohmann::json;

namespace {

constexpr size_t kTrimAfterBodyBytes = size_t{1} << 20;

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

// Equal-time comparison: the time taken does not depend on where the strings differ.
bool constant_time_equal(std::string_view a, std::string_view b) {
  unsigned diff = static_cast<unsigned>(a.size() ^ b.size());
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i]) ^
                                              static_cast<unsigned char>(i < b.size() ? b[i] : 0);
  return diff == 0;
}

// RFC 9110: the auth scheme is case-insensitive and followed by one or more spaces.
bool authorized(const Server::State& st, const HttpRequest& req) {
  if (st.config.api_key.empty()) return true;
  std::string_view h = req.header("authorization");
  constexpr std::string_view kBearer = "bearer";
  if (h.size() <= kBearer.size()) return false;
  for (size_t i = 0; i < kBearer.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(h[i])) != kBearer[i]) return false;
  h.remove_prefix(kBearer.size());
  if (h.front() != ' ') return false;
  while (!h.empty() && h.front() == ' ') h.remove_prefix(1);
  while (!h.empty() && (h.back() == ' ' || h.back() == '\t')) h.remove_suffix(1);
  return constant_time_equal(h, st.config.api_key);
}

json stats_json(Server::State& st) {
  const EngineStats s = st.engine->stats();
  const double now = st.uptime_s();
  double gen_rate = 0, prompt_rate = 0;
  {
    // Rates over the last few seconds of samples taken by the callers of /stats.
    std::lock_guard lock(st.rate_mu);
    auto& q = st.rate_samples;
    q.push_back({now, s.n_tokens_generated, s.n_tokens_prompt});
    while (q.size() > 2 && now - q[1].t_s >= 5.0) q.pop_front();
    if (q.size() >= 2 && now - q.front().t_s > 0.2) {
      const double dt = now - q.front().t_s;
      gen_rate = static_cast<double>(s.n_tokens_generated - q.front().generated) / dt;
      prompt_rate = static_cast<double>(s.n_tokens_prompt - q.front().prompt) / dt;
    }
  }
  return {{"model", st.model_name},
          {"n_running", s.n_running},
          {"n_waiting", s.n_waiting},
          {"n_swapped", s.n_swapped},
          {"kv_blocks_total", s.kv_blocks_total},
          {"kv_blocks_used", s.kv_blocks_used},
          {"kv_usage", s.kv_blocks_total > 0 ? static_cast<double>(s.kv_blocks_used) / s.kv_blocks_total : 0.0},
          {"prefix_hit_rate", s.prefix_hit_rate},
          {"generated_tokens_per_s", gen_rate},
          {"prompt_tokens_per_s", prompt_rate},
          {"requests_finished", s.n_requests_finished},
          {"tokens_generated", s.n_tokens_generated},
          {"n_preemptions", s.n_preemptions},
          {"n_swaps_lost", s.n_swaps_lost},
          {"kv_blocks_evicted", s.kv_blocks_evicted},
          {"spec_proposed", s.spec_proposed},
          {"spec_accepted", s.spec_accepted},
          {"spec_branch_accepted", s.spec_branch_accepted},
          {"pending", st.pending.load()},
          {"http_buffered_bytes", st.http->buffered_bytes()},
          {"http_connections", st.http->n_connections()},
          {"uptime_s", now}};
}

void handle_tokenize(Server::State& st, const HttpRequest& req, const Responder& r) {
  const std::string endpoint = "/tokenize";
  auto parsed = parse_tokenize_request(req.body);
  if (auto* e = std::get_if<ApiError>(&parsed)) return send_error(st, r, endpoint, *e);
  TokenizeRequest& t = std::get<TokenizeRequest>(parsed);
  std::vector<int32_t> tokens;
  if (!t.messages.empty()) {
    // Exactly the tokens /v1/chat/completions would run.
    auto chat = chat_prompt_tokens(st, std::move(t.messages), t.chat);
    if (!chat.is_ok()) return send_error(st, r, endpoint, api_error_from_status(chat.status(), "messages"));
    tokens = std::move(chat).value();
  } else {
    tokens = st.engine->tokenize(t.prompt, t.add_special);
  }
  send_json(st, r, endpoint, 200,
            dump({{"tokens", tokens}, {"count", tokens.size()}, {"max_model_len", st.info.n_ctx}}));
}

// POST /apply-template {"messages": [...], "add_generation_prompt"?: true, "continue_final_message"?: false}:
// the prompt text /v1/chat/completions would run for these messages.
void handle_apply_template(Server::State& st, const HttpRequest& req, const Responder& r) {
  const std::string endpoint = "/apply-template";
  auto parsed = parse_tokenize_request(req.body);
  if (auto* e = std::get_if<ApiError>(&parsed)) return send_error(st, r, endpoint, *e);
  TokenizeRequest& t = std::get<TokenizeRequest>(parsed);
  if (t.messages.empty()) {
    ApiError e;
    e.param = "messages";
    e.message = "'messages' (an array of chat messages) is required";
    return send_error(st, r, endpoint, e);
  }
  auto text = chat_prompt_text(st, std::move(t.messages), t.chat);
  if (!text.is_ok()) return send_error(st, r, endpoint, api_error_from_status(text.status(), "messages"));
  send_json(st, r, endpoint, 200, dump({{"prompt", text.value()}}));
}

void handle_detokenize(Server::State& st, const HttpRequest& req, const Responder& r) {
  const std::string endpoint = "/detokenize";
  auto parsed = parse_detokenize_request(req.body);
  if (auto* e = std::get_if<ApiError>(&parsed)) return send_error(st, r, endpoint, *e);
  const auto& tokens = std::get<std::vector<int32_t>>(parsed);
  for (int32_t t : tokens) {
    if (t >= st.info.n_vocab) {
      ApiError e;
      e.param = "tokens";
      e.message = "token id " + std::to_string(t) + " is outside the vocabulary (size " +
                  std::to_string(st.info.n_vocab) + ")";
      return send_error(st, r, endpoint, e);
    }
  }
  send_json(st, r, endpoint, 200, dump({{"prompt", st.engine->detokenize(tokens)}}));
}

json model_card(const Server::State& st) {
  return {{"id", st.model_name}, {"object", "model"}, {"created", st.created_unix}, {"owned_by", "tern"},
          {"root", st.model_name}, {"max_model_len", st.info.n_ctx}};
}

// The routes: metrics label, methods, and whether they need the API key.
struct Route {
  const char* label;
  bool get = false, post = false;
  bool open = false;  // no API key needed (probes, scrapers, the page itself)
};

std::optional<Route> find_route(const std::string& path) {
  static const std::pair<const char*, Route> kRoutes[] = {
      {"/", {"/", true, false, true}},
      {"/health", {"/health", true, false, true}},
      {"/metrics", {"/metrics", true, false, true}},
      {"/stats", {"/stats", true, false, false}},
      {"/tokenize", {"/tokenize", false, true, false}},
      {"/detokenize", {"/detokenize", false, true, false}},
      {"/apply-template", {"/apply-template", false, true, false}},
      {"/v1/models", {"/v1/models", true, false, false}},
      {"/v1/chat/completions", {"/v1/chat/completions", false, true, false}},
      {"/v1/completions", {"/v1/completions", false, true, false}},
      {"/v1/embeddings", {"/v1/embeddings", false, true, false}},
  };
  for (const auto& [p, r] : kRoutes)
    if (path == p) return r;
  if (path.rfind("/v1/models/", 0) == 0) return Route{"/v1/models/{id}", true, false, false};
  return std::nullopt;
}

// Parsing JSON and tokenising can take long for big bodies: the routes that do
// it run on the worker pool, so the I/O threads keep answering (/health too).
// After a big body the heap holds its parse tree's pages: give them back.
// A request whose parsing or tokenizing runs out of memory gets 503 (the
// exception would otherwise end the process; a Responder answers once, so a
// handler that already answered is not answered twice).
template <typename Fn>
void on_workers(const std::shared_ptr<Server::State>& sp, size_t body_bytes, Responder r, const char* label, Fn fn) {
  boost::asio::post(*sp->workers, [sp, body_bytes, r = std::move(r), label, fn = std::move(fn)]() mutable {
    try {
      fn();
    } catch (const std::bad_alloc&) {
      ApiError e;
      e.status = 503;
      e.type = "server_error";
      e.message = "the server ran out of memory for this request; retry later";
      send_error(*sp, r, label, e);
    }
    if (body_bytes >= kTrimAfterBodyBytes) malloc_trim(0);
  });
}

void route(const std::shared_ptr<Server::State>& sp, HttpRequest req, Responder r) {
  Server::State& st = *sp;
  const std::string& path = req.path;
  const std::optional<Route> rt = find_route(path);
  const char* label = rt ? rt->label : "other";
  auto err = [&](int status, const char* type, std::string message) {
    ApiError e;
    e.status = status;
    e.type = type;
    e.message = std::move(message);
    send_error(st, r, label, e);
  };
  if (!rt) return err(404, "not_found_error", "no route for " + req.method + " " + path);
  const bool get = req.method == "GET" || req.method == "HEAD";
  const bool post = req.method == "POST";
  if (!(get && rt->get) && !(post && rt->post)) {
    ApiError e;
    e.status = 405;
    e.message = "method " + req.method + " is not allowed on " + path + "; use " + (rt->get ? "GET" : "POST");
    return send_error(st, r, label, e, {{"Allow", rt->get ? "GET, HEAD" : "POST"}});
  }
  if (path == "/health") {
    if (!st.loaded.load()) return err(503, "server_error", "the model is loading");
    if (st.draining.load()) return err(503, "server_error", "the server is shutting down");
    return send_json(st, r, label, 200, R"({"status":"ok"})");
  }
  if (path == "/") {
    HttpResponse resp;
    resp.content_type = "text/html; charset=utf-8";
    resp.body = std::string(kPlaygroundHtml);
    st.metrics.count_request(label, 200);
    return r.respond(std::move(resp));
  }
  if (st.draining.load()) return err(503, "server_error", "the server is shutting down");
  if (!rt->open && !authorized(st, req))
    return err(401, "authentication_error", "missing or wrong API key: send 'Authorization: Bearer <key>'");
  if (!st.loaded.load()) return err(503, "server_error", "the model is loading; retry shortly");
  if (path == "/metrics") {
    HttpResponse resp;
    resp.content_type = "text/plain; version=0.0.4; charset=utf-8";
    st.metrics.count_request(label, 200);
    resp.body = st.metrics.render(st.engine->stats(), st.model_name, st.http->buffered_bytes(), st.http->n_connections());
    return r.respond(std::move(resp));
  }
  if (path == "/v1/models") return send_json(st, r, label, 200, dump({{"object", "list"}, {"data", {model_card(st)}}}));
  if (rt->label == std::string_view("/v1/models/{id}")) {
    if (path.substr(11) != st.model_name) return err(404, "not_found_error", "no model '" + path.substr(11) + "'");
    return send_json(st, r, label, 200, dump(model_card(st)));
  }
  if (path == "/stats") return send_json(st, r, label, 200, dump(stats_json(st)));
  const size_t body_bytes = req.body.size();
  on_workers(sp, body_bytes, r, label, [sp, req = std::move(req), r]() mutable {
    const std::string& p = req.path;
    if (p == "/v1/chat/completions") return handle_chat(sp, std::move(req), std::move(r));
    if (p == "/v1/completions") return handle_completion(sp, std::move(req), std::move(r));
    if (p == "/v1/embeddings") return handle_embeddings(sp, std::move(req), std::move(r));
    if (p == "/tokenize") return handle_tokenize(*sp, req, r);
    if (p == "/apply-template") return handle_apply_template(*sp, req, r);
    handle_detokenize(*sp, req, r);
  });
}

}  // namespace

void send_json(Server::State& st, const Responder& r, const std::string& endpoint, int status, std::string body) {
  st.metrics.count_request(endpoint, status);
  HttpResponse resp;
  resp.status = status;
  resp.body = std::move(body);
  r.respond(std::move(resp));
}

void send_error(Server::State& st, const Responder& r, const std::string& endpoint, const ApiError& e,
                HeaderList headers) {
  HttpResponse resp;
  resp.status = e.status;
  resp.body = api_error_body(e);
  resp.headers = std::move(headers);
  if (e.status == 401) resp.headers.emplace_back("WWW-Authenticate", "Bearer");
  if (e.status == 503 || e.status == 429) resp.headers.emplace_back("Retry-After", "1");
  st.metrics.count_request(endpoint, e.status);
  r.respond(std::move(resp));
}

Server::Server(ServerConfig config) : state_(std::make_shared<State>()) {
  state_->config = std::move(config);
  state_->created_unix = static_cast<int64_t>(std::time(nullptr));
  state_->workers = std::make_unique<boost::asio::thread_pool>(std::max(1, state_->config.n_workers));
  std::weak_ptr<State> weak = state_;
  http_ = std::make_unique<HttpServer>(state_->config.http, [weak](HttpRequest req, Responder r) {
    if (auto sp = weak.lock()) route(sp, std::move(req), std::move(r));
  });
  state_->http = http_.get();
}

Server::~Server() {
  if (state_->engine) state_->engine->shutdown();
  state_->workers->join();  // jobs still queued run now and are refused by the stopped engine
  state_->engine.reset();  // drops the callbacks (and connections) they hold
  http_.reset();
}

Status Server::start() { return http_->start(); }
int Server::port() const { return http_->port(); }
void Server::run_io() { http_->run(); }

Status Server::load_model() {
  auto engine = Engine::create(state_->config.engine);
  TERN_RETURN_IF_ERROR(engine.status());
  State& st = *state_;
  st.engine = std::move(engine).value();
  st.info = st.engine->model_info();
  st.model_name = st.config.served_model_name;
  if (st.model_name.empty()) st.model_name = st.info.name;
  if (st.model_name.empty()) st.model_name = std::filesystem::path(st.config.engine.model_path).stem().string();
  if (!st.config.chat_template.empty()) {
    auto t = ChatTemplate::parse(st.config.chat_template);
    if (!t.is_ok()) return t.status().with_context("the chat template given with --chat-template-file");
    st.chat_template = std::move(t).value();
  } else if (!st.info.chat_template.empty()) {
    auto t = ChatTemplate::parse(st.info.chat_template);
    if (t.is_ok())
      st.chat_template = std::move(t).value();
    else
      TERN_LOG_WARN("server: load_model: the model's chat template is not supported (%s); using ChatML",
                    t.status().message().c_str());
  }
  if (!st.chat_template) st.chat_template = ChatTemplate::chatml();
  st.loaded = true;
  return Status::ok();
}

void Server::shutdown(double deadline_s) {
  State& st = *state_;
  st.draining = true;
  http_->stop_accepting();
  using namespace std::chrono;
  const auto until = steady_clock::now() + duration<double>(deadline_s);
  while (st.pending.load() > 0 && steady_clock::now() < until) std::this_thread::sleep_for(milliseconds(20));
  if (st.engine) st.engine->shutdown();  // what is left finishes "abort"
  // Let the last events reach their clients (bounded: a client that does not
  // read is not waited for).
  const auto flush_until = steady_clock::now() + seconds(2);
  while (st.pending.load() > 0 && steady_clock::now() < flush_until) std::this_thread::sleep_for(milliseconds(5));
  while (http_->buffered_bytes() > 0 && steady_clock::now() < flush_until)
    std::this_thread::sleep_for(milliseconds(5));
  http_->stop();
}

}  // namespace tern::server
