// engine/c_api_engine.cpp — include/tern/tern.h's engines over tern::Engine:
// requests in, outputs out through the caller's callback or a per-request
// queue that tern_engine_poll reads.
#include <chrono>
#include <condition_variable>
#include <deque>
#include <limits>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/kv_format.h"
#include "engine/c_api_chat.h"
#include "engine/c_api_model.h"
#include "engine/c_api_util.h"
#include "tern/engine.h"

namespace {

// A polled request's outputs, filled on the engine's output thread.
struct Polled {
  std::deque<tern::RequestOutput> queue;
  tern::RequestOutput current;  // the one the caller holds (its text pointers)
  bool finished = false;        // the last output has arrived
  bool delivered_last = false;  // ... and the caller has it
};

}  // namespace

struct tern_engine {
  std::mutex mu;  // polled and every Polled in it
  std::condition_variable cv;
  std::unordered_map<uint64_t, std::shared_ptr<Polled>> polled;
  int32_t n_ctx = 0;  // the context in force (stats; model_info() would copy the chat template each time)
  // Last member: destroyed first, so its output thread is joined while the above still exist.
  std::unique_ptr<tern::Engine> engine;
};

namespace tern::capi {
namespace {

tern_finish finish_of(const std::optional<FinishReason>& f) {
  if (!f) return TERN_FINISH_NONE;
  switch (*f) {
    case FinishReason::Length: return TERN_FINISH_LENGTH;
    case FinishReason::Stop: return TERN_FINISH_STOP;
    case FinishReason::Eos: return TERN_FINISH_EOS;
    case FinishReason::Context: return TERN_FINISH_CONTEXT;
    case FinishReason::Cancelled: return TERN_FINISH_CANCELLED;
    case FinishReason::Error: return TERN_FINISH_ERROR;
  }
  return TERN_FINISH_ERROR;
}

// A view of `o` whose pointers live as long as `o`.
tern_output view_of(const RequestOutput& o) {
  tern_output v{};
  v.id = o.id.value;
  v.has_token = o.has_token ? 1 : 0;
  v.token = o.token;
  v.text = o.text.c_str();
  v.text_len = o.text.size();
  v.logprob = o.logprob;
  v.finish = finish_of(o.finish);
  v.error = o.error.c_str();
  v.n_prompt_tokens = o.n_tokens_prompt;
  v.n_generated_tokens = o.n_tokens_generated;
  v.n_cached_tokens = o.n_tokens_cached;
  v.ttft_ms = o.ttft_ms;
  v.e2e_ms = o.e2e_ms;
  return v;
}

tern_status request_of(const tern_request_params* given, GenerationRequest& r) {
  tern_request_params p;
  tern_request_params_init(&p);
  if (tern_status s = read_params(given, p, "tern_request_params"); s != TERN_OK) return s;
  if (p.max_tokens < 0) return fail(TERN_E_INVALID_ARGUMENT, "max_tokens must be >= 0");
  if (p.n_stop > 0 && !p.stop) return fail(TERN_E_INVALID_ARGUMENT, "stop is NULL with n_stop > 0");
  r.max_tokens = p.max_tokens;
  r.sampling.temperature = p.temperature;
  r.sampling.top_k = p.top_k;
  r.sampling.top_p = p.top_p;
  r.sampling.min_p = p.min_p;
  r.sampling.repetition_penalty = p.repetition_penalty;
  r.sampling.frequency_penalty = p.frequency_penalty;
  r.sampling.presence_penalty = p.presence_penalty;
  r.sampling.seed = p.seed;
  r.ignore_eos = p.ignore_eos != 0;
  r.add_special = p.add_special != 0;
  r.n_logprobs = p.logprobs ? 0 : -1;
  r.priority = p.priority;
  for (size_t i = 0; i < p.n_stop; ++i) {
    if (!p.stop[i]) return fail(TERN_E_INVALID_ARGUMENT, "stop[" + std::to_string(i) + "] is NULL");
    r.stop.emplace_back(p.stop[i]);
  }
  return TERN_OK;
}

// Queues r with its outputs going to on_output, or (NULL) to a queue tern_engine_poll reads.
tern_status add(tern_engine& engine, GenerationRequest r, tern_output_fn on_output, void* user_data,
                tern_request_id& id) {
  OutputCallback callback;
  std::shared_ptr<Polled> polled;
  if (on_output) {
    callback = [on_output, user_data](const RequestOutput& o) {
      const tern_output v = view_of(o);
      on_output(&v, user_data);
    };
  } else {
    polled = std::make_shared<Polled>();
    callback = [&engine, polled](const RequestOutput& o) {
      {
        std::lock_guard lock(engine.mu);
        polled->queue.push_back(o);
        if (o.finish) polled->finished = true;
      }
      engine.cv.notify_all();
    };
  }
  // Outputs that come before the entry below wait in `polled`; the caller cannot poll before we return.
  auto added = engine.engine->add_request(std::move(r), std::move(callback));
  if (!added) return fail(added.status());
  if (polled) {
    try {
      std::lock_guard lock(engine.mu);
      engine.polled.emplace(added->value, std::move(polled));
    } catch (...) {  // out of memory: nobody could read its outputs
      engine.engine->cancel(*added);
      throw;
    }
  }
  id = added->value;
  return TERN_OK;
}

}  // namespace
}  // namespace tern::capi

