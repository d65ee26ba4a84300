// server/http_server.h — the HTTP/1.1 transport of `tern serve`, on Boost.Asio/Beast.
//
// Contract: HttpServer accepts connections on one listening socket and runs
// every socket asynchronously on a small pool of I/O threads, so the number
// of open connections (thousands of idle or streaming clients) costs memory,
// not threads. For each complete request it calls the handler once, on an I/O
// thread; the handler must not block. It answers through the Responder it is
// given, exactly once, from any thread and at any later time: a whole
// response, or a stream (server-sent events) written piece by piece. A HEAD
// request's answer is sent as headers only, whatever the handler gives.
//
// Framing (RFC 9112): a body is delimited by Content-Length or by a
// Transfer-Encoding whose only coding is "chunked"; any other transfer coding,
// both headers at once, or a Transfer-Encoding on HTTP/1.0 is answered 400
// (501 for a coding before "chunked" that we do not decode) and the connection
// closed, so a body can never be read as the next request. Heads over 16 KiB
// get 431, bodies over max_body_bytes 413 (a declared Content-Length is checked
// before the body is read; "Expect: 100-continue" is honoured), garbage 400.
// Keep-alive and pipelined requests are answered in order; a request with
// "Connection: close" (or HTTP/1.0) is the last one read; an error in the byte
// stream is answered after every request before it, then the connection closes.
//
// Deadlines: an idle connection closes after idle_timeout_s; once a request's
// first byte arrives its head must be complete within header_timeout_s and its
// body must make progress every body_timeout_s, else 408 and close.
//
// Memory: a connection reads ahead at most kMaxPipelined requests or
// max_pipelined_bytes (then it stops reading: TCP back-pressure); request
// bodies not yet handled and response bytes not yet sent count against one
// server-wide budget (max_buffered_bytes). Over it, new requests get 503 and a
// stream holding more than its fair share of unsent bytes is cut (its client is
// treated as gone). A stream's write() never blocks its caller (the engine's
// step thread); a client more than max_stream_buffer_bytes behind, or whose
// write stalls for write_timeout_s, is disconnected; a client that goes away
// fires the Responder's disconnect callback once, so the request behind it can
// be cancelled. Optional: max_connections_per_ip (503 beyond).
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
  // Holds the body's bytes in the server's buffer budget until the request is destroyed.
  std::shared_ptr<const void> budget_hold;

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
  int max_connections_per_ip = 0;        // 0 = no limit; beyond: answered 503 and closed
  double idle_timeout_s = 120;
  double header_timeout_s = 10;          // first byte of a request -> end of its head
  double body_timeout_s = 10;            // longest pause while a body arrives
  double write_timeout_s = 60;
  int64_t max_pipelined_bytes = 1 << 20; // requests read ahead per connection
  int64_t max_buffered_bytes = int64_t{256} << 20;  // server-wide: unhandled bodies + unsent bytes
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
  // Bytes now counted against max_buffered_bytes.
  int64_t buffered_bytes() const;

  struct Impl;  // shared with the connections in http_server.cpp

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace tern::server
