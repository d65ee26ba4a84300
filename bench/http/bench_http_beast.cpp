// bench_http_beast — the SSE workload of sse_workload.h on tern's own
// transport (tern::server::HttpServer, Boost.Asio/Beast).
//
// Shape: the handler only registers the stream (it must not block an I/O
// thread); one step thread wakes every tick and walks all live streams,
// writing one event to each, as the engine's step thread does in `tern serve`.
// write() never blocks, so the step thread's cost is per event, not per
// client, and a client that stops reading is the transport's problem.
//
// Usage: bench_http_beast [--port P] [--tick-ms D] [--io-threads T]
//   Prints "port N" once listening; serves until killed. Once a second the
//   stream counts go to stderr when they changed.
#include <atomic>
#include <chrono>
#include <cstdio>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "sse_workload.h"
#include "server/http_server.h"

namespace {

using namespace tern::bench_http;
using tern::server::HttpRequest;
using tern::server::HttpResponse;
using tern::server::Responder;
using tern::server::ResponseStream;

struct LiveStream {
  std::shared_ptr<ResponseStream> stream;
  StreamParams params;
  int i_next = 0;
};

class StepLoop {
 public:
  StepLoop(int tick_ms, StreamCounters& counters) : tick_ms_(tick_ms), counters_(counters) {}

  // Any thread (the I/O threads' handler).
  void add(LiveStream s) {
    std::lock_guard lock(mu_);
    pending_.push_back(std::move(s));
  }

  // Runs forever on its own thread.
  void run() {
    auto next = std::chrono::steady_clock::now();
    for (;;) {
      next += std::chrono::milliseconds(tick_ms_);
      std::this_thread::sleep_until(next);
      {
        std::lock_guard lock(mu_);
        for (auto& s : pending_) live_.push_back(std::move(s));
        pending_.clear();
      }
      step();
    }
  }

 private:
  // One event to every live stream; drops the finished and the closed.
  void step() {
    size_t n_kept = 0;
    for (auto& s : live_) {
      bool keep = true;
      if (s.i_next < s.params.n_events) {
        keep = s.stream->write(format_event(s.i_next++, s.params.pad_bytes));
        if (!keep) counters_.n_dropped++;
      } else {
        if (s.stream->write(std::string(kDoneEvent))) counters_.n_finished++;
        else counters_.n_dropped++;
        s.stream->finish();
        keep = false;
      }
      if (keep) live_[n_kept++] = std::move(s);
    }
    live_.resize(n_kept);
  }

  const int tick_ms_;
  StreamCounters& counters_;
  std::mutex mu_;
  std::vector<LiveStream> pending_;  // guarded by mu_
  std::vector<LiveStream> live_;     // step thread only
};

}  // namespace

int main(int argc, char** argv) {
  tern::server::HttpServerConfig config;
  config.port = static_cast<int>(flag_value(argc, argv, "--port", 0));
  config.n_io_threads = static_cast<int>(flag_value(argc, argv, "--io-threads", config.n_io_threads));
  const int tick_ms = static_cast<int>(flag_value(argc, argv, "--tick-ms", kDefaultTickMs));

  StreamCounters counters;
  StepLoop steps(tick_ms, counters);
  auto handler = [&](HttpRequest request, Responder responder) {
    if (request.method != "POST" || request.path != "/stream") {
      responder.respond(HttpResponse{404, "text/plain", "not found\n", {}});
      return;
    }
    const size_t q = request.target.find('?');
    const StreamParams params =
        parse_stream_params(q == std::string::npos ? std::string_view{} : std::string_view(request.target).substr(q + 1));
    counters.n_started++;
    steps.add(LiveStream{responder.start_stream(200, "text/event-stream", {{"Cache-Control", "no-cache"}}), params});
  };

  tern::server::HttpServer server(config, handler);
  if (tern::Status st = server.start(); !st) {
    std::fprintf(stderr, "bench_http_beast: %s\n", st.message().c_str());
    return 1;
  }
  announce_port(server.port());
  std::thread(&StepLoop::run, &steps).detach();
  std::thread(report_counters, "bench_http_beast", std::cref(counters)).detach();
  server.run();
  return 0;
}
