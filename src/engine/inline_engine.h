// engine/inline_engine.h — the engine core and its output processor on the
// caller's thread: add requests, call step() until has_work() is false, and
// the callbacks run inside step(). What tern::Engine does on two threads,
// without threads: for tests that drive steps one by one, and for callers
// that want deterministic single-threaded control.
#pragma once

#include <memory>
#include <vector>

#include "engine/engine_core.h"
#include "engine/output_processor.h"

namespace tern {

class InlineEngine {
 public:
  static Result<std::unique_ptr<InlineEngine>> create(const EngineConfig& config);

  Result<PreparedRequest> prepare(GenerationRequest request) const { return core_->prepare(std::move(request)); }
  void add(RequestId id, const PreparedRequest& prepared, OutputCallback on_output);
  void cancel(RequestId id) { core_->cancel(id); }
  bool has_work() const { return core_->has_work(); }
  // One engine step; its outputs are delivered before it returns.
  Status step();

  EngineStats stats() const { return core_->stats(); }
  const Tokenizer& tokenizer() const { return core_->tokenizer(); }
  EngineCore& core() { return *core_; }

 private:
  InlineEngine(std::unique_ptr<EngineCore> core);
  std::unique_ptr<EngineCore> core_;
  OutputProcessor outputs_;
  std::vector<CoreOutput> step_outputs_;
  std::vector<RequestId> to_cancel_;
};

}  // namespace tern
