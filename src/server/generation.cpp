// /v1/chat/completions and /v1/completions: one Job per HTTP request fans out
// into one engine request per (prompt, choice) — n > 1 is n requests sharing
// the prompt, whose blocks the prefix cache shares — and gathers their outputs
// into one response or one event stream.
#include <chrono>
#include <nlohmann/json.hpp>
#include <random>

#include "core/log.h"
#include "server/server_state.h"
#include "server/tool_calls.h"

namespace tern::server {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

namespace {

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

std::string random_id(const char* prefix) {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  char b[40];
  std::snprintf(b, sizeof b, "%s%016llx%08llx", prefix, static_cast<unsigned long long>(rng()),
                static_cast<unsigned long long>(rng() & 0xffffffffu));
  return b;
}

const char* finish_name(FinishReason r) {
  switch (r) {
    case FinishReason::Length:
    case FinishReason::Context: return "length";
    case FinishReason::Stop:
    case FinishReason::Eos: return "stop";
    case FinishReason::Cancelled: return "abort";
    case FinishReason::Error: return "error";
  }
  return "stop";
}

json bytes_of(const std::string& s) {
  json a = json::array();
  for (unsigned char c : s) a.push_back(static_cast<int>(c));
  return a;
}

struct Choice {
  int index = 0;
  int prompt_index = 0;
  RequestId id;
  bool done = false;
  std::string text;        // accumulated (non-streaming)
  json logprobs;           // chat: {"content": [...]}; completions: {tokens, token_logprobs, top_logprobs, text_offset}
  size_t text_offset = 0;  // completions: bytes of text so far (for text_offset)
  const char* finish = nullptr;
  RequestOutput final_output;
  Clock::time_point last_token;
  bool has_last = false;
  json prompt_logprobs;                   // vLLM's per-position list, when asked (non-streaming)
  std::unique_ptr<ToolCallParser> tools;  // chat with tools: splits the reply into content and calls
  json tool_calls = json::array();        // calls made (non-streaming)
};

struct Job : std::enable_shared_from_this<Job> {
  std::shared_ptr<Server::State> st;
  Responder responder;
  bool chat = true;
  bool echo = false;
  GenerationParams params;
  ToolsRequest tools;  // chat: what the reply may call (active() or not)
  std::string endpoint, id;
  int64_t created = 0;
  std::vector<std::string> prompt_texts;  // for echo
  std::vector<int> prompt_counts;         // tokens per prompt
  std::vector<std::vector<int32_t>> prompts;  // with prompt log-probabilities: the tokens they score

  std::mutex mu;
  std::vector<Choice> choices;            // guarded by mu
  int n_done = 0;                         // guarded by mu
  std::shared_ptr<ResponseStream> sse;    // streaming only
  std::string error;                      // first engine error (guarded by mu)
  bool cancelled = false;                 // the client went away (guarded by mu)

  Job(std::shared_ptr<Server::State> s, Responder r) : st(std::move(s)), responder(std::move(r)) {}

  json chunk_base() const {
    return {{"id", id}, {"object", chat ? "chat.completion.chunk" : "text_completion"}, {"created", created},
            {"model", st->model_name}};
  }

  void send_event(const json& j) {
    if (sse) sse->write("data: " + dump(j) + "\n\n");
  }

  json logprob_entry(const RequestOutput& o) const {
    const Engine& e = *st->engine;
    if (chat) {
      const std::string piece = e.token_piece(o.token);
      json top = json::array();
      for (const auto& t : o.top_logprobs) {
        const std::string p = e.token_piece(t.token);
        top.push_back({{"token", p}, {"logprob", t.logprob}, {"bytes", bytes_of(p)}});
      }
      return {{"token", piece}, {"logprob", o.logprob}, {"bytes", bytes_of(piece)}, {"top_logprobs", top}};
    }
    json top = json::object();
    for (const auto& t : o.top_logprobs) top[e.token_piece(t.token)] = t.logprob;
    return {{"token", e.token_piece(o.token)}, {"logprob", o.logprob}, {"top", top}};
  }

