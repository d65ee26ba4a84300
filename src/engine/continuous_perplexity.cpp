#include "engine/continuous_perplexity.h"

#include <algorithm>
#include <charconv>
#include <cmath>

#include "engine/inline_engine.h"
#include "engine/streaming.h"

namespace tern {

Result<ContinuousMode> parse_continuous_mode(std::string_view text) {
  ContinuousMode m;
  m.name = std::string(text);
  if (text == "dense") return m;
  if (text.starts_with("recompute:")) {
    const std::string_view w = text.substr(10);
    auto [p, ec] = std::from_chars(w.data(), w.data() + w.size(), m.window);
    if (ec != std::errc() || p != w.data() + w.size() || m.window < 1)
      return error(ErrorKind::InvalidArgument, "mode '" + m.name + "': expected recompute:W with W >= 1");
    m.kind = ContinuousMode::Kind::Recompute;
    return m;
  }
  if (text.starts_with("h2o:")) {
    auto e = parse_kv_evict(text);
    if (!e) return error(ErrorKind::InvalidArgument, "mode '" + m.name + "': " + e.status().message());
    m.kind = ContinuousMode::Kind::Evict;
    m.evict = *e;
    m.evict.during_prompt = true;
    return m;
  }
  auto s = parse_streaming(text);
  if (!s || s->mode == StreamingMode::Off)
    return error(ErrorKind::InvalidArgument,
                 "mode '" + m.name + "': expected dense, SINKS,WINDOW, shift[:SINKS], h2o:BUDGET,RECENT or recompute:W");
  m.kind = ContinuousMode::Kind::Streaming;
  m.streaming = *s;
  return m;
}

namespace {

// Runs the requests to the end. Request 0 scores every token of its prompt
// from the second on: nll[j] = -(its log-probability j); request i > 0 (a
// recomputed window of `window` tokens and the one it predicts) only its
// last: nll[window + i - 1].
Status score(InlineEngine& e, const std::vector<GenerationRequest>& reqs, size_t window, std::vector<double>& nll) {
  size_t next = 0, live = 0;
  Status failed;
  auto add_more = [&]() -> Status {
    while (next < reqs.size() && live < 256) {  // a bounded queue: prompts are copied into the engine
      auto p = e.prepare(reqs[next]);
      TERN_RETURN_IF_ERROR(p.status());
      const size_t i = next++;
      ++live;
      e.add(RequestId(i + 1), *p, [&, i](const RequestOutput& o) {
        const auto& lps = o.prompt_logprobs;
        if (i == 0)
          for (size_t j = 0; j < lps.size(); ++j) nll[j] = -lps[j].logprob;
        else if (!lps.empty())
          nll[window + i - 1] = -lps.back().logprob;
        if (o.finish) {
          --live;
          if (*o.finish == FinishReason::Error) failed = error(ErrorKind::Internal, "scoring failed: " + o.error);
        }
      });
    }
    return Status::ok();
  };
  TERN_RETURN_IF_ERROR(add_more());
  while (e.has_work()) {
    TERN_RETURN_IF_ERROR(e.step());
    TERN_RETURN_IF_ERROR(failed);
    TERN_RETURN_IF_ERROR(add_more());
  }
  return Status::ok();
}

}  // namespace

Result<std::vector<double>> continuous_nll(const EngineConfig& base, const std::vector<TokenId>& tokens,
                                           const ContinuousMode& mode) {
  if (tokens.size() < 2) return error(ErrorKind::InvalidArgument, "the text has fewer than two tokens: nothing to score");
  if (tokens.size() > (size_t{1} << 28)) return error(ErrorKind::InvalidArgument, "the text is too long to score as one sequence");
  EngineConfig c = base;
  c.prefix_caching = false;
  c.spec = SpecMethod::None;
  c.kv_memory_bytes = 0;
  c.kv_exact_contexts = true;
  c.max_num_seqs = 1;
  GenerationRequest scoring;  // every request: its prompt scored, nothing generated
  scoring.max_tokens = 0;
  scoring.prompt_logprobs = 0;
  GenerationRequest whole = scoring;
  whole.prompt_tokens = tokens;
  std::vector<GenerationRequest> reqs;
  switch (mode.kind) {
    case ContinuousMode::Kind::Dense:
      c.n_ctx = static_cast<int32_t>(tokens.size()) + 1;
      reqs.push_back(whole);
      break;
    case ContinuousMode::Kind::Streaming:
      whole.streaming = mode.streaming;
      if (mode.streaming.mode == StreamingMode::Window)  // room for the sinks, the window and a chunk
        c.n_ctx = mode.streaming.sinks + mode.streaming.window + std::max(c.max_batched_tokens, 2 * c.block_size);
      else  // a shift cuts before each chunk: block-sized chunks keep each token's context as decoding would
        c.max_batched_tokens = c.block_size;
      reqs.push_back(whole);
      break;
    case ContinuousMode::Kind::Evict:
      // Keys stay at their true positions: the context stretches to the text,
      // and block-sized chunks let each token see what decoding would have kept.
      whole.kv_evict = mode.evict;
      c.n_ctx = static_cast<int32_t>(tokens.size()) + 1;
      c.max_batched_tokens = c.block_size;
      reqs.push_back(whole);
      break;
    case ContinuousMode::Kind::Recompute: {
      // The first W + 1 tokens as one prompt (each token sees all before it),
      // then one request per token: the W tokens before it and itself.
      const size_t w = static_cast<size_t>(mode.window);
      c.n_ctx = mode.window + 2;
      c.max_num_seqs = 64;
      c.kv_exact_contexts = false;
      GenerationRequest first = scoring;
      first.prompt_tokens.assign(tokens.begin(), tokens.begin() + static_cast<ptrdiff_t>(std::min(tokens.size(), w + 1)));
      reqs.push_back(first);
      for (size_t t = w + 1; t < tokens.size(); ++t) {
        GenerationRequest r = scoring;
        r.prompt_tokens.assign(tokens.begin() + static_cast<ptrdiff_t>(t - w), tokens.begin() + static_cast<ptrdiff_t>(t + 1));
        reqs.push_back(std::move(r));
      }
      break;
    }
  }
  auto e = InlineEngine::create(c);
  TERN_RETURN_IF_ERROR(e.status());
  std::vector<double> nll(tokens.size() - 1, std::nan(""));
  TERN_RETURN_IF_ERROR(score(**e, reqs, static_cast<size_t>(mode.window), nll));
  for (double x : nll)
    if (std::isnan(x)) return error(ErrorKind::Internal, "a token was left unscored");
  return nll;
}

std::vector<double> segment_perplexities(const std::vector<double>& nll, size_t segment) {
  std::vector<double> out;
  for (size_t i = 0; i < nll.size(); i += segment) {
    const size_t end = std::min(nll.size(), i + segment);
    double sum = 0;
    for (size_t j = i; j < end; ++j) sum += nll[j];
    out.push_back(std::exp(sum / static_cast<double>(end - i)));
  }
  return out;
}

}  // namespace tern
