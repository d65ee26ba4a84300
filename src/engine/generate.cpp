#include "engine/generate.h"

#include <chrono>

#include "engine/kv_budget.h"
#include "model/batch_runner.h"
#include "sampling/stop.h"

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

namespace {
double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}
}  // namespace

Result<GenerateResult> generate(const Model& model, const Tokenizer& tokenizer, const std::vector<TokenId>& prompt,
                                const GenerateOptions& o, const TextCallback& on_text) {
  TERN_RETURN_IF_ERROR(o.sampling.validate());
  if (prompt.empty()) return error(ErrorKind::InvalidArgument, "the prompt has no tokens (nothing to condition on)");
  if (o.max_tokens < 0) return error(ErrorKind::InvalidArgument, "max_tokens must be >= 0");
  const HParams& hp = model.hparams();
  const int n_ctx = o.n_ctx > 0 ? o.n_ctx : hp.n_ctx_train;
  if (static_cast<int>(prompt.size()) >= n_ctx)
    return error(ErrorKind::OutOfRange, "the prompt has " + std::to_string(prompt.size()) + " tokens, " +
                                            std::to_string(prompt.size() - n_ctx + 1) + " more than the context of " +
                                            std::to_string(n_ctx) + " allows");
  for (TokenId t : prompt)
    if (t < 0 || t >= hp.n_vocab)
      return error(ErrorKind::InvalidArgument, "prompt token id " + std::to_string(t) + " is outside the vocabulary of " +
                                                   std::to_string(hp.n_vocab));
  warn_past_training_context(hp, n_ctx);
  TERN_RETURN_IF_ERROR(check_kv_fits_memory(static_cast<uint64_t>(BatchRunner::kv_bytes(model, 1, n_ctx)),
                                            "a KV cache for a context of " + std::to_string(n_ctx) + " tokens",
                                            "lower the context size (-c)"));
  auto runner = BatchRunner::create(model, 1, n_ctx);
  TERN_RETURN_IF_ERROR(runner.status());
  BatchRunner& kv = *runner.value();
  const SeqId seq(0);
  Sampler sampler(o.sampling, hp.n_vocab);
  if (o.penalize_prompt)
    for (TokenId t : prompt) sampler.accept(t);

  GenerateResult result;
  result.n_prompt = static_cast<int>(prompt.size());
  std::vector<float> logits;
  Batch batch;

  const auto t_prompt = std::chrono::steady_clock::now();
  const int n_batch = std::max(1, o.n_batch);
  for (size_t i = 0; i < prompt.size(); i += n_batch) {
    batch.clear();
    const size_t end = std::min(prompt.size(), i + n_batch);
    for (size_t j = i; j < end; ++j) batch.add(prompt[j], static_cast<int32_t>(j), seq, j + 1 == prompt.size());
    TERN_RETURN_IF_ERROR(kv.forward(batch, logits));
  }
  result.prompt_ms = ms_since(t_prompt);

  // The first generated text is at the start of the text when the prompt holds only control tokens (e.g. BOS).
  bool at_text_start = true;
  for (TokenId t : prompt)
    if (!tokenizer.is_control(t)) at_text_start = false;
  StreamDecoder decoder(tokenizer, at_text_start);
  StopMatcher stops(o.stop);
  auto emit = [&](const std::string& piece) {
    if (piece.empty()) return true;
    result.text += piece;
    return on_text ? on_text(piece) : true;
  };

  const auto t_gen = std::chrono::steady_clock::now();
  int32_t pos = static_cast<int32_t>(prompt.size());
  bool stopped = false;
  for (int n = 0; n < o.max_tokens && !stopped; ++n) {
    const TokenId tok = sampler.sample(std::span<float>(logits.data(), hp.n_vocab));
    sampler.accept(tok);
    result.tokens.push_back(tok);
    if (!o.ignore_eos && tokenizer.is_eog(tok)) {
      result.finish = FinishReason::Eos;
      stopped = true;
      break;
    }
    auto step = stops.push(decoder.push(tok));
    if (!emit(step.emit)) stopped = true;
    if (step.stopped) {
      result.finish = FinishReason::Stop;
      stopped = true;
      break;
    }
    if (n + 1 == o.max_tokens) break;
    if (pos >= n_ctx) {
      result.finish = FinishReason::Context;
      break;
    }
    batch.clear();
    batch.add(tok, pos++, seq, true);
    TERN_RETURN_IF_ERROR(kv.forward(batch, logits));
  }
  if (result.finish != FinishReason::Stop) {
    auto tail = stops.push(decoder.flush());
    emit(tail.emit);
    if (tail.stopped) result.finish = FinishReason::Stop;
    else emit(stops.flush());
  }
  result.generate_ms = ms_since(t_gen);
  return result;
}

}  // namespace tern
