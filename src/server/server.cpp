// Routing, authentication and the small endpoints; generation lives in
// generation.cpp.
#include "server/server.h"

#include <filesystem>
#include <nlohmann/json.hpp>
#include <thread>

#include "core/log.h"
#include "server/playground_asset.h"
#include "server/server_state.h"

namespace tern::server {

using nlohmann::json;

namespace {

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

// Equal-time comparison: the time taken does not depend on where the strings differ.
bool constant_time_equal(std::string_view a, std::string_view b) {
  unsigned diff = static_cast<unsigned>(a.size() ^ b.size());
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i]) ^
                                              static_cast<unsigned char>(i < b.size() ? b[i] : 0);
  return diff == 0;
}

bool authorized(const Server::State& st, const HttpRequest& req) {
  if (st.config.api_key.empty()) return true;
  std::string_view h = req.header("authorization");
  constexpr std::string_view kBearer = "Bearer ";
  if (h.size() < kBearer.size() || h.substr(0, kBearer.size()) != kBearer) return false;
  return constant_time_equal(h.substr(kBearer.size()), st.config.api_key);
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
          {"pending", st.pending.load()},
          {"uptime_s", now}};
}

void handle_tokenize(Server::State& st, const HttpRequest& req, const Responder& r) {
  const std::string endpoint = "/tokenize";
  auto parsed = parse_tokenize_request(req.body);
  if (auto* e = std::get_if<ApiError>(&parsed)) return send_error(st, r, endpoint, *e);
  TokenizeRequest& t = std::get<TokenizeRequest>(parsed);
  std::string text = t.prompt;
  if (!t.messages.empty()) {
    ChatTemplateInputs in{t.messages, t.add_generation_prompt, st.info.bos_token, st.info.eos_token};
    auto rendered = st.chat_template->render(in);
    if (!rendered.is_ok()) return send_error(st, r, endpoint, api_error_from_status(rendered.status(), "messages"));
    text = rendered.value();
  }
  const auto tokens = st.engine->tokenize(text, t.add_special);
  send_json(st, r, endpoint, 200,
            dump({{"tokens", tokens}, {"count", tokens.size()}, {"max_model_len", st.info.n_ctx}}));
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

// Known routes and their methods, for 404 vs 405.
bool known_path(const std::string& p) {
  return p == "/" || p == "/health" || p == "/metrics" || p == "/stats" || p == "/tokenize" || p == "/detokenize" ||
         p == "/v1/models" || p == "/v1/chat/completions" || p == "/v1/completions" || p.rfind("/v1/models/", 0) == 0;
}

void route(const std::shared_ptr<Server::State>& sp, HttpRequest req, Responder r) {
  Server::State& st = *sp;
  const std::string& path = req.path;
  const bool get = req.method == "GET" || req.method == "HEAD";
  const bool post = req.method == "POST";
  auto err = [&](int status, const char* type, std::string message, const char* endpoint) {
    ApiError e;
    e.status = status;
    e.type = type;
    e.message = std::move(message);
    send_error(st, r, endpoint, e);
  };
  if (path == "/health" && get) {
    if (!st.loaded.load()) return err(503, "server_error", "the model is loading", "/health");
    if (st.draining.load()) return err(503, "server_error", "the server is shutting down", "/health");
    return send_json(st, r, "/health", 200, R"({"status":"ok"})");
  }
  if (path == "/" && get) {
    HttpResponse resp;
    resp.content_type = "text/html; charset=utf-8";
    resp.body = std::string(kPlaygroundHtml);
    st.metrics.count_request("/", 200);
    return r.respond(std::move(resp));
  }
  if (!known_path(path)) return err(404, "not_found_error", "no route for " + req.method + " " + path, "other");
  if (st.draining.load()) return err(503, "server_error", "the server is shutting down", path.c_str());
  if (path == "/metrics" && get) {
    if (!st.loaded.load()) return err(503, "server_error", "the model is loading", "/metrics");
    HttpResponse resp;
    resp.content_type = "text/plain; version=0.0.4; charset=utf-8";
    st.metrics.count_request("/metrics", 200);
    resp.body = st.metrics.render(st.engine->stats(), st.model_name);
    return r.respond(std::move(resp));
  }
  if (!authorized(st, req))
    return err(401, "authentication_error", "missing or wrong API key: send 'Authorization: Bearer <key>'",
               path.c_str());
  if (!st.loaded.load()) return err(503, "server_error", "the model is loading; retry shortly", path.c_str());
  if (path == "/v1/models" && get) return send_json(st, r, path, 200, dump({{"object", "list"}, {"data", {model_card(st)}}}));
  if (path.rfind("/v1/models/", 0) == 0 && get) {
    if (path.substr(11) != st.model_name) return err(404, "not_found_error", "no model '" + path.substr(11) + "'", "/v1/models");
    return send_json(st, r, "/v1/models", 200, dump(model_card(st)));
  }
  if (path == "/stats" && get) return send_json(st, r, path, 200, dump(stats_json(st)));
  if (path == "/v1/chat/completions" && post) return handle_chat(sp, std::move(req), std::move(r));
  if (path == "/v1/completions" && post) return handle_completion(sp, std::move(req), std::move(r));
  if (path == "/tokenize" && post) return handle_tokenize(st, req, r);
  if (path == "/detokenize" && post) return handle_detokenize(st, req, r);
  err(405, "invalid_request_error", "method " + req.method + " is not allowed on " + path, path.c_str());
}

}  // namespace

void send_json(Server::State& st, const Responder& r, const std::string& endpoint, int status, std::string body) {
  st.metrics.count_request(endpoint, status);
  HttpResponse resp;
  resp.status = status;
  resp.body = std::move(body);
  r.respond(std::move(resp));
}

void send_error(Server::State& st, const Responder& r, const std::string& endpoint, const ApiError& e) {
  HttpResponse resp;
  resp.status = e.status;
  resp.body = api_error_body(e);
  if (e.status == 401) resp.headers.emplace_back("WWW-Authenticate", "Bearer");
  st.metrics.count_request(endpoint, e.status);
  r.respond(std::move(resp));
}

Server::Server(ServerConfig config) : state_(std::make_shared<State>()) {
  state_->config = std::move(config);
  state_->created_unix = static_cast<int64_t>(std::time(nullptr));
  std::weak_ptr<State> weak = state_;
  http_ = std::make_unique<HttpServer>(state_->config.http, [weak](HttpRequest req, Responder r) {
    if (auto sp = weak.lock()) route(sp, std::move(req), std::move(r));
  });
}

Server::~Server() {
  if (state_->engine) state_->engine->shutdown();
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
  if (!st.info.chat_template.empty()) {
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
  // Give the last events a moment to reach their clients.
  std::this_thread::sleep_for(milliseconds(200));
  http_->stop();
}

}  // namespace tern::server
