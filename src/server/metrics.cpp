#include "server/metrics.h"

#include <cmath>
#include <cstdio>
#include <string_view>

#include "core/utf8.h"

namespace tern::server {

namespace {

std::string num(double v) {
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  if (std::isnan(v)) return "NaN";
  char b[40];
  std::snprintf(b, sizeof b, "%.17g", v);
  return b;
}

// Label values: backslash, double quote and newline are escaped (exposition
// format), and bytes that are not UTF-8 become U+FFFD (the format is UTF-8).
std::string escape_label(std::string_view s) {
  std::string o;
  for (size_t i = 0; i < s.size();) {
    const utf8::Decoded d = utf8::decode(s, i);
    if (!d.valid) {
      utf8::append(o, utf8::kReplacementChar);
    } else if (s[i] == '\\') {
      o += "\\\\";
    } else if (s[i] == '"') {
      o += "\\\"";
    } else if (s[i] == '\n') {
      o += "\\n";
    } else {
      o.append(s, i, d.n_bytes);
    }
    i += d.n_bytes;
  }
  return o;
}

// Every endpoint label that can appear: requests are counted under these and
// nothing else, so no request can add a series.
constexpr std::string_view kRouteLabels[] = {
    "/",           "/health",     "/metrics",         "/stats",
    "/tokenize",   "/detokenize", "/apply-template",  "/v1/models",       "/v1/models/{id}",
    "/v1/chat/completions",       "/v1/completions",  "/v1/embeddings",   "other",
};

void head(std::string& out, const char* name, const char* type, const char* help) {
  out += "# HELP ";
  out += name;
  out += ' ';
  out += help;
  out += "\n# TYPE ";
  out += name;
  out += ' ';
  out += type;
  out += '\n';
}

void sample(std::string& out, const std::string& name, double v, const std::string& labels = "") {
  out += name;
  if (!labels.empty()) out += "{" + labels + "}";
  out += ' ';
  out += num(v);
  out += '\n';
}

std::vector<double> latency_buckets() {
  return {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0,
          80.0};
}

std::vector<double> token_buckets() {
  return {1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072};
}

}  // namespace

Histogram::Histogram(std::vector<double> upper_bounds)
    : bounds_(std::move(upper_bounds)), counts_(bounds_.size() + 1, 0) {}

void Histogram::observe(double v) {
  if (std::isnan(v)) return;
  size_t i = 0;
  while (i < bounds_.size() && v > bounds_[i]) ++i;
  std::lock_guard lock(mu_);
  ++counts_[i];
  sum_ += v;
  ++count_;
}

void Histogram::render(const std::string& name, std::string& out) const {
  std::lock_guard lock(mu_);
  uint64_t cumulative = 0;
  for (size_t i = 0; i < bounds_.size(); ++i) {
    cumulative += counts_[i];
    sample(out, name + "_bucket", static_cast<double>(cumulative), "le=\"" + num(bounds_[i]) + "\"");
  }
  sample(out, name + "_bucket", static_cast<double>(count_), "le=\"+Inf\"");
  sample(out, name + "_sum", sum_);
  sample(out, name + "_count", static_cast<double>(count_));
}

Metrics::Metrics()
    : ttft_(latency_buckets()),
      itl_(latency_buckets()),
      e2e_(latency_buckets()),
      prompt_len_(token_buckets()),
      gen_len_(token_buckets()) {}

const char* route_label(std::string_view path) {
  if (path.rfind("/v1/models/", 0) == 0) return "/v1/models/{id}";
  for (std::string_view label : kRouteLabels)
    if (label == path) return label.data();  // each is a literal: NUL-terminated
  return "other";
}

void Metrics::count_request(std::string_view endpoint, int status) {
  const std::string label = route_label(endpoint) == std::string_view("other") ? "other" : std::string(endpoint);
  // HTTP status codes are three digits; anything else would be a new series too.
  const int code = status >= 100 && status <= 599 ? status : 0;
  std::lock_guard lock(mu_);
  ++requests_[{label, code}];
}

void Metrics::observe_generation(const RequestOutput& o, const char* finish_reason) {
  {
    std::lock_guard lock(mu_);
    prompt_tokens_ += static_cast<uint64_t>(o.n_tokens_prompt);
    generation_tokens_ += static_cast<uint64_t>(o.n_tokens_generated);
    cached_tokens_ += static_cast<uint64_t>(o.n_tokens_cached);
    ++finished_[finish_reason];
  }
  if (o.n_tokens_generated > 0) ttft_.observe(o.ttft_ms / 1000.0);
  e2e_.observe(o.e2e_ms / 1000.0);
  prompt_len_.observe(o.n_tokens_prompt);
  gen_len_.observe(o.n_tokens_generated);
}

std::string Metrics::render(const EngineStats& s, const std::string& model_name, int64_t http_buffered_bytes,
                            int http_connections) const {
  std::string out;
  const std::string model = "model_name=\"" + escape_label(model_name) + "\"";
  {
    std::lock_guard lock(mu_);
    head(out, "tern_http_requests_total", "counter", "HTTP requests answered, by endpoint and status code.");
    for (const auto& [key, n] : requests_)
      sample(out, "tern_http_requests_total", static_cast<double>(n),
             "endpoint=\"" + escape_label(key.first) + "\",status=\"" + std::to_string(key.second) + "\"");
    head(out, "tern_request_success_total", "counter", "Finished generations (choices), by finish reason.");
    for (const auto& [reason, n] : finished_)
      sample(out, "tern_request_success_total", static_cast<double>(n),
             model + ",finished_reason=\"" + escape_label(reason) + "\"");
    head(out, "tern_requests_rejected_total", "counter", "Requests refused with 429 because the queue was full.");
    sample(out, "tern_requests_rejected_total", static_cast<double>(rejected_), model);
    head(out, "tern_prompt_tokens_total", "counter", "Prompt tokens of finished generations.");
    sample(out, "tern_prompt_tokens_total", static_cast<double>(prompt_tokens_), model);
    head(out, "tern_generation_tokens_total", "counter", "Generated tokens of finished generations.");
    sample(out, "tern_generation_tokens_total", static_cast<double>(generation_tokens_), model);
    head(out, "tern_prompt_tokens_cached_total", "counter", "Prompt tokens served from the prefix cache.");
    sample(out, "tern_prompt_tokens_cached_total", static_cast<double>(cached_tokens_), model);
  }
  head(out, "tern_time_to_first_token_seconds", "histogram", "Time from arrival to the first generated token.");
  ttft_.render("tern_time_to_first_token_seconds", out);
  head(out, "tern_inter_token_latency_seconds", "histogram", "Time between consecutive streamed tokens.");
  itl_.render("tern_inter_token_latency_seconds", out);
  head(out, "tern_e2e_request_latency_seconds", "histogram", "Time from arrival to the last token.");
  e2e_.render("tern_e2e_request_latency_seconds", out);
  head(out, "tern_request_prompt_tokens", "histogram", "Prompt length of finished generations.");
  prompt_len_.render("tern_request_prompt_tokens", out);
  head(out, "tern_request_generation_tokens", "histogram", "Generated length of finished generations.");
  gen_len_.render("tern_request_generation_tokens", out);

  head(out, "tern_num_requests_running", "gauge", "Sequences in the running batch.");
  sample(out, "tern_num_requests_running", s.n_running, model);
  head(out, "tern_num_requests_waiting", "gauge", "Sequences waiting to be scheduled.");
  sample(out, "tern_num_requests_waiting", s.n_waiting, model);
  head(out, "tern_num_requests_swapped", "gauge", "Preempted sequences whose KV blocks are swapped to host memory.");
  sample(out, "tern_num_requests_swapped", s.n_swapped, model);
  head(out, "tern_kv_cache_usage_ratio", "gauge", "Fraction of KV-cache blocks in use (0 to 1).");
  sample(out, "tern_kv_cache_usage_ratio",
         s.kv_blocks_total > 0 ? static_cast<double>(s.kv_blocks_used) / s.kv_blocks_total : 0.0, model);
  head(out, "tern_kv_cache_blocks", "gauge", "KV-cache blocks by state.");
  sample(out, "tern_kv_cache_blocks", s.kv_blocks_used, model + ",state=\"used\"");
  sample(out, "tern_kv_cache_blocks", s.kv_blocks_free, model + ",state=\"free\"");
  sample(out, "tern_kv_cache_blocks", s.kv_blocks_cached, model + ",state=\"cached\"");
  head(out, "tern_prefix_cache_hit_ratio", "gauge", "Prompt tokens found in the prefix cache / tokens looked up.");
  sample(out, "tern_prefix_cache_hit_ratio", s.prefix_hit_rate, model);
  head(out, "tern_prefix_cache_queries_total", "counter", "Prompt tokens looked up in the prefix cache.");
  sample(out, "tern_prefix_cache_queries_total", static_cast<double>(s.prefix_lookup_tokens), model);
  head(out, "tern_prefix_cache_hits_total", "counter", "Prompt tokens found in the prefix cache.");
  sample(out, "tern_prefix_cache_hits_total", static_cast<double>(s.prefix_hit_tokens), model);
  head(out, "tern_num_preemptions_total", "counter", "Sequences preempted (recompute or swap).");
  sample(out, "tern_num_preemptions_total", static_cast<double>(s.n_preemptions), model);
  head(out, "tern_kv_swaps_lost_total", "counter", "Swapped-out K/V found damaged on the way back (recomputed instead).");
  sample(out, "tern_kv_swaps_lost_total", static_cast<double>(s.n_swaps_lost), model);
  head(out, "tern_kv_blocks_evicted_total", "counter", "KV blocks given back by eviction by importance (kv_evict).");
  sample(out, "tern_kv_blocks_evicted_total", static_cast<double>(s.kv_blocks_evicted), model);
  head(out, "tern_engine_steps_total", "counter", "Engine steps (one forward pass each).");
  sample(out, "tern_engine_steps_total", static_cast<double>(s.n_steps), model);
  head(out, "tern_engine_step_tokens_total", "counter", "Tokens run through the model.");
  sample(out, "tern_engine_step_tokens_total", static_cast<double>(s.n_tokens_stepped), model);
  head(out, "tern_spec_proposed_tokens_total", "counter", "Speculative decoding: proposed tokens verified.");
  sample(out, "tern_spec_proposed_tokens_total", static_cast<double>(s.spec_proposed), model);
  head(out, "tern_spec_accepted_tokens_total", "counter", "Speculative decoding: proposed tokens accepted.");
  sample(out, "tern_spec_accepted_tokens_total", static_cast<double>(s.spec_accepted), model);
  head(out, "tern_spec_verify_steps_total", "counter",
       "Speculative decoding: sequence-steps that verified proposals (accepted / this = mean accepted length).");
  sample(out, "tern_spec_verify_steps_total", static_cast<double>(s.spec_verifies), model);
  head(out, "tern_spec_branch_accepted_tokens_total", "counter",
       "Speculative decoding: accepted tokens that a token tree had off its first path (--spec-tree).");
  sample(out, "tern_spec_branch_accepted_tokens_total", static_cast<double>(s.spec_branch_accepted), model);
  head(out, "tern_spec_draft_seconds_total", "counter", "Speculative decoding: time spent proposing (draft model passes).");
  sample(out, "tern_spec_draft_seconds_total", s.spec_draft_time_s, model);
  // One series per expert: the label set is bounded by the model's expert_count (<= 512).
  if (!s.moe_expert_tokens.empty()) {
    head(out, "tern_moe_expert_tokens_total", "counter",
         "Mixture of experts: tokens routed to each expert, summed over layers.");
    for (size_t e = 0; e < s.moe_expert_tokens.size(); ++e)
      sample(out, "tern_moe_expert_tokens_total", static_cast<double>(s.moe_expert_tokens[e]),
             model + ",expert=\"" + std::to_string(e) + "\"");
  }
  head(out, "tern_http_buffered_bytes", "gauge", "Request bodies not yet handled plus response bytes not yet sent.");
  sample(out, "tern_http_buffered_bytes", static_cast<double>(http_buffered_bytes));
  head(out, "tern_http_connections", "gauge", "Open client connections.");
  sample(out, "tern_http_connections", http_connections);
  return out;
}

}  // namespace tern::server
