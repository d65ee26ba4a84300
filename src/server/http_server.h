// server/http_server.h — the HTTP/1.1 transport of `tern serve`, on Boost.Asio/Beast.
//
// Contract: HttpServer accepts connections on one listening socket and runs
// every socket asynchronously on a small pool of I/O threads, so the number
// of open connections (thousands of idle or streaming clients) costs memory,
// not threads. For each complete request it calls the handler once, on an I/O
// thread; the handler must not block. It answers through the Responder it is
// given, exactly once, from any thread and at any later time: a whole
// response, or a stream (server-sent events) written piece by piece.
//
// Flow control: a stream's write() never blocks its caller (the engine's step
// thread): bytes queue per connection and are sent as the socket drains. A
// client that stops reading has its connection closed when its queue passes
// max_stream_buffer_bytes or a write stalls for write_timeout_s; a client that
// goes away fires the Responder's disconnect callback once, so the request
// behind it can be cancelled. Memory per connection is therefore bounded.
//
// Requests: heads over 16 KiB or bodies over max_body_bytes are answered 413
// and the connection closed (a declared Content-Length is checked before the
// body is read; "Expect: 100-continue" is honoured); malformed requests get
// 400. Keep-alive and pipelined requests are served in order. An idle
// connection is closed after idle_timeout_s.
//
// Threading: start() binds and listens; run() blocks until stop(), which may
// be called from any thread (e.g. a signal handler's strand). Every public
// method is thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/status.h"

namespace tern::server {

using HeaderList = std::vector<std::pair<std::string, std::string>>;

struct HttpRequest {
  std::string method;  // as sent: GET, POST ...
  std::string target;  // path and query as sent
  std::string path;    // target without "?query"
  std::string body;
  HeaderList headers;  // names lower-cased
  std::string remote;  // peer address

  // The value of a header (name in lower case), or "" when absent.
  std::string_view header(std::string_view name) const;
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  HeaderList headers;  // extra headers
};

// The body of a streamed response.
class ResponseStream {
 public:
  virtual ~ResponseStream() = default;
  // Queues bytes for the client; never blocks. False once the stream is closed
  // (client gone, write stalled, queue over its limit, or finish() called).
  virtual bool write(std::string data) = 0;
  // Ends the response; idempotent.
  virtual void finish() = 0;
  virtual bool is_closed() const = 0;
};

class Connection;

// One request's way back to its client. Copyable handle; the first
// respond()/start_stream() wins, later calls are ignored.
class Responder {
 public:
  Responder(std::shared_ptr<Connection> connection, uint64_t request_no)
      : connection_(std::move(connection)), request_no_(request_no) {}
  void respond(HttpResponse response) const;
  // Sends the status line and headers now (chunked transfer encoding).
  std::shared_ptr<ResponseStream> start_stream(int status, std::string content_type, HeaderList headers = {}) const;
  // fn runs once, on an I/O thread, if the client disconnects before the
  // response is complete (immediately if it already has).
  void on_disconnect(std::function<void()> fn) const;

 private:
  std::shared_ptr<Connection> connection_;
  uint64_t request_no_ = 0;
};

using HttpHandler = std::function<void(HttpRequest request, Responder responder)>;

struct HttpServerConfig {
  std::string host = "127.0.0.1";
  int port = 8080;                       // 0 = any free port (see port())
  int n_io_threads = 2;
  int64_t max_body_bytes = 8 << 20;
  int64_t max_stream_buffer_bytes = 16 << 20;
  int max_connections = 8192;            // beyond: answered 503 and closed
  double idle_timeout_s = 120;
  double write_timeout_s = 60;
};

class HttpServer {
 public:
  HttpServer(HttpServerConfig config, HttpHandler handler);
  ~HttpServer();
  // Binds and listens (IoError naming the address when that fails).
  Status start();
  int port() const;
  // Serves on n_io_threads threads (the caller's among them) until stop().
  void run();
  // Stops accepting new connections; open ones continue.
  void stop_accepting();
  // Stops everything: closes every connection and makes run() return.
  void stop();
  int n_connections() const;

  struct Impl;  // shared with the connections in http_server.cpp

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace tern::server
