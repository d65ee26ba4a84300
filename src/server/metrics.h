// server/metrics.h — the server's Prometheus metrics (text exposition format 0.0.4).
//
// Contract: counters and histograms are updated lock-free-ish from any thread
// (one mutex per family, held for a few additions); render() writes every
// family with # HELP and # TYPE lines, cumulative histogram buckets ending in
// +Inf, _sum and _count, label values escaped — the output passes
// `promtool check metrics`. Engine gauges (running, waiting, KV use, prefix
// hit ratio, preemptions) are taken from an EngineStats snapshot at render time.
//
// Names follow Prometheus conventions (base units: seconds; _total for
// counters) under the prefix tern_.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "tern/engine.h"

namespace tern::server {

class Histogram {
 public:
  explicit Histogram(std::vector<double> upper_bounds);
  void observe(double v);
  // Appends the _bucket/_sum/_count lines for `name`.
  void render(const std::string& name, std::string& out) const;

 private:
  std::vector<double> bounds_;
  mutable std::mutex mu_;
  std::vector<uint64_t> counts_;  // [bounds + 1], not cumulative; last = above every bound
  double sum_ = 0;
  uint64_t count_ = 0;
};

// The metrics label of a request path: the route it names ("/v1/models/{id}"
// for any model id), or "other". The set of labels is fixed.
const char* route_label(std::string_view path);

class Metrics {
 public:
  Metrics();
  // One finished HTTP request, by route label (see route_label; anything else
  // is counted as "other") and status code.
  void count_request(std::string_view endpoint, int status);
  // One finished generation (a choice): its figures from the engine.
  void observe_generation(const RequestOutput& final_output, const char* finish_reason);
  void observe_itl(double seconds) { itl_.observe(seconds); }
  void observe_queue_rejected() { std::lock_guard l(mu_); ++rejected_; }
  // http_*: the transport's figures (HttpServer::buffered_bytes, n_connections).
  std::string render(const EngineStats& stats, const std::string& model_name, int64_t http_buffered_bytes = 0,
                     int http_connections = 0) const;

 private:
  mutable std::mutex mu_;
  std::map<std::pair<std::string, int>, uint64_t> requests_;  // guarded by mu_
  std::map<std::string, uint64_t> finished_;                  // by finish reason; guarded by mu_
  uint64_t prompt_tokens_ = 0, generation_tokens_ = 0, cached_tokens_ = 0, rejected_ = 0;  // guarded by mu_
  Histogram ttft_, itl_, e2e_, prompt_len_, gen_len_;
};

}  // namespace tern::server