  // Adds one token's logprobs to `lp` (the chat or completions shape).
  void add_logprob(json& lp, const RequestOutput& o, size_t& text_offset) const {
    json e = logprob_entry(o);
    if (chat) {
      if (lp.is_null()) lp = {{"content", json::array()}};
      lp["content"].push_back(std::move(e));
      return;
    }
    if (lp.is_null())
      lp = {{"tokens", json::array()}, {"token_logprobs", json::array()}, {"top_logprobs", json::array()},
            {"text_offset", json::array()}};
    lp["tokens"].push_back(e["token"]);
    lp["token_logprobs"].push_back(e["logprob"]);
    lp["top_logprobs"].push_back(params.n_logprobs > 0 ? e["top"] : json(nullptr));
    lp["text_offset"].push_back(text_offset);
    text_offset += e["token"].get<std::string>().size();
  }

  // vLLM's prompt_logprobs: null for the first token, then per token {"<id>": {logprob, rank,
  // decoded_token}} holding the prompt's token and the top k.
  json prompt_logprobs_of(const RequestOutput& o) const {
    const Engine& e = *st->engine;
    json list = json::array({nullptr});
    for (const PromptTokenLogprob& p : o.prompt_logprobs) {
      json at = json::object();
      at[std::to_string(p.token)] = {{"logprob", p.logprob}, {"rank", p.rank}, {"decoded_token", e.token_piece(p.token)}};
      int rank = 1;
      for (const TokenLogprob& t : p.top) {
        const std::string key = std::to_string(t.token);
        if (!at.contains(key)) at[key] = {{"logprob", t.logprob}, {"rank", rank}, {"decoded_token", e.token_piece(t.token)}};
        ++rank;
      }
      list.push_back(std::move(at));
    }
    return list;
  }

  // Completions with echo + logprobs: the prompt's tokens lead the logprobs object, the first
  // with null (nothing predicts it), as OpenAI's legacy API writes them. text_offset counts the
  // tokens' own pieces (a leading BOS as zero bytes); returns where the prompt's pieces end.
  size_t add_prompt_logprobs(json& lp, const RequestOutput& o, const std::vector<int32_t>& prompt) const {
    const Engine& e = *st->engine;
    if (lp.is_null())
      lp = {{"tokens", json::array()}, {"token_logprobs", json::array()}, {"top_logprobs", json::array()},
            {"text_offset", json::array()}};
    size_t offset = 0;
    for (size_t i = 0; i < prompt.size(); ++i) {
      const std::string piece = e.token_piece(prompt[i]);
      lp["tokens"].push_back(piece);
      lp["text_offset"].push_back(offset);
      if (!(i == 0 && piece == st->info.bos_token)) offset += piece.size();
      if (i == 0 || i - 1 >= o.prompt_logprobs.size()) {
        lp["token_logprobs"].push_back(nullptr);
        lp["top_logprobs"].push_back(nullptr);
        continue;
      }
      const PromptTokenLogprob& p = o.prompt_logprobs[i - 1];
      lp["token_logprobs"].push_back(p.logprob);
      json top = json::object();
      for (const TokenLogprob& t : p.top) top[e.token_piece(t.token)] = t.logprob;
      lp["top_logprobs"].push_back(params.n_logprobs > 0 ? top : json(nullptr));
    }
    return offset;
  }

  json usage() const {
    int prompt = 0, completion = 0, cached = 0;
    for (int c : prompt_counts) prompt += c;
    for (const Choice& c : choices) {
      completion += c.final_output.n_tokens_generated;
      if (c.index % params.n == 0) cached += c.final_output.n_tokens_cached;
    }
    return {{"prompt_tokens", prompt},
            {"completion_tokens", completion},
            {"total_tokens", prompt + completion},
            {"prompt_tokens_details", {{"cached_tokens", cached}}}};
  }

  void start_stream() {
    sse = responder.start_stream(200, "text/event-stream",
                                 {{"Cache-Control", "no-cache"}, {"X-Accel-Buffering", "no"}});
    st->metrics.count_request(endpoint, 200);
    for (const Choice& c : choices) {
      json j = chunk_base();
      if (chat) {
        j["choices"] = json::array({{{"index", c.index},
                                     {"delta", {{"role", "assistant"}, {"content", ""}}},
                                     {"logprobs", nullptr},
                                     {"finish_reason", nullptr}}});
      } else {
        if (!echo) continue;
        j["choices"] = json::array({{{"index", c.index},
                                     {"text", prompt_texts[static_cast<size_t>(c.prompt_index)]},
                                     {"logprobs", nullptr},
                                     {"finish_reason", nullptr}}});
      }
      if (params.include_usage) j["usage"] = nullptr;
      send_event(j);
    }
  }

