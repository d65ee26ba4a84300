#include "engine/input_processor.h"

#include <algorithm>
#include <string>

#include "engine/streaming.h"
#include "grammar/constraint.h"

namespace tern {

InputProcessor::InputProcessor(const Tokenizer& tokenizer, InputLimits limits) : tok_(tokenizer), limits_(limits) {
  for (TokenId t = 0; t < limits_.n_vocab; ++t)
    if (tok_.is_eog(t)) eog_ids_.push_back(t);
}

ContextCheck InputProcessor::check_context(int64_t n_prompt, int64_t max_tokens,
                                           const std::optional<StreamingParams>& streaming) const {
  ContextCheck c;
  c.limit = std::min<int64_t>(limits_.n_ctx, limits_.max_positions);
  c.limit_is_kv_pool = limits_.max_positions < limits_.n_ctx;
  c.n_ctx_model = limits_.n_ctx;
  c.n_prompt = n_prompt;
  c.max_tokens = max_tokens;
  if (streaming.value_or(limits_.streaming).mode != StreamingMode::Off) {
    // Positions are 32-bit: that is the only bound left (a long prompt is cut or windowed as it is computed).
    c.limit = kMaxStreamingPositions;
    c.limit_is_kv_pool = false;
  }
  if (n_prompt >= c.limit) {
    c.prompt_too_long = true;
    c.n_over = n_prompt - c.limit + 1;  // one position is needed to generate
  } else if (max_tokens > 0 && n_prompt + max_tokens > c.limit) {
    c.n_over = n_prompt + max_tokens - c.limit;
  }
  c.ok = c.n_over == 0;
  return c;
}

Result<PreparedRequest> InputProcessor::prepare(GenerationRequest request) const {
  TERN_RETURN_IF_ERROR(request.sampling.validate());
  if (request.max_tokens < 0) return error(ErrorKind::InvalidArgument, "max_tokens must be >= 0");
  if (request.n_logprobs < -1 || request.n_logprobs > 20)
    return error(ErrorKind::InvalidArgument, "top logprobs must be between 0 and 20");
  if (request.prompt_logprobs < -1 || request.prompt_logprobs > 20)
    return error(ErrorKind::InvalidArgument, "prompt logprobs must be between 0 and 20");
  const int n_vocab = limits_.n_vocab;
  PreparedRequest p;
  if (!request.prompt_tokens.empty()) {
    for (TokenId t : request.prompt_tokens)
      if (t < 0 || t >= n_vocab)
        return error(ErrorKind::InvalidArgument, "prompt token id " + std::to_string(t) +
                                                     " is outside the vocabulary of " + std::to_string(n_vocab));
    p.prompt = request.prompt_tokens;
  } else {
    p.prompt = tok_.encode(request.prompt, request.add_special, /*parse_special=*/true);
  }
  if (p.prompt.empty()) return error(ErrorKind::InvalidArgument, "the prompt has no tokens (nothing to condition on)");
  const int64_t n = static_cast<int64_t>(p.prompt.size());
  const StreamingParams streaming = request.streaming.value_or(limits_.streaming);
  auto window = streaming_window(streaming, std::min<int64_t>(limits_.n_ctx, limits_.max_positions), limits_.block_size);
  TERN_RETURN_IF_ERROR(window.status());
  p.window = *window;
  const KvEvictParams evict = request.kv_evict.value_or(limits_.kv_evict);
  if (evict.mode != KvEvictMode::Off && streaming.mode != StreamingMode::Off)
    return error(ErrorKind::InvalidArgument, "kv_evict '" + kv_evict_text(evict) + "' cannot be combined with streaming '" +
                                                 streaming_text(streaming) + "' (choose one way to drop the past)");
  TERN_RETURN_IF_ERROR(set_kv_evict(evict, limits_.block_size, p.window));
  if (streaming.mode != StreamingMode::Off) {
    const ContextCheck c = check_context(n, request.max_tokens, streaming);
    if (!c.ok)
      return error(ErrorKind::OutOfRange, "the prompt (" + std::to_string(n) + " tokens) and max_tokens (" +
                                              std::to_string(request.max_tokens) + ") pass the " +
                                              std::to_string(c.limit) + " positions a streaming sequence may reach");
  } else if (n >= limits_.n_ctx)
    return error(ErrorKind::OutOfRange, "the prompt has " + std::to_string(n) + " tokens, " +
                                            std::to_string(n - limits_.n_ctx + 1) + " more than the context of " +
                                            std::to_string(limits_.n_ctx) +
                                            " allows (one position is needed to generate)");
  const int bs = limits_.block_size;
  const int64_t blocks = (n + 1 + bs - 1) / bs;
  if (streaming.mode == StreamingMode::Off && blocks > limits_.n_blocks_total)
    return error(ErrorKind::OutOfRange, "the prompt needs " + std::to_string(blocks) + " KV blocks but the pool holds " +
                                            std::to_string(limits_.n_blocks_total) + " (raise --kv-memory)");
  std::erase_if(request.stop, [](const std::string& s) { return s.empty(); });
  if (!request.ignore_eos) p.stop_token_ids = eog_ids_;
  for (TokenId t : request.stop_token_ids) {
    if (t < 0 || t >= n_vocab)
      return error(ErrorKind::InvalidArgument, "stop token id " + std::to_string(t) + " is outside the vocabulary of " +
                                                   std::to_string(n_vocab));
    p.stop_token_ids.push_back(t);
  }
  for (const auto& [tok, bias] : request.logit_bias) {
    if (tok < 0 || tok >= n_vocab)
      return error(ErrorKind::InvalidArgument, "logit_bias token id " + std::to_string(tok) +
                                                   " is outside the vocabulary of " + std::to_string(n_vocab));
    if (!(bias >= -100.0f && bias <= 100.0f))
      return error(ErrorKind::InvalidArgument, "logit_bias values must be between -100 and 100");
  }
  if (request.constraint.kind != ConstraintKind::None) {
    // The grammar decides where the text ends; past its end only end-of-text fits.
    if (request.ignore_eos)
      return error(ErrorKind::InvalidArgument, "ignore_eos cannot be combined with a grammar or response format");
    auto g = grammar::compile_constraint(request.constraint);
    TERN_RETURN_IF_ERROR(g.status());
    p.grammar = std::move(g).value();
  }
  p.request = std::move(request);
  return p;
}

}  // namespace tern
