// bench_http_httplib — the SSE workload of sse_workload.h on cpp-httplib
// (Debian's libcpp-httplib-dev), written the way that library is meant to be
// used: Server::Post with Response::set_chunked_content_provider.
//
// Shape: cpp-httplib serves each connection on one thread of its task queue
// for the connection's whole life, and the chunked content provider is called
// on that thread and may block. So each provider waits on a server-wide tick
// clock (one thread, every tick_ms, the stand-in for the engine's step) and
// writes one event per tick. A connection that finds every pool thread busy
// waits in the queue; a client that stops reading blocks its thread in send()
// until the library's write timeout (5 s).
//
// Usage: bench_http_httplib [--port P] [--tick-ms D] [--pool N] [--backlog B]
//   --pool 0 (default) keeps the library's own pool (max(8, cores - 1)
//   threads); --pool N installs a ThreadPool of N threads through
//   Server::new_task_queue. --backlog 0 (default) keeps the library's listen
//   backlog, CPPHTTPLIB_LISTEN_BACKLOG = 5, compiled into Debian's .so; a burst
//   of connects overflows it and the kernel drops SYNs (clients retry after
//   1 s, 3 s, 7 s ...). --backlog B calls listen() again with B. Prints "port N" once listening; serves until
//   killed. Once a second the stream counts go to stderr when they changed.
#include <httplib.h>

#include <sys/socket.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <memory>
#include <mutex>
#include <thread>

#include "sse_workload.h"

namespace {

using namespace tern::bench_http;

// The step clock: tick() advances it and wakes every waiting provider.
class TickClock {
 public:
  uint64_t now() {
    std::lock_guard lock(mu_);
    return tick_;
  }
  // Blocks until the clock has moved past `seen`; returns the new tick.
  uint64_t wait_after(uint64_t seen) {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return tick_ > seen; });
    return tick_;
  }
  void run(int tick_ms) {
    auto next = std::chrono::steady_clock::now();
    for (;;) {
      next += std::chrono::milliseconds(tick_ms);
      std::this_thread::sleep_until(next);
      {
        std::lock_guard lock(mu_);
        ++tick_;
      }
      cv_.notify_all();
    }
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  uint64_t tick_ = 0;  // guarded by mu_
};

// Exposes the listening socket so its backlog can be raised after bind.
class TunableServer : public httplib::Server {
 public:
  bool set_listen_backlog(int backlog) { return ::listen(svr_sock_, backlog) == 0; }
};

struct StreamState {
  StreamParams params;
  int i_next = 0;
  uint64_t tick_seen = 0;
};

}  // namespace

int main(int argc, char** argv) {
  const int port = static_cast<int>(flag_value(argc, argv, "--port", 0));
  const int tick_ms = static_cast<int>(flag_value(argc, argv, "--tick-ms", kDefaultTickMs));
  const int n_pool = static_cast<int>(flag_value(argc, argv, "--pool", 0));
  const int backlog = static_cast<int>(flag_value(argc, argv, "--backlog", 0));

  TickClock clock;
  StreamCounters counters;
  TunableServer server;
  if (n_pool > 0) server.new_task_queue = [n_pool] { return new httplib::ThreadPool(static_cast<size_t>(n_pool)); };

  server.Post("/stream", [&](const httplib::Request& req, httplib::Response& res) {
    auto state = std::make_shared<StreamState>();
    state->params.n_events =
        static_cast<int>(parse_clamped(req.get_param_value("k"), kDefaultEvents, 0, kMaxEvents));
    state->params.pad_bytes = parse_clamped(req.get_param_value("pad"), 0, 0, kMaxPadBytes);
    state->tick_seen = clock.now();
    counters.n_started++;
    res.set_header("Cache-Control", "no-cache");
    res.set_chunked_content_provider("text/event-stream", [state, &clock, &counters](size_t, httplib::DataSink& sink) {
      state->tick_seen = clock.wait_after(state->tick_seen);
      if (state->i_next < state->params.n_events) {
        const std::string ev = format_event(state->i_next++, state->params.pad_bytes);
        if (sink.write(ev.data(), ev.size())) return true;
        counters.n_dropped++;
        return false;
      }
      if (!sink.write(kDoneEvent.data(), kDoneEvent.size())) {
        counters.n_dropped++;
        return false;
      }
      counters.n_finished++;
      sink.done();
      return true;
    });
  });

  const int bound = port == 0 ? server.bind_to_any_port("127.0.0.1") : (server.bind_to_port("127.0.0.1", port) ? port : -1);
  if (bound < 0) {
    std::fprintf(stderr, "bench_http_httplib: cannot listen on 127.0.0.1:%d\n", port);
    return 1;
  }
  if (backlog > 0 && !server.set_listen_backlog(backlog)) {
    std::fprintf(stderr, "bench_http_httplib: cannot set the listen backlog to %d\n", backlog);
    return 1;
  }
  announce_port(bound);
  std::thread(&TickClock::run, &clock, tick_ms).detach();
  std::thread(report_counters, "bench_http_httplib", std::cref(counters)).detach();
  return server.listen_after_bind() ? 0 : 1;
}
