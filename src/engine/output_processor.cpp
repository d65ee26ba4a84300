#include "engine/output_processor.h"

#include <algorithm>

#include "core/assert.h"

namespace tern {

struct OutputProcessor::Request {
  RequestId id;
  StreamDecoder decoder;
  StopMatcher stops;
  OutputCallback on_output;
  int32_t n_prompt = 0;
  int32_t n_generated = 0;
  double t_arrival = 0, t_first = -1, t_last = 0, itl_sum = 0;
  int64_t n_itl = 0;

  Request(RequestId id_, const Tokenizer& tok, const PreparedRequest& p, OutputCallback cb, double t)
      : id(id_),
        // The first generated text starts the text when the prompt holds only control tokens (e.g. BOS).
        decoder(tok, std::all_of(p.prompt.begin(), p.prompt.end(), [&](TokenId x) { return tok.is_control(x); })),
        stops(p.request.stop),
        on_output(std::move(cb)),
        n_prompt(static_cast<int32_t>(p.prompt.size())),
        t_arrival(t) {}
};

OutputProcessor::OutputProcessor(const Tokenizer& tokenizer) : tok_(tokenizer) {}
OutputProcessor::~OutputProcessor() = default;

void OutputProcessor::add(RequestId id, const PreparedRequest& p, OutputCallback on_output, double t_arrival_s) {
  requests_[id] = std::make_unique<Request>(id, tok_, p, std::move(on_output), t_arrival_s);
}

void OutputProcessor::process(std::span<const CoreOutput> outs, std::vector<RequestId>& to_cancel) {
  for (const CoreOutput& o : outs) {
    auto it = requests_.find(o.id);
    if (it == requests_.end()) continue;  // already finished here (a stop string): the core's tail is dropped
    Request& r = *it->second;
    for (size_t i = 0; i < o.tokens.size() && requests_.contains(o.id); ++i) deliver_token(r, o, i, to_cancel);
    if (o.tokens.empty() && o.finish && requests_.contains(o.id)) finish(r, *o.finish, &o, nullptr);
  }
}

void OutputProcessor::deliver_token(Request& r, const CoreOutput& o, size_t i, std::vector<RequestId>& to_cancel) {
  const TokenId tok = o.tokens[i];
  const bool last = i + 1 == o.tokens.size();
  RequestOutput out;
  out.id = r.id;
  out.has_token = true;
  out.token = tok;
  if (i < o.logprobs.size()) out.logprob = o.logprobs[i];
  if (i < o.top_logprobs.size()) out.top_logprobs = o.top_logprobs[i];
  if (i == 0) {
    out.prompt_logprobs = o.prompt_logprobs;
    out.embedding = o.embedding;
  }
  ++r.n_generated;
  if (r.t_first < 0) {
    r.t_first = o.t_s;
  } else {
    r.itl_sum += o.t_s - r.t_last;
    ++r.n_itl;
  }
  r.t_last = o.t_s;
  const std::optional<FinishReason> core_finish = last ? o.finish : std::nullopt;
  if (core_finish == FinishReason::Eos) return finish(r, FinishReason::Eos, &o, &out);  // the EOS token has no text
  const StopMatcher::Step step = r.stops.push(r.decoder.push(tok));
  out.text = step.emit;
  if (step.stopped) {
    if (!core_finish) to_cancel.push_back(r.id);
    return finish(r, FinishReason::Stop, &o, &out);
  }
  if (core_finish) return finish(r, *core_finish, &o, &out);
  if (r.on_output) r.on_output(out);
}

// Builds the final output (flushing held-back text), delivers it and forgets the request.
void OutputProcessor::finish(Request& r, FinishReason reason, const CoreOutput* o, RequestOutput* last) {
  RequestOutput out = last ? std::move(*last) : RequestOutput{};
  out.id = r.id;
  out.finish = reason;
  if (o && reason == FinishReason::Error) out.error = o->error;
  if (o && !last) {  // a request that ended with no token
    out.prompt_logprobs = o->prompt_logprobs;
    out.embedding = o->embedding;
  }
  // Deliver any text still held by the decoder or the stop matcher.
  if (reason != FinishReason::Stop && reason != FinishReason::Error) {
    const StopMatcher::Step tail = r.stops.push(r.decoder.flush());
    out.text += tail.emit;
    if (tail.stopped)
      out.finish = FinishReason::Stop;
    else
      out.text += r.stops.flush();
  }
  const double now = o ? o->t_s : r.t_last;
  out.n_tokens_prompt = r.n_prompt;
  out.n_tokens_generated = r.n_generated;
  if (o) {
    out.n_tokens_cached = o->n_tokens_cached;
    out.n_preemptions = o->n_preemptions;
  }
  out.ttft_ms = r.t_first >= 0 ? (r.t_first - r.t_arrival) * 1e3 : 0.0;
  out.itl_ms_mean = r.n_itl > 0 ? r.itl_sum / static_cast<double>(r.n_itl) * 1e3 : 0.0;
  out.e2e_ms = (now - r.t_arrival) * 1e3;
  OutputCallback cb = std::move(r.on_output);
  requests_.erase(r.id);  // r is gone from here on
  if (cb) cb(out);
}

}  // namespace tern
