// tern::Engine: the thread-safe front of EngineCore. Callers hand requests and
// cancellations to an inbox; one step thread moves them into the core between
// steps, runs steps while there is work and sleeps on a condition variable
// when there is none.
#include "tern/engine.h"

#include <algorithm>
#include <atomic>
#include <thread>

#include "core/log.h"
#include "engine/engine_core.h"

namespace tern {

struct Engine::Impl {
  std::unique_ptr<EngineCore> core;
  std::thread loop;
  mutable std::mutex mu;
  std::condition_variable cv;
  struct Pending {
    RequestId id;
    PreparedRequest prepared;
    OutputCallback on_output;
  };
  std::vector<Pending> inbox;     // guarded by mu
  std::vector<RequestId> cancels; // guarded by mu
  bool stopping = false;          // guarded by mu
  EngineStats snapshot;           // guarded by mu
  std::atomic<uint64_t> next_id{1};

  void run() {
    for (;;) {
      std::vector<Pending> arrivals;
      std::vector<RequestId> cancelled;
      bool stop = false;
      {
        std::unique_lock lock(mu);
        cv.wait(lock, [&] { return stopping || !inbox.empty() || !cancels.empty() || core->has_work(); });
        arrivals.swap(inbox);
        cancelled.swap(cancels);
        stop = stopping;
      }
      for (Pending& p : arrivals) core->add(p.id, std::move(p.prepared), std::move(p.on_output));
      for (RequestId id : cancelled) core->cancel(id);
      if (stop) core->cancel_all();
      if (core->has_work()) {
        const Status st = core->step();
        if (!st.is_ok()) TERN_LOG_ERROR("engine: step: %s", st.message().c_str());
      }
      {
        std::lock_guard lock(mu);
        snapshot = core->stats();
        if (stop && !core->has_work()) return;
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
  impl.snapshot = impl.core->stats();
  impl.loop = std::thread([&impl] { impl.run(); });
  return engine;
}

Engine::~Engine() { shutdown(); }

Result<RequestId> Engine::add_request(GenerationRequest request, OutputCallback on_output) {
  // prepare() reads only immutable model/tokenizer state: safe off the step thread.
  auto prepared = impl_->core->prepare(std::move(request));
  TERN_RETURN_IF_ERROR(prepared.status());
  const RequestId id(impl_->next_id.fetch_add(1));
  {
    std::lock_guard lock(impl_->mu);
    if (impl_->stopping) return error(ErrorKind::Unavailable, "the engine is shutting down");
    impl_->inbox.push_back({id, std::move(prepared).value(), std::move(on_output)});
  }
  impl_->cv.notify_one();
  return id;
}

void Engine::cancel(RequestId id) {
  {
    std::lock_guard lock(impl_->mu);
    impl_->cancels.push_back(id);
  }
  impl_->cv.notify_one();
}

EngineStats Engine::stats() const {
  std::lock_guard lock(impl_->mu);
  return impl_->snapshot;
}

ModelInfo Engine::model_info() const {
  const HParams& hp = impl_->core->model().hparams();
  ModelInfo info;
  auto name = impl_->core->model().file().get_string("general.name");
  if (name.is_ok()) info.name = name.value();
  info.n_ctx_model = impl_->core->n_ctx();
  info.n_ctx = static_cast<int32_t>(std::min<int64_t>(info.n_ctx_model, impl_->core->max_seq_positions()));
  info.n_vocab = hp.n_vocab;
  auto tmpl = impl_->core->model().file().get_string("tokenizer.chat_template");
  if (tmpl.is_ok()) info.chat_template = tmpl.value();
  const Vocab& vocab = impl_->core->tokenizer().vocab();
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

std::string Engine::token_piece(int32_t token) const {
  return impl_->core->tokenizer().token_to_piece(token, /*render_special=*/true);
}

void Engine::shutdown() {
  if (!impl_ || !impl_->loop.joinable()) return;
  {
    std::lock_guard lock(impl_->mu);
    impl_->stopping = true;
  }
  impl_->cv.notify_one();
  impl_->loop.join();
}

}  // namespace tern