  // Engine callback (step thread).
  void on_output(int choice_index, const RequestOutput& o) {
    std::lock_guard lock(mu);
    Choice& c = choices[static_cast<size_t>(choice_index)];
    if (c.done) return;
    const auto now = Clock::now();
    if (o.has_token) {
      if (c.has_last) st->metrics.observe_itl(std::chrono::duration<double>(now - c.last_token).count());
      c.last_token = now;
      c.has_last = true;
    }
    json lp_delta;  // this output's logprobs (streaming)
    const bool echo_lp = !chat && echo && params.n_logprobs >= 0;
    if (!o.prompt_logprobs.empty() && params.prompt_logprobs >= 0) {
      const auto& prompt = prompts[static_cast<size_t>(c.prompt_index)];
      json plp = prompt_logprobs_of(o);
      json echo_entries;
      if (echo_lp) {
        // Generated tokens' offsets continue after the prompt's.
        c.text_offset = add_prompt_logprobs(sse ? echo_entries : c.logprobs, o, prompt);
      }
      if (sse) {
        json j = chunk_base();
        json choice = {{"index", c.index}, {"logprobs", echo_entries.is_null() ? json(nullptr) : echo_entries},
                       {"prompt_logprobs", plp}, {"finish_reason", nullptr}};
        if (chat) choice["delta"] = json::object();
        else choice["text"] = "";
        j["choices"] = json::array({choice});
        if (params.include_usage) j["usage"] = nullptr;
        send_event(j);
      } else {
        c.prompt_logprobs = std::move(plp);
      }
    }
    if (o.has_token && params.n_logprobs >= 0) {
      if (sse) {
        size_t off = c.text_offset;
        add_logprob(lp_delta, o, off);
        c.text_offset = off;
      } else {
        add_logprob(c.logprobs, o, c.text_offset);
      }
    }
    // With tools, the parser decides which text is content and which a call.
    // (Without tools the engine's text is used as it is: no copy per token.)
    ToolCallParser::Delta parsed;
    if (c.tools) {
      parsed = c.tools->feed(o.text);
      if (o.finish) {
        ToolCallParser::Delta rest = c.tools->finish();
        parsed.content += rest.content;
        for (auto& call : rest.calls) parsed.calls.push_back(std::move(call));
      }
    }
    const std::string& text = c.tools ? parsed.content : o.text;
    std::vector<ParsedToolCall>& calls = parsed.calls;
    if (sse && (!text.empty() || !lp_delta.is_null())) {
      json j = chunk_base();
      json choice = {{"index", c.index}, {"logprobs", lp_delta.is_null() ? json(nullptr) : lp_delta},
                     {"finish_reason", nullptr}};
      if (chat)
        choice["delta"] = {{"content", text}};
      else
        choice["text"] = text;
      j["choices"] = json::array({choice});
      if (params.include_usage) j["usage"] = nullptr;
      send_event(j);
    } else if (!sse) {
      c.text += text;
    }
    for (ParsedToolCall& call : calls) {
      // A piece with a name begins a call; one without continues the latest call's arguments.
      const bool begins = !call.name.empty();
      if (!begins && c.tool_calls.empty()) continue;  // cannot happen: a call's pieces follow its head
      if (!sse) {
        if (begins)
          c.tool_calls.push_back({{"id", new_tool_call_id()},
                                  {"type", "function"},
                                  {"function", {{"name", std::move(call.name)}, {"arguments", std::move(call.arguments)}}}});
        else
          c.tool_calls.back()["function"]["arguments"].get_ref<std::string&>() += call.arguments;
        continue;
      }
      // As OpenAI streams them: a call's id, name and first piece of arguments, then further
      // pieces, each tagged with the call's position among the choice's calls.
      json entry;
      if (begins) {
        entry = {{"index", c.tool_calls.size()},
                 {"id", new_tool_call_id()},
                 {"type", "function"},
                 {"function", {{"name", std::move(call.name)}, {"arguments", std::move(call.arguments)}}}};
        c.tool_calls.push_back(nullptr);
      } else {
        entry = {{"index", c.tool_calls.size() - 1}, {"function", {{"arguments", std::move(call.arguments)}}}};
      }
      json j = chunk_base();
      j["choices"] = json::array({{{"index", c.index}, {"delta", {{"tool_calls", json::array({entry})}}},
                                   {"logprobs", nullptr}, {"finish_reason", nullptr}}});
      if (params.include_usage) j["usage"] = nullptr;
      send_event(j);
    }
    if (!o.finish) return;
    c.done = true;
    c.finish = finish_name(*o.finish);
    if (!c.tool_calls.empty() && (*o.finish == FinishReason::Stop || *o.finish == FinishReason::Eos))
      c.finish = "tool_calls";
    c.final_output = o;
    ++n_done;
    st->pending.fetch_sub(1);
    st->metrics.observe_generation(o, c.finish);
    if (*o.finish == FinishReason::Error && error.empty()) error = o.error.empty() ? "generation failed" : o.error;
    if (sse) {
      json j = chunk_base();
      json choice = {{"index", c.index}, {"logprobs", nullptr}, {"finish_reason", c.finish}};
      if (chat)
        choice["delta"] = json::object();
      else
        choice["text"] = "";
      j["choices"] = json::array({choice});
      if (params.include_usage) j["usage"] = nullptr;
      send_event(j);
    }
    if (n_done == static_cast<int>(choices.size())) complete();
  }

