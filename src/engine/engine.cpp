// tern::Engine: the thread-safe front of EngineCore, on two threads.
//
//   callers ──add_request/cancel──► inbox ──► step thread: EngineCore::step()
//                                                  │ CoreOutputs (token ids)
//            register events ──► output queue ◄────┘
//                                     │
//                               output thread: OutputProcessor (detokenise,
//                               stop strings, timing) -> callbacks
//
// A request's registration is queued for the output thread before the
// request enters the inbox, so the processor knows it before any of its
// outputs arrive. Callbacks run on the output thread, never the step thread:
// their work (the server builds JSON there) overlaps the next forward pass.
// A stop string found there cancels the request in the core.
#include "tern/engine.h"

#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <deque>
#include <new>
#include <thread>

#include "core/log.h"
#include "engine/engine_core.h"

namespace tern {

const char* finish_reason_name(FinishReason r) {
  switch (r) {
    case FinishReason::Length: return "length";
    case FinishReason::Stop: return "stop";
    case FinishReason::Eos: return "eos";
    case FinishReason::Context: return "context";
    case FinishReason::Cancelled: return "cancelled";
    case FinishReason::Error: return "error";
  }
  return "?";
}

struct Engine::Impl {
  std::unique_ptr<EngineCore> core;
  std::unique_ptr<OutputProcessor> processor;  // output thread only
  std::thread step_thread, output_thread;
  std::atomic<uint64_t> next_id{1};

  // Step side.
  mutable std::mutex mu;
  std::condition_variable cv;
  struct Pending {
    RequestId id;
    PreparedRequest prepared;
  };
  std::vector<Pending> inbox;     // guarded by mu
  std::vector<RequestId> cancels; // guarded by mu
  bool stopping = false;          // guarded by mu
  EngineStats snapshot;           // guarded by mu

  // Output side.
  struct Event {
    enum class Kind { Register, Outputs, Stop } kind;
    RequestId id;
    std::unique_ptr<PreparedRequest> prepared;  // Register
    OutputCallback on_output;                   // Register
    double t_arrival_s = 0;                     // Register
    std::vector<CoreOutput> outputs;            // Outputs
  };
  std::mutex out_mu;
  std::condition_variable out_cv;
  std::deque<Event> events;  // guarded by out_mu

  void post(Event e) {
    {
      std::lock_guard lock(out_mu);
      events.push_back(std::move(e));
    }
    out_cv.notify_one();
  }

  void cancel(RequestId id) {
    {
      std::lock_guard lock(mu);
      cancels.push_back(id);
    }
    cv.notify_one();
  }

  // Hands a step's outputs to the output thread. False when memory ran out: `outs` stays as it
  // was, to be handed over later (the event's node is allocated before anything moves).
  bool post_outputs(std::vector<CoreOutput>& outs) {
    {
      std::lock_guard lock(out_mu);
      try {
        events.emplace_back();
      } catch (const std::bad_alloc&) {
        return false;
      }
      events.back().kind = Event::Kind::Outputs;
      events.back().outputs.swap(outs);
    }
    out_cv.notify_one();
    return true;
  }

  // The step thread. When memory runs out (std::bad_alloc) it loses nothing: arrivals that could
  // not be queued, cancellations not yet recorded and outputs not yet handed over are kept and
  // tried again after a pause, while the core ends the requests of a step that failed.
  void run_steps() {
    std::vector<CoreOutput> outs;  // produced, not yet handed to the output thread
    std::vector<Pending> arrivals;
    std::vector<RequestId> cancelled;
    bool short_of_memory = false;
    for (;;) {
      bool stop = false;
      {
        std::unique_lock lock(mu);
        const auto ready = [&] {
          return stopping || !inbox.empty() || !cancels.empty() || core->has_work() || !arrivals.empty() ||
                 !cancelled.empty() || !outs.empty();
        };
        if (short_of_memory) cv.wait_for(lock, std::chrono::milliseconds(10), ready);
        else cv.wait(lock, ready);
        // Held-over ones go first, so the order of arrival is kept.
        if (arrivals.empty()) arrivals.swap(inbox);
        if (cancelled.empty()) cancelled.swap(cancels);
        stop = stopping;
      }
      short_of_memory = false;
      size_t n_added = 0;
      while (n_added < arrivals.size() && core->add(arrivals[n_added].id, arrivals[n_added].prepared)) ++n_added;
      arrivals.erase(arrivals.begin(), arrivals.begin() + static_cast<std::ptrdiff_t>(n_added));
      try {
        for (RequestId id : cancelled) core->cancel(id);  // recording one twice is harmless
        cancelled.clear();
        if (stop) core->cancel_all();
      } catch (const std::bad_alloc&) {
        short_of_memory = true;
      }
      short_of_memory = short_of_memory || !arrivals.empty();
      if (core->has_work()) {
        const Status st = core->step(outs);  // appends: outputs not yet handed over stay first
        if (!st.is_ok()) {
          TERN_LOG_ERROR("engine: step: %s", st.message().c_str());
          if (st.kind() == ErrorKind::Unavailable) short_of_memory = true;
        }
      }
      // The counters before the outputs: a client that got its last token and then asks for
      // /stats sees the step that produced it. (When copying them runs out of memory they stay
      // as they were.)
      {
        std::lock_guard lock(mu);
        try {
          snapshot = core->stats();
        } catch (const std::bad_alloc&) {
          short_of_memory = true;
        }
      }
      if (!outs.empty() && !post_outputs(outs)) short_of_memory = true;
      {
        std::lock_guard lock(mu);
        if (stop && !core->has_work() && outs.empty() && arrivals.empty()) return;
      }
    }
  }

