// loadgen/runner.h — drives one benchmark run against an OpenAI-compatible server.
//
// Contract: run_requests() sends every RequestSpec once, as a streaming
// /v1/completions (or /v1/chat/completions with chat) request, at the times
// arrival_offsets() gives, never more than max_concurrency at once (a request
// whose arrival time has come waits in FIFO order for a free slot; its clock
// starts when it is actually sent). It returns when every request has ended or
// max_duration_s has passed (then in-flight requests are cancelled and those
// not yet sent are marked not sent). Every request is bounded by timeout_s.
// Warm-up is the caller's business: run a few requests first and discard them.
// Threading: blocking; runs its own io_context on the calling thread. The
// progress callback is called on that thread.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "core/status.h"
#include "loadgen/arrivals.h"
#include "loadgen/dataset.h"
#include "loadgen/openai_client.h"

namespace tern::loadgen {

struct RunConfig {
  HttpUrl url;
  std::string api_key;
  std::string model;
  bool chat = false;
  bool ignore_eos = false;
  ArrivalConfig arrivals;   // rate infinity = all at once
  int max_concurrency = 0;  // 0 = no cap
  double timeout_s = 600;   // per request
  double max_duration_s = 0;  // 0 = unbounded
  std::function<void(size_t n_done, size_t n_total)> on_progress;
};

struct RequestResult {
  int n_prompt_tokens_expected = 0;  // the dataset's count
  int max_tokens = 0;
  bool sent = false;
  CallRecord call;
};

struct RunResult {
  std::vector<RequestResult> requests;  // in dataset order
  double duration_s = 0;                // first send scheduled -> last request ended
  bool hit_max_duration = false;
};

// The JSON body of one streaming request (stream_options.include_usage set;
// ignore_eos only when asked, since not every server accepts it).
std::string request_body(const RunConfig& cfg, const RequestSpec& spec);

RunResult run_requests(const RunConfig& cfg, const std::vector<RequestSpec>& specs);

// The first model id GET /v1/models lists.
Result<std::string> discover_model(const HttpUrl& url, const std::string& api_key, double timeout_s);

}  // namespace tern::loadgen
