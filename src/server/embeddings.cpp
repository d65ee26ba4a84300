// POST /v1/embeddings: one engine request per input — the prompt run with max_tokens 0 and its
// final hidden states pooled (Pooling::Mean or Last) — gathered into one OpenAI list response.
#include <cstring>
#include <mutex>
#include <nlohmann/json.hpp>

#include "server/server_state.h"

namespace tern::server {

using nlohmann::json;

namespace {

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

// The vector's float32 bytes (little-endian, as OpenAI's base64 format is read with
// numpy.frombuffer(..., dtype=float32)), in base64.
std::string base64_floats(const std::vector<float>& v) {
  static constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string bytes(v.size() * sizeof(float), '\0');
  std::memcpy(bytes.data(), v.data(), bytes.size());  // the hosts we build for are little-endian
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  for (size_t i = 0; i < bytes.size(); i += 3) {
    const size_t n = std::min<size_t>(3, bytes.size() - i);
    uint32_t w = 0;
    for (size_t k = 0; k < 3; ++k) w = w << 8 | (k < n ? static_cast<uint8_t>(bytes[i + k]) : 0u);
    for (size_t k = 0; k < 4; ++k) out += k <= n ? kAlphabet[(w >> (18 - 6 * k)) & 63] : '=';
  }
  return out;
}

struct EmbedJob {
  std::shared_ptr<Server::State> st;
  Responder responder;
  EmbeddingsRequest req;
  std::vector<int> n_tokens;
  const std::string endpoint = "/v1/embeddings";

  std::mutex mu;
  std::vector<std::vector<float>> vectors;  // guarded by mu
  std::vector<RequestId> ids;               // guarded by mu
  int n_done = 0;                           // guarded by mu
  std::string error;                        // guarded by mu
  bool cancelled = false;                   // guarded by mu

  EmbedJob(std::shared_ptr<Server::State> s, Responder r) : st(std::move(s)), responder(std::move(r)) {}

  // Engine callback (step thread): each request ends with one output carrying its vector.
  void on_output(size_t i, const RequestOutput& o) {
    if (!o.finish) return;
    std::lock_guard lock(mu);
    st->pending.fetch_sub(1);
    if (*o.finish == FinishReason::Length && !o.embedding.empty()) {
      vectors[i] = o.embedding;
    } else if (error.empty()) {
      error = *o.finish == FinishReason::Error && !o.error.empty() ? o.error : "the embedding was not computed";
    }
    if (++n_done == static_cast<int>(vectors.size())) respond();
  }

  void respond() {  // mu held
    if (!error.empty()) return send_error(*st, responder, endpoint, server_error(error));
    json data = json::array();
    int total = 0;
    for (size_t i = 0; i < vectors.size(); ++i) {
      json item = {{"object", "embedding"}, {"index", i}};
      item["embedding"] = req.base64 ? json(base64_floats(vectors[i])) : json(vectors[i]);
      data.push_back(std::move(item));
      total += n_tokens[i];
    }
    json body = {{"object", "list"}, {"data", std::move(data)}, {"model", st->model_name},
                 {"usage", {{"prompt_tokens", total}, {"total_tokens", total}}}};
    send_json(*st, responder, endpoint, 200, dump(body));
  }

  void cancel_all() {
    std::vector<RequestId> to_cancel;
    {
      std::lock_guard lock(mu);
      cancelled = true;
      to_cancel = ids;
    }
    for (RequestId id : to_cancel) st->engine->cancel(id);
  }
};

ApiError bad_input(std::string message) {
  ApiError e;
  e.param = "input";
  e.message = std::move(message);
  return e;
}

}  // namespace

void handle_embeddings(const std::shared_ptr<Server::State>& st, HttpRequest req, Responder r) {
  const std::string endpoint = "/v1/embeddings";
  auto parsed = parse_embeddings_request(req.body);
  if (auto* e = std::get_if<ApiError>(&parsed)) return send_error(*st, r, endpoint, *e);
  auto job = std::make_shared<EmbedJob>(st, std::move(r));
  job->req = std::move(std::get<EmbeddingsRequest>(parsed));
  EmbeddingsRequest& er = job->req;
  if (!check_model(*st, job->responder, endpoint, er.model)) return;
  if (er.dimensions != 0 && er.dimensions != st->info.n_embd) {
    ApiError e;
    e.param = "dimensions";
    e.message = "this model's embeddings have " + std::to_string(st->info.n_embd) + " dimensions; 'dimensions' " +
                std::to_string(er.dimensions) + " would need a model trained to be truncated";
    return send_error(*st, job->responder, endpoint, e);
  }
  std::vector<GenerationRequest> requests;
  for (size_t i = 0; i < er.inputs.size(); ++i) {
    Prompt& p = er.inputs[i];
    GenerationRequest g;
    g.prompt_tokens = p.is_tokens ? std::move(p.tokens) : st->engine->tokenize(p.text, true);
    g.max_tokens = 0;
    g.embed = er.pooling.value_or(st->config.pooling);
    g.embed_normalize = er.normalize;
    const std::string which = er.inputs.size() > 1 ? "input[" + std::to_string(i) + "]" : "input";
    if (g.prompt_tokens.empty()) return send_error(*st, job->responder, endpoint, bad_input(which + " has no tokens"));
    const ContextCheck check = st->engine->check_context(static_cast<int64_t>(g.prompt_tokens.size()), 0);
    if (!check.ok) {
      ApiError e = bad_input(which + " has " + std::to_string(g.prompt_tokens.size()) +
                             " tokens; this model embeds at most " + std::to_string(check.limit - 1));
      e.code = "context_length_exceeded";
      return send_error(*st, job->responder, endpoint, e);
    }
    if (Status s = st->engine->validate(g); !s.is_ok())
      return send_error(*st, job->responder, endpoint, api_error_from_status(s, "input"));
    job->n_tokens.push_back(static_cast<int>(g.prompt_tokens.size()));
    requests.push_back(std::move(g));
  }
  const int n = static_cast<int>(requests.size());
  if (!reserve_pending(*st, n, job->responder, endpoint)) return;
  job->vectors.resize(requests.size());
  std::weak_ptr<EmbedJob> weak = job;
  job->responder.on_disconnect([weak] {
    if (auto j = weak.lock()) j->cancel_all();
  });
  for (size_t i = 0; i < requests.size(); ++i) {
    // Outputs may arrive before add_request returns: the callback takes the job's mutex.
    std::unique_lock lock(job->mu);
    auto id = st->engine->add_request(std::move(requests[i]), [job, i](const RequestOutput& o) { job->on_output(i, o); });
    if (!id.is_ok()) {
      const int n_failed = n - static_cast<int>(i);
      st->pending.fetch_sub(n_failed);
      if (i == 0) {  // nothing queued: the engine's reason, as a 4xx where it is the request's fault
        lock.unlock();
        return send_error(*st, job->responder, endpoint, api_error_from_status(id.status(), "input"));
      }
      if (job->error.empty()) job->error = id.status().message();
      job->n_done += n_failed;
      if (job->n_done == n) job->respond();
      return;
    }
    job->ids.push_back(id.value());
    if (job->cancelled) st->engine->cancel(id.value());
  }
}

}  // namespace tern::server