  void run_outputs() {
    std::vector<RequestId> to_cancel;
    for (;;) {
      Event e;
      {
        std::unique_lock lock(out_mu);
        out_cv.wait(lock, [&] { return !events.empty(); });
        e = std::move(events.front());
        events.pop_front();
      }
      switch (e.kind) {
        case Event::Kind::Register:
          processor->add(e.id, *e.prepared, std::move(e.on_output), e.t_arrival_s);
          break;
        case Event::Kind::Outputs:
          to_cancel.clear();
          processor->process(e.outputs, to_cancel);
          for (RequestId id : to_cancel) cancel(id);  // a stop string: the core stops generating
          break;
        case Event::Kind::Stop:
          return;
      }
    }
  }
};

Result<std::unique_ptr<Engine>> Engine::create(const EngineConfig& config) {
  auto core = EngineCore::create(config);
  TERN_RETURN_IF_ERROR(core.status());
  std::unique_ptr<Engine> engine(new Engine());
  engine->impl_ = std::make_unique<Impl>();
  Impl& impl = *engine->impl_;
  impl.core = std::move(core).value();
  impl.processor = std::make_unique<OutputProcessor>(impl.core->tokenizer());
  impl.snapshot = impl.core->stats();
  // Named, for top -H, perf and debuggers (and the allocation-failure test, which finds the step
  // thread by its name).
  impl.output_thread = std::thread([&impl] {
    pthread_setname_np(pthread_self(), "tern-output");
    impl.run_outputs();
  });
  impl.step_thread = std::thread([&impl] {
    pthread_setname_np(pthread_self(), "tern-step");
    impl.run_steps();
  });
  return engine;
}

Engine::~Engine() { shutdown(); }

Result<RequestId> Engine::add_request(GenerationRequest request, OutputCallback on_output) {
  // The input processor reads only immutable model/tokenizer state: safe off the step thread.
  auto prepared = impl_->core->prepare(std::move(request));
  TERN_RETURN_IF_ERROR(prepared.status());
  const RequestId id(impl_->next_id.fetch_add(1));
  const double t_arrival = impl_->core->now_s();
  {
    std::lock_guard lock(impl_->mu);
    if (impl_->stopping) return error(ErrorKind::Unavailable, "the engine is shutting down");
    // Room in the inbox first: once registered, the request must reach the inbox. (Out of
    // memory before that throws std::bad_alloc to the caller with nothing registered.)
    std::vector<Impl::Pending>& inbox = impl_->inbox;
    if (inbox.size() == inbox.capacity()) inbox.reserve(std::max<size_t>(16, 2 * inbox.size()));
    Impl::Event reg{Impl::Event::Kind::Register, id, std::make_unique<PreparedRequest>(prepared.value()),
                    std::move(on_output), t_arrival, {}};
    impl_->post(std::move(reg));
    impl_->inbox.push_back({id, std::move(prepared).value()});
  }
  impl_->cv.notify_one();
  return id;
}

void Engine::cancel(RequestId id) { impl_->cancel(id); }

EngineStats Engine::stats() const {
  std::lock_guard lock(impl_->mu);
  return impl_->snapshot;
}

ContextCheck Engine::check_context(int64_t n_prompt, int64_t max_tokens,
                                   const std::optional<StreamingParams>& streaming) const {
  return impl_->core->input().check_context(n_prompt, max_tokens, streaming);
}

Status Engine::validate(const GenerationRequest& request) const {
  return impl_->core->prepare(request).status();
}

ModelInfo Engine::model_info() const {
  const EngineCore& core = *impl_->core;
  const HParams& hp = core.model().hparams();
  ModelInfo info;
  auto name = core.model().file().get_string("general.name");
  if (name.is_ok()) info.name = name.value();
  info.n_ctx_model = core.n_ctx();
  info.n_ctx = static_cast<int32_t>(std::min<int64_t>(info.n_ctx_model, core.max_seq_positions()));
  info.n_vocab = hp.n_vocab;
  info.n_embd = hp.n_embd;
  info.streaming = core.input().limits().streaming;
  auto tmpl = core.model().file().get_string("tokenizer.chat_template");
  if (tmpl.is_ok()) info.chat_template = tmpl.value();
  const Vocab& vocab = core.tokenizer().vocab();
  if (vocab.valid_id(vocab.bos)) info.bos_token = vocab.texts[vocab.bos];
  if (vocab.valid_id(vocab.eos)) info.eos_token = vocab.texts[vocab.eos];
  return info;
}

std::vector<int32_t> Engine::tokenize(const std::string& text, bool add_special, bool quoted) const {
  if (quoted) return impl_->core->tokenizer().encode_quoted(text, add_special);
  return impl_->core->tokenizer().encode(text, add_special, /*parse_special=*/true);
}

std::string Engine::quote_special(const std::string& text) const {
  return impl_->core->tokenizer().quote_special(text);
}

std::string Engine::detokenize(const std::vector<int32_t>& tokens) const {
  return impl_->core->tokenizer().decode(tokens);
}

int32_t Engine::bos_token_id() const { return impl_->core->tokenizer().bos_id(); }

int Engine::n_threads() const { return impl_->core->model().backend().n_threads(); }

std::string Engine::token_piece(int32_t token) const {
  return impl_->core->tokenizer().token_to_piece(token, /*render_special=*/true);
}

void Engine::shutdown() {
  if (!impl_ || !impl_->step_thread.joinable()) return;
  {
    std::lock_guard lock(impl_->mu);
    impl_->stopping = true;
  }
  impl_->cv.notify_one();
  impl_->step_thread.join();
  // Every request has ended in the core; the output thread delivers the rest, then stops.
  impl_->post({Impl::Event::Kind::Stop, RequestId(), nullptr, nullptr, 0, {}});
  impl_->output_thread.join();
}

}  // namespace tern