  // All choices finished (mu held).
  void complete() {
    if (sse) {
      if (!error.empty()) sse->write("data: " + api_error_body(server_error(error)) + "\n\n");
      if (params.include_usage) {
        json j = chunk_base();
        j["choices"] = json::array();
        j["usage"] = usage();
        send_event(j);
      }
      sse->write("data: [DONE]\n\n");
      sse->finish();
      return;
    }
    if (!error.empty()) return send_error(*st, responder, endpoint, server_error(error));
    json arr = json::array();
    for (Choice& c : choices) {
      json choice = {{"index", c.index}, {"finish_reason", c.finish},
                     {"logprobs", c.logprobs.is_null() ? json(nullptr) : c.logprobs}};
      if (params.prompt_logprobs >= 0) choice["prompt_logprobs"] = c.prompt_logprobs;
      if (chat) {
        choice["message"] = {{"role", "assistant"}, {"content", c.text}};
        if (!c.tool_calls.empty()) {
          if (c.text.empty()) choice["message"]["content"] = nullptr;
          choice["message"]["tool_calls"] = c.tool_calls;
        }
      } else {
        choice["text"] = echo ? prompt_texts[static_cast<size_t>(c.prompt_index)] + c.text : c.text;
      }
      arr.push_back(std::move(choice));
    }
    json body = {{"id", id},         {"object", chat ? "chat.completion" : "text_completion"},
                 {"created", created}, {"model", st->model_name},
                 {"choices", arr},     {"usage", usage()}};
    if (chat) body["system_fingerprint"] = nullptr;
    send_json(*st, responder, endpoint, 200, dump(body));
  }