using namespace tern;
using namespace tern::capi;

extern "C" {

void tern_engine_params_init(tern_engine_params* params) {
  if (!params) return;
  const EngineConfig d;
  *params = tern_engine_params{};
  params->struct_size = sizeof(tern_engine_params);
  params->n_threads = 0;
  params->n_ctx = 0;
  params->max_num_seqs = d.max_num_seqs;
  params->max_batched_tokens = d.max_batched_tokens;
  params->kv_memory_bytes = 0;
  params->kv_type = nullptr;
  params->prefix_caching = d.prefix_caching ? 1 : 0;
  params->max_rss_bytes = 0;
  params->use_mmap = d.use_mmap ? 1 : 0;
  params->mlock = d.mlock ? 1 : 0;
}

tern_status tern_engine_create(const tern_model* model, const tern_engine_params* given, tern_engine** out) {
  return guard([&] {
    if (!out) return fail(TERN_E_INVALID_ARGUMENT, "tern_engine_create: out is NULL");
    *out = nullptr;
    if (!is_live(model)) return bad_handle("tern_engine_create: model");
    tern_engine_params p;
    tern_engine_params_init(&p);
    if (tern_status s = read_params(given, p, "tern_engine_params"); s != TERN_OK) return s;
    if (p.n_threads < 0) return fail(TERN_E_INVALID_ARGUMENT, "n_threads must be >= 0 (0: every core)");
    if (p.n_ctx < 0) return fail(TERN_E_INVALID_ARGUMENT, "n_ctx must be >= 0 (0: the model's)");
    if (p.kv_memory_bytes < 0) return fail(TERN_E_INVALID_ARGUMENT, "kv_memory_bytes must be >= 0");
    if (p.max_rss_bytes < 0) return fail(TERN_E_INVALID_ARGUMENT, "max_rss_bytes must be >= 0 (0: no bound)");
    EngineConfig c;
    c.model_path = model->path;
    c.n_threads = p.n_threads;
    c.n_ctx = p.n_ctx;
    c.max_num_seqs = p.max_num_seqs;
    c.max_batched_tokens = p.max_batched_tokens;
    c.kv_memory_bytes = p.kv_memory_bytes;
    c.prefix_caching = p.prefix_caching != 0;
    c.max_rss_bytes = p.max_rss_bytes;
    c.use_mmap = p.use_mmap != 0;
    c.mlock = p.mlock != 0;
    if (p.kv_type) {
      auto kv = parse_kv_type(p.kv_type);
      if (!kv)
        return fail(TERN_E_INVALID_ARGUMENT,
                    std::string("kv_type '") + p.kv_type + "' is not one of f16, f32, q8_0, q4_0, fp8");
      c.kv_type = *kv;
    }
    auto engine = Engine::create(c);
    if (!engine) return fail(engine.status());
    const int32_t n_ctx = (*engine)->model_info().n_ctx;
    tern_engine* handle = make_handle<tern_engine>();  // what follows only moves: nothing throws
    handle->engine = std::move(engine).value();
    handle->n_ctx = n_ctx;
    publish(handle, out);
    return TERN_OK;
  });
}

void tern_engine_free(tern_engine* engine) {
  if (!engine || !unregister_handle(engine)) return;
  engine->engine->shutdown();  // unfinished requests end as cancelled, through their callbacks
  engine->engine.reset();
  destroy_handle(engine);
}

void tern_request_params_init(tern_request_params* params) {
  if (!params) return;
  const GenerationRequest d;
  *params = tern_request_params{};
  params->struct_size = sizeof(tern_request_params);
  params->max_tokens = d.max_tokens;
  params->temperature = d.sampling.temperature;
  params->top_k = d.sampling.top_k;
  params->top_p = d.sampling.top_p;
  params->min_p = d.sampling.min_p;
  params->repetition_penalty = d.sampling.repetition_penalty;
  params->frequency_penalty = d.sampling.frequency_penalty;
  params->presence_penalty = d.sampling.presence_penalty;
  params->seed = TERN_SEED_RANDOM;
  params->ignore_eos = d.ignore_eos ? 1 : 0;
  params->add_special = d.add_special ? 1 : 0;
  params->logprobs = 0;
  params->priority = d.priority;
  params->stop = nullptr;
  params->n_stop = 0;
}

tern_status tern_engine_add(tern_engine* engine, const char* prompt, size_t prompt_len, const int32_t* tokens,
                            size_t n_tokens, const tern_request_params* given, tern_output_fn on_output,
                            void* user_data, tern_request_id* id) {
  return guard([&] {
    if (!is_live(engine)) return bad_handle("tern_engine_add: engine");
    if (!id) return fail(TERN_E_INVALID_ARGUMENT, "tern_engine_add: id is NULL");
    *id = 0;
    if (!tokens && !prompt) return fail(TERN_E_INVALID_ARGUMENT, "tern_engine_add: neither a prompt nor tokens");
    if (tokens && n_tokens == 0) return fail(TERN_E_INVALID_ARGUMENT, "tern_engine_add: tokens given but n_tokens is 0");
    GenerationRequest r;
    if (tern_status s = request_of(given, r); s != TERN_OK) return s;
    if (tokens) {
      r.prompt_tokens.assign(tokens, tokens + n_tokens);
    } else {
      r.prompt.assign(prompt, prompt_len);
    }
    return add(*engine, std::move(r), on_output, user_data, *id);
  });
}

tern_status tern_engine_add_chat(tern_engine* engine, const tern_chat_message* messages, size_t n_messages,
                                 const tern_request_params* given, tern_output_fn on_output, void* user_data,
                                 tern_request_id* id) {
  return guard([&] {
    if (!is_live(engine)) return bad_handle("tern_engine_add_chat: engine");
    if (!id) return fail(TERN_E_INVALID_ARGUMENT, "tern_engine_add_chat: id is NULL");
    *id = 0;
    GenerationRequest r;
    if (tern_status s = request_of(given, r); s != TERN_OK) return s;
    const Engine& e = *engine->engine;
    const ModelInfo info = e.model_info();
    ChatRender how;
    how.template_source = info.chat_template;
    how.bos_token = info.bos_token;
    how.eos_token = info.eos_token;
    // Special-token text inside a message stays text; the template's own control tokens keep their meaning.
    how.client_text = [&e](std::string_view t) { return e.quote_special(std::string(t)); };
    auto text = render_chat(messages, n_messages, how);
    if (!text) return fail(text.status().with_context("tern_engine_add_chat"));
    // Templates that write BOS themselves must not get a second one.
    const bool has_bos = !info.bos_token.empty() && text->rfind(info.bos_token, 0) == 0;
    r.prompt_tokens = e.tokenize(*text, !has_bos, /*quoted=*/true);
    if (r.prompt_tokens.empty()) return fail(TERN_E_INVALID_ARGUMENT, "tern_engine_add_chat: the rendered prompt has no tokens");
    return add(*engine, std::move(r), on_output, user_data, *id);
  });
}

tern_status tern_engine_poll(tern_engine* engine, tern_request_id id, int32_t timeout_ms, tern_output* output) {
  return guard([&] {
    if (!is_live(engine)) return bad_handle("tern_engine_poll: engine");
    if (!output) return fail(TERN_E_INVALID_ARGUMENT, "tern_engine_poll: output is NULL");
    std::unique_lock lock(engine->mu);
    auto it = engine->polled.find(id);
    if (it == engine->polled.end())
      return fail(TERN_E_NOT_FOUND, "request " + std::to_string(id) +
                                        " is not a polled request of this engine (added with a callback, or finished "
                                        "and released)");
    std::shared_ptr<Polled> p = it->second;
    if (p->delivered_last) {
      engine->polled.erase(it);
      return fail(TERN_E_NOT_FOUND, "request " + std::to_string(id) + " has finished (its last output was polled)");
    }
    const auto ready = [&] { return !p->queue.empty(); };
    if (timeout_ms < 0) {
      engine->cv.wait(lock, ready);
    } else if (!engine->cv.wait_for(lock, std::chrono::milliseconds(timeout_ms), ready)) {
      return fail(TERN_E_TIMEOUT, "request " + std::to_string(id) + ": no output within " +
                                      std::to_string(timeout_ms) + " ms");
    }
    p->current = std::move(p->queue.front());
    p->queue.pop_front();
    if (p->current.finish) p->delivered_last = true;
    *output = view_of(p->current);
    return TERN_OK;
  });
}

tern_status tern_engine_release(tern_engine* engine, tern_request_id id) {
  return guard([&] {
    if (!is_live(engine)) return bad_handle("tern_engine_release: engine");
    bool unfinished = false;
    {
      std::lock_guard lock(engine->mu);
      auto it = engine->polled.find(id);
      if (it == engine->polled.end())
        return fail(TERN_E_NOT_FOUND, "request " + std::to_string(id) + " is not a polled request of this engine");
      unfinished = !it->second->finished;
      engine->polled.erase(it);  // outputs still to come land in the (now private) Polled and are dropped with it
    }
    if (unfinished) engine->engine->cancel(RequestId(id));
    return TERN_OK;
  });
}

tern_status tern_engine_cancel(tern_engine* engine, tern_request_id id) {
  return guard([&] {
    if (!is_live(engine)) return bad_handle("tern_engine_cancel: engine");
    engine->engine->cancel(RequestId(id));
    return TERN_OK;
  });
}

tern_status tern_engine_get_stats(const tern_engine* engine, tern_engine_stats* stats) {
  return guard([&] {
    if (!is_live(engine)) return bad_handle("tern_engine_get_stats: engine");
    if (!stats) return fail(TERN_E_INVALID_ARGUMENT, "tern_engine_get_stats: stats is NULL");
    const EngineStats s = engine->engine->stats();
    *stats = tern_engine_stats{};
    stats->n_waiting = s.n_waiting;
    stats->n_running = s.n_running;
    stats->n_swapped = s.n_swapped;
    stats->kv_blocks_total = s.kv_blocks_total;
    stats->kv_blocks_used = s.kv_blocks_used;
    stats->n_ctx = engine->n_ctx;
    stats->n_requests_finished = s.n_requests_finished;
    stats->n_tokens_prompt = s.n_tokens_prompt;
    stats->n_tokens_generated = s.n_tokens_generated;
    stats->prefix_hit_tokens = s.prefix_hit_tokens;
    stats->n_preemptions = s.n_preemptions;
    stats->n_steps = s.n_steps;
    return TERN_OK;
  });
}

}  // extern "C"
