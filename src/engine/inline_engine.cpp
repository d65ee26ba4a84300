#include "engine/inline_engine.h"

#include <new>

namespace tern {

InlineEngine::InlineEngine(std::unique_ptr<EngineCore> core)
    : core_(std::move(core)), outputs_(core_->tokenizer()) {}

Result<std::unique_ptr<InlineEngine>> InlineEngine::create(const EngineConfig& config) {
  auto core = EngineCore::create(config);
  TERN_RETURN_IF_ERROR(core.status());
  return std::unique_ptr<InlineEngine>(new InlineEngine(std::move(core).value()));
}

void InlineEngine::add(RequestId id, const PreparedRequest& prepared, OutputCallback on_output) {
  outputs_.add(id, prepared, std::move(on_output), core_->now_s());
  // Single-threaded callers (the CLI) have nothing to wait for: out of memory ends the command.
  if (!core_->add(id, prepared)) throw std::bad_alloc();
}

Status InlineEngine::step() {
  step_outputs_.clear();
  const Status s = core_->step(step_outputs_);
  to_cancel_.clear();
  outputs_.process(step_outputs_, to_cancel_);
  for (RequestId id : to_cancel_) core_->cancel(id);
  return s;
}

}  // namespace tern
