#include "loadgen/runner.h"

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <deque>
#include <nlohmann/json.hpp>

namespace tern::loadgen {
namespace {

namespace asio = boost::asio;
using json = nlohmann::json;

Clock::duration to_duration(double seconds) {
  return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
}

// The state of one run, owned by run_requests() and touched only by handlers
// on its io_context thread.
class Schedule {
 public:
  Schedule(asio::io_context& io, HttpClient& client, const RunConfig& cfg, const std::vector<RequestSpec>& specs)
      : io_(io), client_(client), cfg_(cfg), specs_(specs), arrival_timer_(io), stop_timer_(io) {
    offsets_ = arrival_offsets(specs.size(), cfg.arrivals);
    result_.requests.resize(specs.size());
    for (size_t i = 0; i < specs.size(); ++i) {
      result_.requests[i].n_prompt_tokens_expected = specs[i].n_prompt_tokens;
      result_.requests[i].max_tokens = specs[i].max_tokens;
    }
  }

  RunResult run() {
    origin_ = Clock::now();
    if (cfg_.max_duration_s > 0) {
      stop_timer_.expires_at(origin_ + to_duration(cfg_.max_duration_s));
      stop_timer_.async_wait([this](boost::system::error_code ec) {
        if (!ec) stop();
      });
    }
    on_arrival();
    io_.run();
    double last_end = 0;
    for (const auto& r : result_.requests)
      if (r.sent) last_end = std::max(last_end, r.call.t_end);
    result_.duration_s = last_end;
    return std::move(result_);
  }

 private:
  void on_arrival() {
    const double now = std::chrono::duration<double>(Clock::now() - origin_).count();
    while (next_ < specs_.size() && offsets_[next_] <= now) waiting_.push_back(next_++);
    pump();
    if (next_ < specs_.size() && !stopped_) {
      arrival_timer_.expires_at(origin_ + to_duration(offsets_[next_]));
      arrival_timer_.async_wait([this](boost::system::error_code ec) {
        if (!ec) on_arrival();
      });
    }
    maybe_finish();
  }

  void pump() {
    while (!stopped_ && !waiting_.empty() &&
           (cfg_.max_concurrency <= 0 || n_in_flight_ < static_cast<size_t>(cfg_.max_concurrency))) {
      const size_t i = waiting_.front();
      waiting_.pop_front();
      launch(i);
    }
  }

  void launch(size_t i) {
    ++n_in_flight_;
    result_.requests[i].sent = true;
    HttpCall call;
    call.path = cfg_.chat ? "/v1/chat/completions" : "/v1/completions";
    call.body = request_body(cfg_, specs_[i]);
    call.deadline = Clock::now() + to_duration(cfg_.timeout_s);
    client_.start(std::move(call), origin_, [this, i](CallRecord rec) {
      result_.requests[i].call = std::move(rec);
      --n_in_flight_;
      ++n_done_;
      if (cfg_.on_progress) cfg_.on_progress(n_done_, specs_.size());
      pump();
      maybe_finish();
    });
  }

  void stop() {
    stopped_ = true;
    result_.hit_max_duration = true;
    arrival_timer_.cancel();
    waiting_.clear();
    client_.cancel_all();
  }

  // Everything sent has ended and nothing more will be: release the timers so io.run() returns.
  void maybe_finish() {
    const bool all_arrived = next_ == specs_.size() || stopped_;
    if (all_arrived && waiting_.empty() && n_in_flight_ == 0) {
      arrival_timer_.cancel();
      stop_timer_.cancel();
    }
  }

  asio::io_context& io_;
  HttpClient& client_;
  const RunConfig& cfg_;
  const std::vector<RequestSpec>& specs_;
  std::vector<double> offsets_;
  asio::steady_timer arrival_timer_, stop_timer_;
  Clock::time_point origin_;
  std::deque<size_t> waiting_;
  size_t next_ = 0, n_in_flight_ = 0, n_done_ = 0;
  bool stopped_ = false;
  RunResult result_;
};

}  // namespace

std::string request_body(const RunConfig& cfg, const RequestSpec& spec) {
  json body;
  body["model"] = cfg.model;
  if (cfg.chat) body["messages"] = json::array({{{"role", "user"}, {"content", spec.prompt}}});
  else body["prompt"] = spec.prompt;
  body["max_tokens"] = spec.max_tokens;
  body["stream"] = true;
  body["stream_options"] = {{"include_usage", true}};
  if (cfg.ignore_eos) body["ignore_eos"] = true;
  return body.dump(-1, ' ', false, json::error_handler_t::replace);
}

RunResult run_requests(const RunConfig& cfg, const std::vector<RequestSpec>& specs) {
  asio::io_context io;
  auto client = HttpClient::create(io, cfg.url, cfg.api_key);
  if (!client) {
    RunResult failed;
    failed.requests.resize(specs.size());
    for (auto& r : failed.requests) {
      r.sent = true;
      r.call.error_type = "connect";
      r.call.error_message = client.status().message();
    }
    return failed;
  }
  Schedule schedule(io, **client, cfg, specs);
  return schedule.run();
}

Result<std::string> discover_model(const HttpUrl& url, const std::string& api_key, double timeout_s) {
  auto body = http_get(url, "/v1/models", timeout_s, api_key);
  if (!body) return body.status().with_context("finding the model (give --model to skip this)");
  const json j = json::parse(*body, nullptr, /*allow_exceptions=*/false);
  if (j.is_object()) {
    const auto data = j.find("data");
    if (data != j.end() && data->is_array() && !data->empty() && (*data)[0].is_object()) {
      const auto id = (*data)[0].find("id");
      if (id != (*data)[0].end() && id->is_string()) return id->get<std::string>();
    }
  }
  return error(ErrorKind::InvalidArgument, "GET /v1/models listed no model id; give --model NAME");
}

}  // namespace tern::loadgen
