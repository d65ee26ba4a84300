#include "engine/generate.h"

#include <condition_variable>
#include <mutex>
#include <optional>

namespace tern {

EngineConfig single_sequence_config(const std::string& model_path, int32_t n_ctx, int n_threads) {
  EngineConfig c;
  c.model_path = model_path;
  c.n_ctx = n_ctx;
  c.n_threads = n_threads;
  c.max_num_seqs = 1;
  c.kv_exact_contexts = true;
  c.kv_type = KvType::F32;
  c.prefix_caching = false;
  return c;
}

Result<GenerateResult> generate(Engine& engine, std::vector<TokenId> prompt, const GenerateOptions& o,
                                const TextCallback& on_text) {
  GenerationRequest req;
  req.prompt_tokens = std::move(prompt);
  if (req.prompt_tokens.empty()) return error(ErrorKind::InvalidArgument, "the prompt has no tokens (nothing to condition on)");
  req.sampling = o.sampling;
  req.max_tokens = o.max_tokens;
  req.stop = o.stop;
  req.ignore_eos = o.ignore_eos;
  req.constraint = o.constraint;
  std::mutex mu;
  std::condition_variable cv;
  GenerateResult result;
  std::optional<RequestOutput> last;
  bool stop_early = false;
  auto id = engine.add_request(std::move(req), [&](const RequestOutput& out) {
    const bool keep = out.text.empty() || !on_text || on_text(out.text);
    std::lock_guard lock(mu);
    if (out.has_token) result.tokens.push_back(out.token);
    result.text += out.text;
    if (!keep) stop_early = true;
    if (out.finish) last = out;
    cv.notify_all();
  });
  TERN_RETURN_IF_ERROR(id.status());
  std::unique_lock lock(mu);
  for (bool cancelled = false; !last;) {
    if (stop_early && !cancelled) {
      engine.cancel(*id);
      cancelled = true;
    }
    cv.wait(lock, [&] { return last.has_value() || (stop_early && !cancelled); });
  }
  if (*last->finish == FinishReason::Error) return error(ErrorKind::Internal, "generation failed: " + last->error);
  result.finish = *last->finish;
  result.n_prompt = last->n_tokens_prompt;
  result.prompt_ms = last->ttft_ms;
  result.generate_ms = last->e2e_ms - last->ttft_ms;
  return result;
}

}  // namespace tern