  void cancel_all() {
    std::vector<RequestId> ids;
    {
      std::lock_guard lock(mu);
      cancelled = true;
      for (const Choice& c : choices)
        if (!c.done && c.id.value != 0) ids.push_back(c.id);
    }
    for (RequestId rid : ids) st->engine->cancel(rid);
  }
};

// The engine's verdict (Engine::check_context, the input processor's rule)
// in OpenAI's words. Counts are 64-bit: a prompt plus max_tokens near
// INT32_MAX must not wrap into a value that passes.
ApiError context_error(const ContextCheck& c) {
  ApiError e;
  e.param = c.prompt_too_long ? "messages" : "max_tokens";
  e.code = "context_length_exceeded";
  if (c.prompt_too_long) {
    e.message = "This model's maximum context length is " + std::to_string(c.limit) + " tokens, but the prompt has " +
                std::to_string(c.n_prompt) + " tokens (" + std::to_string(c.n_over) +
                " over, counting one token to generate). Shorten the prompt.";
  } else {
    e.message = "This model's maximum context length is " + std::to_string(c.limit) + " tokens. However, you requested " +
                std::to_string(c.n_prompt + c.max_tokens) + " tokens (" + std::to_string(c.n_prompt) + " in the prompt, " +
                std::to_string(c.max_tokens) + " in the completion), " + std::to_string(c.n_over) +
                " too many. Reduce the prompt or max_tokens.";
  }
  if (c.limit_is_kv_pool)
    e.message += " (The limit is the server's KV-cache pool, which holds " + std::to_string(c.limit) +
                 " positions per sequence of the model's " + std::to_string(c.n_ctx_model) +
                 "; the operator can raise --kv-memory.)";
  return e;
}

// Choice i's engine request (choice i of prompt i / n; with a seed, seed + i % n).
// Without max_tokens: what the context leaves, or for a streaming request
// (which runs past the context) one context's worth.
GenerationRequest engine_request(const GenerationParams& p, const std::vector<int32_t>& prompt, int i, int n_ctx,
                                 const StreamingParams& server_streaming) {
  GenerationRequest g;
  g.prompt_tokens = prompt;
  g.sampling = p.sampling;
  if (p.seeded) g.sampling.seed = p.sampling.seed + static_cast<uint64_t>(i % p.n);
  const bool streaming = p.streaming.value_or(server_streaming).mode != StreamingMode::Off;
  g.max_tokens = p.max_tokens >= 0 ? p.max_tokens : streaming ? n_ctx : n_ctx - static_cast<int>(g.prompt_tokens.size());
  g.streaming = p.streaming;
  g.kv_evict = p.kv_evict;
  g.stop = p.stop;
  g.ignore_eos = p.ignore_eos;
  g.spec_k = p.spec_k;
  g.spec_tree = p.spec_tree;
  g.stop_token_ids = p.stop_token_ids;
  g.constraint = p.constraint;
  g.logit_bias = p.logit_bias;
  g.n_logprobs = p.n_logprobs;
  g.prompt_logprobs = p.prompt_logprobs;
  g.priority = p.priority;
  g.tenant = p.user;
  return g;
}

// Tokenized prompts in, engine requests out; answers the error itself and
// returns false when the job cannot start.
bool launch(const std::shared_ptr<Job>& job, std::vector<std::vector<int32_t>> prompts) {
  Server::State& st = *job->st;
  const GenerationParams& p = job->params;
  const int n_ctx = st.info.n_ctx;
  for (const auto& toks : prompts) {
    const ContextCheck check = st.engine->check_context(static_cast<int64_t>(toks.size()), p.max_tokens, p.streaming);
    if (!check.ok) {
      ApiError e = context_error(check);
      if (!job->chat) e.param = e.param == "messages" ? "prompt" : e.param;
      send_error(st, job->responder, job->endpoint, e);
      return false;
    }
  }
  // Everything else the engine would refuse (token ids, parameters), refused
  // now by the engine's own input processor, while an answer can still be a 400.
  for (size_t k = 0; k < prompts.size(); ++k) {
    const Status valid =
        st.engine->validate(engine_request(p, prompts[k], static_cast<int>(k) * p.n, n_ctx, st.info.streaming));
    if (!valid.is_ok()) {
      // A forced tool call's grammar is built from the tools' parameters: they are what to fix.
      const bool forced = job->tools.choice == ToolChoice::Required || job->tools.choice == ToolChoice::Named;
      const char* param = !job->chat ? "prompt" : forced ? "tools" : "messages";
      send_error(st, job->responder, job->endpoint, api_error_from_status(valid, param));
      return false;
    }
  }
  const int n_choices = static_cast<int>(prompts.size()) * p.n;
  if (!reserve_pending(st, n_choices, job->responder, job->endpoint)) return false;
  for (auto& toks : prompts) job->prompt_counts.push_back(static_cast<int>(toks.size()));
  if (p.prompt_logprobs >= 0) job->prompts = prompts;
  job->choices.resize(static_cast<size_t>(n_choices));
  for (int i = 0; i < n_choices; ++i) {
    Choice& c = job->choices[static_cast<size_t>(i)];
    c.index = i;
    c.prompt_index = i / p.n;
    if (job->tools.active()) c.tools = std::make_unique<ToolCallParser>(job->tools);
  }
  if (p.stream) job->start_stream();
  std::weak_ptr<Job> weak = job;
  job->responder.on_disconnect([weak] {
    if (auto j = weak.lock()) j->cancel_all();
  });
  for (int i = 0; i < n_choices; ++i) {
    GenerationRequest g = engine_request(p, prompts[static_cast<size_t>(i / p.n)], i, n_ctx, st.info.streaming);
    // Outputs may arrive on the step thread before add_request returns: the
    // callback only touches its own choice, under the job's mutex.
    std::unique_lock lock(job->mu);
    auto id = st.engine->add_request(std::move(g), [job, i](const RequestOutput& o) { job->on_output(i, o); });
    if (!id.is_ok()) {
      // Refused (e.g. the KV pool can never hold this prompt): finish this and
      // the remaining choices with the error.
      const int n_failed = n_choices - i;
      st.pending.fetch_sub(n_failed);
      if (i == 0 && !p.stream) {
        lock.unlock();
        send_error(st, job->responder, job->endpoint, api_error_from_status(id.status()));
        return false;
      }
      job->error = id.status().message();
      for (int k = i; k < n_choices; ++k) {
        job->choices[static_cast<size_t>(k)].done = true;
        job->choices[static_cast<size_t>(k)].finish = "error";
      }
      job->n_done += n_failed;
      if (job->n_done == n_choices) job->complete();
      return true;
    }
    job->choices[static_cast<size_t>(i)].id = id.value();
    if (job->cancelled) st.engine->cancel(id.value());  // gone while we were launching
  }
  return true;
}

std::shared_ptr<Job> make_job(const std::shared_ptr<Server::State>& st, Responder r, bool chat,
                              GenerationParams params) {
  auto job = std::make_shared<Job>(st, std::move(r));
  job->chat = chat;
  job->params = std::move(params);
  job->endpoint = chat ? "/v1/chat/completions" : "/v1/completions";
  job->id = random_id(chat ? "chatcmpl-" : "cmpl-");
  job->created = static_cast<int64_t>(std::time(nullptr));
  return job;
}

}  // namespace

bool check_model(Server::State& st, const Responder& r, const std::string& endpoint, const std::string& model) {
  if (model.empty() || model == st.model_name) return true;
  ApiError e;
  e.status = 404;
  e.type = "not_found_error";
  e.param = "model";
  e.code = "model_not_found";
  e.message = "The model '" + model + "' does not exist; this server serves '" + st.model_name + "'";
  send_error(st, r, endpoint, e);
  return false;
}

bool reserve_pending(Server::State& st, int n, const Responder& r, const std::string& endpoint) {
  if (st.pending.fetch_add(n) + n <= st.config.max_pending) return true;
  st.pending.fetch_sub(n);
  st.metrics.observe_queue_rejected();
  ApiError e;
  e.status = 429;
  e.type = "rate_limit_error";
  e.message = "the server's queue is full (" + std::to_string(st.config.max_pending) +
              " unfinished generations); retry later";
  send_error(st, r, endpoint, e);
  return false;
}

Result<std::string> chat_prompt_text(const Server::State& st, std::vector<ChatMessage> messages,
                                     const ChatPromptOptions& opts) {
  ChatTemplateInputs in;
  in.messages = std::move(messages);
  // Special-token text a client typed stays text: quoted here, it survives
  // rendering and is tokenised as plain text, while the template's own
  // control tokens (and bos/eos_token) keep their meaning.
  if (!st.config.special_tokens_in_content) {
    const Engine* engine = st.engine.get();
    in.client_text = [engine](std::string_view s) { return engine->quote_special(std::string(s)); };
  }
  if (opts.tools.active()) {
    if (st.chat_template->reads_tools()) {
      in.tools_json = opts.tools.tools_json;
    } else if (!in.messages.empty()) {
      // A template that ignores `tools` would drop them silently: describe them in the system
      // message, or ahead of the first message when there is none (some templates refuse a
      // system role), in the <tool_call> format the reply parser reads.
      ChatMessage& first = in.messages.front();
      const std::string text = tools_prompt_text(opts.tools);
      first.content = first.role == "system" ? first.content + "\n\n" + text : text + "\n\n" + first.content;
    }
  }
  in.kwargs_json = opts.template_kwargs_json;
  in.add_generation_prompt = opts.add_generation_prompt && !opts.continue_final_message;
  in.bos_token = st.info.bos_token;
  in.eos_token = st.info.eos_token;
  const std::string last = in.messages.empty() ? std::string()
                           : in.client_text     ? in.client_text(in.messages.back().content)
                                                : in.messages.back().content;
  auto text = st.chat_template->render(in);
  if (!text.is_ok() || !opts.continue_final_message) return text;
  // As transformers does: keep the text up to the end of the final
  // message's content, dropping the end-of-turn the template wrote after it.
  const size_t at = last.empty() ? std::string::npos : text.value().rfind(last);
  if (at == std::string::npos)
    return error(ErrorKind::InvalidArgument,
                 "continue_final_message: the chat template does not write the final message's content as given");
  return text.value().substr(0, at + last.size());
}

Result<std::vector<int32_t>> chat_prompt_tokens(const Server::State& st, std::vector<ChatMessage> messages,
                                                const ChatPromptOptions& opts) {
  auto text = chat_prompt_text(st, std::move(messages), opts);
  TERN_RETURN_IF_ERROR(text.status());
  // Templates that write BOS themselves must not get a second one.
  const std::string& bos = st.info.bos_token;
  const bool has_bos = !bos.empty() && text.value().rfind(bos, 0) == 0;
  std::vector<int32_t> tokens = st.engine->tokenize(text.value(), !has_bos, !st.config.special_tokens_in_content);
  if (tokens.empty()) return error(ErrorKind::InvalidArgument, "the rendered prompt has no tokens");
  return tokens;
}

void handle_chat(const std::shared_ptr<Server::State>& st, HttpRequest req, Responder r) {
  const std::string endpoint = "/v1/chat/completions";
  auto parsed = parse_chat_request(req.body);
  if (auto* e = std::get_if<ApiError>(&parsed)) return send_error(*st, r, endpoint, *e);
  ChatRequest& chat = std::get<ChatRequest>(parsed);
  if (!check_model(*st, r, endpoint, chat.params.model)) return;
  auto prompt = chat_prompt_tokens(*st, std::move(chat.messages), chat.prompt);
  if (!prompt.is_ok()) return send_error(*st, r, endpoint, api_error_from_status(prompt.status(), "messages"));
  std::vector<std::vector<int32_t>> prompts{std::move(prompt).value()};
  ToolsRequest& tools = chat.prompt.tools;
  if (tools.choice == ToolChoice::Required || tools.choice == ToolChoice::Named) {
    // The reply is the call: JSON by grammar (the named function's arguments, or an array of calls).
    auto schema = forced_tool_schema(tools);
    if (!schema.is_ok()) return send_error(*st, r, endpoint, api_error_from_status(schema.status(), "tools"));
    chat.params.constraint = {ConstraintKind::JsonSchema, std::move(schema).value()};
  }
  auto job = make_job(st, std::move(r), true, std::move(chat.params));
  job->tools = std::move(tools);
  launch(job, std::move(prompts));
}

void handle_completion(const std::shared_ptr<Server::State>& st, HttpRequest req, Responder r) {
  const std::string endpoint = "/v1/completions";
  auto parsed = parse_completion_request(req.body);
  if (auto* e = std::get_if<ApiError>(&parsed)) return send_error(*st, r, endpoint, *e);
  CompletionRequest& cr = std::get<CompletionRequest>(parsed);
  if (!check_model(*st, r, endpoint, cr.params.model)) return;
  auto job = make_job(st, std::move(r), false, std::move(cr.params));
  job->echo = cr.echo;
  std::vector<std::vector<int32_t>> prompts;
  for (Prompt& p : cr.prompts) {
    if (p.is_tokens) {  // ids outside the vocabulary are refused in launch(), by the engine's rule
      if (job->echo) job->prompt_texts.push_back(st->engine->detokenize(p.tokens));
      prompts.push_back(std::move(p.tokens));
    } else {
      if (job->echo) job->prompt_texts.push_back(p.text);
      prompts.push_back(st->engine->tokenize(p.text, true));
    }
    if (prompts.back().empty()) {
      ApiError e;
      e.param = "prompt";
      e.message = "a prompt has no tokens";
      return send_error(*st, job->responder, endpoint, e);
    }
  }
  launch(job, std::move(prompts));
}

}  // namespace tern::server
