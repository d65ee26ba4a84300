// bench/http/sse_workload.h — the synthetic SSE workload both bench servers
// serve, so that only the HTTP layer differs between them.
//
// Contract: POST /stream?k=K&pad=P answers `text/event-stream` with K events
//   data: {"i":N,"text":"tok"}\n\n        (N = 0 .. K-1; "tok" plus P bytes of 'x')
// one per tick of a server-wide clock (every tick_ms, like a decode step),
// then `data: [DONE]\n\n`. K defaults to 24, P to 0. The first event goes out
// on the first tick after the request arrived, so time-to-first-event is at
// most one tick plus the transport's own delay.
//
// Threading: pure functions, and StreamCounters (atomics) that any thread may
// bump while report_counters() prints them from its own thread.
#pragma once

#include <atomic>
#include <charconv>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <thread>

namespace tern::bench_http {

constexpr int kDefaultEvents = 24;
constexpr int kDefaultTickMs = 20;
constexpr int kMaxEvents = 1 << 20;
constexpr int64_t kMaxPadBytes = 8 << 20;

struct StreamParams {
  int n_events = kDefaultEvents;
  int64_t pad_bytes = 0;
};

// The value of `name` in a query string "a=1&b=2", or "" when absent.
inline std::string_view query_value(std::string_view query, std::string_view name) {
  while (!query.empty()) {
    const size_t amp = query.find('&');
    const std::string_view pair = query.substr(0, amp);
    const size_t eq = pair.find('=');
    if (pair.substr(0, eq) == name) return eq == std::string_view::npos ? std::string_view{} : pair.substr(eq + 1);
    if (amp == std::string_view::npos) break;
    query.remove_prefix(amp + 1);
  }
  return {};
}

inline int64_t parse_clamped(std::string_view text, int64_t fallback, int64_t lo, int64_t hi) {
  int64_t v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc{} || end != text.data() + text.size()) return fallback;
  return v < lo ? lo : (v > hi ? hi : v);
}

// Parses k= and pad= from the query part of a target ("/stream?k=24&pad=0").
inline StreamParams parse_stream_params(std::string_view query) {
  StreamParams p;
  p.n_events = static_cast<int>(parse_clamped(query_value(query, "k"), kDefaultEvents, 0, kMaxEvents));
  p.pad_bytes = parse_clamped(query_value(query, "pad"), 0, 0, kMaxPadBytes);
  return p;
}

// One SSE event: `data: {"i":N,"text":"tok<pad>"}\n\n`.
inline std::string format_event(int i, int64_t pad_bytes) {
  std::string s = "data: {\"i\":" + std::to_string(i) + ",\"text\":\"tok";
  s.append(static_cast<size_t>(pad_bytes), 'x');
  s += "\"}\n\n";
  return s;
}

inline constexpr std::string_view kDoneEvent = "data: [DONE]\n\n";

// Command-line flag "--name value" as an int, or fallback.
inline int64_t flag_value(int argc, char** argv, std::string_view name, int64_t fallback) {
  for (int i = 1; i + 1 < argc; ++i)
    if (name == argv[i]) return parse_clamped(argv[i + 1], fallback, INT32_MIN, INT32_MAX);
  return fallback;
}

// The servers print this one line once listening; run.sh waits for it.
inline void announce_port(int port) {
  std::printf("port %d\n", port);
  std::fflush(stdout);
}

struct StreamCounters {
  std::atomic<int64_t> n_started{0};
  std::atomic<int64_t> n_finished{0};
  std::atomic<int64_t> n_dropped{0};  // a write failed: client gone, or closed by the transport
};

// Runs forever: once a second, the counts to stderr when they changed.
inline void report_counters(const char* server_name, const StreamCounters& c) {
  int64_t last = -1;
  for (;;) {
    std::this_thread::sleep_for(std::chrono::seconds(1));
    const int64_t sum = c.n_started + c.n_finished + c.n_dropped;
    if (sum == last) continue;
    last = sum;
    std::fprintf(stderr, "%s: started=%lld finished=%lld dropped=%lld\n", server_name,
                 static_cast<long long>(c.n_started.load()), static_cast<long long>(c.n_finished.load()),
                 static_cast<long long>(c.n_dropped.load()));
  }
}

}  // namespace tern::bench_http
