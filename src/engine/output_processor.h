// engine/output_processor.h — turns the core's token ids into what callers
// receive: text pieces that are always complete UTF-8 (StreamDecoder), stop
// strings held back until ruled out and matched across pieces (StopMatcher),
// logprobs, finish reasons and the timing figures (TTFT, inter-token latency,
// end to end). Runs off the step thread (Engine's output thread), so
// detokenising and the callbacks' own work (the server builds its JSON there)
// never stall the next forward pass.
//
// A stop string is found here, after the core sampled the token: the request
// is finished (Stop) at once and its id returned so the core cancels it; any
// output the core produced for it meanwhile is dropped. Figures count only the
// tokens delivered.
// Threading: one thread at a time.
#pragma once

#include <memory>
#include <span>
#include <unordered_map>
#include <vector>

#include "engine/input_processor.h"
#include "sampling/stop.h"
#include "tern/engine.h"
#include "tokenizer/tokenizer.h"

namespace tern {

// One request's progress in one engine step, as the core reports it: token
// ids (and their logprobs), or its end. Text is the output processor's job.
struct CoreOutput {
  RequestId id;
  std::vector<TokenId> tokens;
  std::vector<float> logprobs;                          // per token when asked
  std::vector<std::vector<TokenLogprob>> top_logprobs;  // per token when asked
  std::vector<PromptTokenLogprob> prompt_logprobs;      // once, with the first token (or the end)
  std::vector<float> embedding;                         // likewise
  std::optional<FinishReason> finish;
  std::string error;                                    // when finish == Error
  double t_s = 0;                                       // engine clock when produced
  // With finish: the request's figures.
  int32_t n_tokens_prompt = 0;
  int32_t n_tokens_cached = 0;
  int n_preemptions = 0;
};

class OutputProcessor {
 public:
  explicit OutputProcessor(const Tokenizer& tokenizer);
  ~OutputProcessor();

  // t_arrival_s: engine clock when the request arrived (TTFT counts from it).
  void add(RequestId id, const PreparedRequest& p, OutputCallback on_output, double t_arrival_s);
  // Delivers `outs` through the requests' callbacks; appends to `to_cancel`
  // the ids a stop string finished (the core must cancel them).
  void process(std::span<const CoreOutput> outs, std::vector<RequestId>& to_cancel);
  bool has_requests() const { return !requests_.empty(); }

 private:
  struct Request;
  void deliver_token(Request& r, const CoreOutput& o, size_t i, std::vector<RequestId>& to_cancel);
  void finish(Request& r, FinishReason reason, const CoreOutput* o, RequestOutput* last);

  const Tokenizer& tok_;
  std::unordered_map<RequestId, std::unique_ptr<Request>> requests_;
};

}  // namespace tern
