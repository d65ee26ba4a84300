// loadgen/openai_client.h — an asynchronous HTTP/1.1 client for OpenAI-style
// streaming endpoints, on Boost.Asio/Beast.
//
// Contract:
// - parse_http_url() accepts only http://HOST[:PORT][/BASE] (https and other
//   schemes are refused with a clear error: the benchmark talks plain HTTP to
//   the URL it is given and nowhere else).
// - HttpClient::start() sends one request on its own connection and calls
//   done(record) exactly once, on the io_context's thread, when the exchange
//   ends: completed, HTTP error, connection error, stream error, the per-request
//   deadline, or cancel_all(). Streaming bodies go through SseParser; every
//   content chunk is timestamped when the read that completed it returns.
//   One io_context thread drives any number of concurrent streams.
// - Times in a CallRecord are seconds on std::chrono::steady_clock relative to
//   the `origin` the caller passes.
// Threading: an HttpClient and its calls live on one io_context run by one thread.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"

namespace tern::loadgen {

struct HttpUrl {
  std::string host;
  uint16_t port = 80;
  std::string base_path;  // "" or "/prefix" without a trailing slash
  std::string text() const;
};
Result<HttpUrl> parse_http_url(const std::string& url);

using Clock = std::chrono::steady_clock;

struct HttpCall {
  std::string method = "POST";  // POST or GET
  std::string path;             // appended to the URL's base path
  std::string body;             // JSON for POST
  bool stream = true;           // parse the body as server-sent events
  Clock::time_point deadline;
};

// What happened to one call. error_type is "" on success, else one of
// connect, timeout, http_<status>, stream_error, incomplete_stream,
// malformed_chunk, io_error, cancelled.
struct CallRecord {
  std::string error_type, error_message;
  int http_status = 0;
  double t_start = 0, t_end = 0;
  std::optional<double> t_first_token;
  std::vector<double> t_chunks;  // arrival of each chunk carrying content, in order
  std::optional<int> usage_prompt_tokens, usage_completion_tokens;
  size_t n_output_bytes = 0;
  std::string finish_reason;
  std::string body;  // non-streaming calls and error bodies (first 64 KiB)
  bool ok() const { return error_type.empty(); }
};

class HttpClient {
 public:
  // Resolves the URL's host once (blocking).
  static Result<std::unique_ptr<HttpClient>> create(boost::asio::io_context& io, const HttpUrl& url,
                                                    std::string api_key = {});
  ~HttpClient();
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;

  void start(HttpCall call, Clock::time_point origin, std::function<void(CallRecord)> done);
  void cancel_all();
  size_t n_in_flight() const;

  struct Impl;

 private:
  explicit HttpClient(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// One blocking GET on a private io_context; returns the body of a 200 answer.
Result<std::string> http_get(const HttpUrl& url, const std::string& path, double timeout_s,
                             const std::string& api_key = {});

}  // namespace tern::loadgen
