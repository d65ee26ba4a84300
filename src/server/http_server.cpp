// HttpServer: Beast parses request heads and bodies; responses are framed by
// hand (status line, headers, chunked SSE) because streamed bodies are written
// from the engine's thread through a per-connection queue. Everything a
// connection does runs on its strand.
#include "server/http_server.h"

#include <array>
#include <atomic>
#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <deque>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>

#include "core/log.h"

namespace tern::server {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

namespace {

constexpr uint32_t kMaxHeaderBytes = 16 * 1024;
constexpr size_t kMaxPipelined = 16;

const char* reason_phrase(int status) {
  switch (status) {
    case 100: return "Continue";
    case 200: return "OK";
    case 204: return "No Content";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 413: return "Payload Too Large";
    case 415: return "Unsupported Media Type";
    case 422: return "Unprocessable Entity";
    case 429: return "Too Many Requests";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 503: return "Service Unavailable";
    default: return "Status";
  }
}

std::string head_text(int status, std::string_view content_type, const HeaderList& headers, bool keep_alive,
                      std::optional<size_t> content_length) {
  std::string h = "HTTP/1.1 " + std::to_string(status) + " " + reason_phrase(status) + "\r\n";
  h += "Server: tern\r\n";
  if (!content_type.empty()) h += "Content-Type: " + std::string(content_type) + "\r\n";
  for (const auto& [k, v] : headers) h += k + ": " + v + "\r\n";
  if (content_length)
    h += "Content-Length: " + std::to_string(*content_length) + "\r\n";
  else
    h += "Transfer-Encoding: chunked\r\n";
  h += keep_alive ? "Connection: keep-alive\r\n\r\n" : "Connection: close\r\n\r\n";
  return h;
}

std::string error_json(std::string_view message, std::string_view type, int status) {
  // Transport-level errors (before any route runs) in the OpenAI error shape.
  std::string m;
  for (char c : message) m += (c == '"' || c == '\\') ? std::string("\\") + c : std::string(1, c);
  return R"({"error":{"message":")" + m + R"(","type":")" + std::string(type) +
         R"(","param":null,"code":)" + std::to_string(status) + "}}";
}

}  // namespace

class StreamImpl;

class Connection : public std::enable_shared_from_this<Connection> {
 public:
  Connection(tcp::socket socket, HttpServer::Impl* server);
  ~Connection();
  void start() {
    asio::dispatch(strand_, [self = shared_from_this()] {
      self->arm_timer(self->idle_timeout_s_);
      self->read_next();
    });
  }
  void close_from_outside() {
    asio::post(strand_, [self = shared_from_this()] { self->close(); });
  }

  // Responder entry points (any thread).
  void respond(uint64_t no, HttpResponse r);
  std::shared_ptr<ResponseStream> start_stream(uint64_t no, int status, std::string content_type, HeaderList headers);
  void set_disconnect(uint64_t no, std::function<void()> fn);

  // Stream entry points (any thread).
  void stream_write(uint64_t no, std::string framed);
  void stream_finish(uint64_t no);
  void stream_kill(uint64_t no);

  const int64_t max_stream_buffer_bytes_;

 private:
  void read_next();
  void on_header(beast::error_code ec);
  void on_body(beast::error_code ec);
  void on_read_error(beast::error_code ec);
  void dispatch(HttpRequest req);
  void enqueue(std::string bytes);
  void write_some();
  void response_complete();
  void fail_request(int status, std::string_view message, std::string_view type);
  void close();
  void linger_close();
  void fire_disconnect();
  void arm_timer(double seconds);
  void disarm_timer() { ++timer_gen_, timer_.cancel(); }

  HttpServer::Impl* server_;
  tcp::socket socket_;
  asio::strand<asio::io_context::executor_type> strand_;
  asio::steady_timer timer_;
  uint64_t timer_gen_ = 0;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  const double idle_timeout_s_, write_timeout_s_;
  const int64_t max_body_bytes_;

  // Strand-only state.
  std::deque<std::string> out_;
  std::string writing_buf_;
  bool writing_ = false;
  bool closed_ = false;
  bool reading_ = false;
  std::deque<HttpRequest> pipelined_;
  uint64_t active_no_ = 0;    // request being answered (0 = none)
  uint64_t next_no_ = 1;
  bool answered_ = false;     // respond/start_stream taken for active_no_
  bool finishing_ = false;    // the whole response is queued; complete once flushed
  bool keep_alive_ = true;    // of the active request
  bool close_after_ = false;  // close once the queue drains (error replies)
  std::shared_ptr<StreamImpl> stream_;

  std::mutex cb_mu_;          // guards the two below (set from any thread)
  std::function<void()> on_disconnect_;
  uint64_t disconnect_no_ = 0;
  bool gone_ = false;         // the client went away mid-response
};

class StreamImpl : public ResponseStream {
 public:
  StreamImpl(std::weak_ptr<Connection> c, uint64_t no, int64_t limit) : conn_(std::move(c)), no_(no), limit_(limit) {}
  bool write(std::string data) override {
    if (closed_.load() || data.empty()) return !closed_.load();
    auto c = conn_.lock();
    if (!c) {
      closed_ = true;
      return false;
    }
    if (queued_.fetch_add(static_cast<int64_t>(data.size())) + static_cast<int64_t>(data.size()) > limit_) {
      // A reader this far behind is treated as gone; its request is cancelled.
      TERN_LOG_WARN("server: stream: client not reading, closing connection queued_bytes=%lld",
                    static_cast<long long>(queued_.load()));
      closed_ = true;
      c->stream_kill(no_);
      return false;
    }
    char len[32];
    std::snprintf(len, sizeof len, "%zx\r\n", data.size());
    std::string framed = len;
    framed += data;
    framed += "\r\n";
    c->stream_write(no_, std::move(framed));
    return true;
  }
  void finish() override {
    if (closed_.exchange(true)) return;
    if (auto c = conn_.lock()) c->stream_finish(no_);
  }
  bool is_closed() const override { return closed_.load(); }
  void mark_closed() { closed_ = true; }
  void sent(size_t n) { queued_.fetch_sub(static_cast<int64_t>(n)); }

 private:
  std::weak_ptr<Connection> conn_;
  const uint64_t no_;
  const int64_t limit_;
  std::atomic<bool> closed_{false};
  std::atomic<int64_t> queued_{0};
};

struct HttpServer::Impl {
  HttpServerConfig config;
  HttpHandler handler;
  std::atomic<int> n_connections{0};
  std::atomic<bool> accepting{true};
  std::mutex conns_mu;
  std::unordered_map<Connection*, std::weak_ptr<Connection>> conns;  // guarded by conns_mu
  // Declared after what connections touch in their destructors: destroying the
  // io_context destroys pending handlers, and with them the last connections.
  asio::io_context ioc;
  tcp::acceptor acceptor{ioc};
  asio::steady_timer retry{ioc};

  void accept() {
    acceptor.async_accept(asio::make_strand(ioc), [this](beast::error_code ec, tcp::socket socket) {
      if (ec) {
        if (ec == asio::error::operation_aborted || !acceptor.is_open()) return;
        // EMFILE and the like: log and try again shortly, without spinning.
        TERN_LOG_WARN("server: accept: %s", ec.message().c_str());
        retry.expires_after(std::chrono::milliseconds(50));
        retry.async_wait([this](beast::error_code e) {
          if (!e && accepting.load() && acceptor.is_open()) accept();
        });
        return;
      }
      if (n_connections.load() >= config.max_connections) {
        const std::string body = error_json("too many connections", "server_error", 503);
        std::string r = head_text(503, "application/json", {}, false, body.size()) + body;
        beast::error_code ignored;
        asio::write(socket, asio::buffer(r), ignored);
        socket.close(ignored);
      } else {
        socket.set_option(tcp::no_delay(true), ec);
        auto c = std::make_shared<Connection>(std::move(socket), this);
        {
          std::lock_guard lock(conns_mu);
          conns[c.get()] = c;
        }
        c->start();
      }
      if (accepting.load() && acceptor.is_open()) accept();
    });
  }
};

Connection::Connection(tcp::socket socket, HttpServer::Impl* server)
    : max_stream_buffer_bytes_(server->config.max_stream_buffer_bytes),
      server_(server),
      socket_(std::move(socket)),
      strand_(asio::make_strand(server->ioc)),
      timer_(strand_),
      idle_timeout_s_(server->config.idle_timeout_s),
      write_timeout_s_(server->config.write_timeout_s),
      max_body_bytes_(server->config.max_body_bytes) {
  server_->n_connections.fetch_add(1);
}

Connection::~Connection() {
  server_->n_connections.fetch_sub(1);
  std::lock_guard lock(server_->conns_mu);
  server_->conns.erase(this);
}

void Connection::arm_timer(double seconds) {
  const uint64_t gen = ++timer_gen_;
  timer_.expires_after(std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000)));
  timer_.async_wait([self = shared_from_this(), gen](beast::error_code ec) {
    if (ec || gen != self->timer_gen_ || self->closed_) return;
    self->close();  // idle too long, or a write stalled
  });
}

void Connection::read_next() {
  if (closed_ || reading_ || close_after_ || pipelined_.size() >= kMaxPipelined) return;
  reading_ = true;
  parser_.emplace();
  parser_->header_limit(kMaxHeaderBytes);
  parser_->body_limit(static_cast<uint64_t>(max_body_bytes_));
  http::async_read_header(socket_, buffer_, *parser_,
                          asio::bind_executor(strand_, [self = shared_from_this()](beast::error_code ec, size_t) {
                            self->on_header(ec);
                          }));
}

void Connection::on_header(beast::error_code ec) {
  if (ec) return on_read_error(ec);
  const auto& req = parser_->get();
  const auto len = parser_->content_length();
  if (len && *len > static_cast<uint64_t>(max_body_bytes_)) return on_read_error(http::error::body_limit);
  if (beast::iequals(req[http::field::expect], "100-continue") && active_no_ == 0)
    enqueue("HTTP/1.1 100 Continue\r\n\r\n");
  http::async_read(socket_, buffer_, *parser_,
                   asio::bind_executor(strand_, [self = shared_from_this()](beast::error_code e, size_t) {
                     self->on_body(e);
                   }));
}

void Connection::on_body(beast::error_code ec) {
  reading_ = false;
  if (ec) return on_read_error(ec);
  http::request<http::string_body> msg = parser_->release();
  HttpRequest req;
  req.method = std::string(msg.method_string());
  req.target = std::string(msg.target());
  const size_t q = req.target.find('?');
  req.path = req.target.substr(0, q);
  for (const auto& f : msg) {
    std::string name(f.name_string());
    for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    req.headers.emplace_back(std::move(name), std::string(f.value()));
  }
  beast::error_code ignored;
  const auto ep = socket_.remote_endpoint(ignored);
  if (!ignored) req.remote = ep.address().to_string();
  req.body = std::move(msg.body());
  const bool keep = msg.keep_alive();
  if (active_no_ != 0) {
    pipelined_.push_back(std::move(req));
    if (!keep) close_after_ = true;
  } else {
    keep_alive_ = keep;
    dispatch(std::move(req));
  }
  // Keep a read pending: it notices a client that goes away mid-response and
  // picks up pipelined requests.
  read_next();
}

void Connection::on_read_error(beast::error_code ec) {
  reading_ = false;
  if (closed_) return;
  if (ec == http::error::body_limit)
    return fail_request(413, "request body is larger than the server's limit of " +
                                 std::to_string(max_body_bytes_) + " bytes", "invalid_request_error");
  if (ec == http::error::header_limit)
    return fail_request(431, "request headers are larger than 16 KiB", "invalid_request_error");
  if (ec == http::error::end_of_stream || ec == asio::error::eof || ec == asio::error::connection_reset ||
      ec == asio::error::operation_aborted || ec == asio::error::broken_pipe || ec == http::error::partial_message) {
    return close();  // the client went away (mid-response: its request is cancelled)
  }
  fail_request(400, "malformed HTTP request: " + ec.message(), "invalid_request_error");
}

void Connection::fail_request(int status, std::string_view message, std::string_view type) {
  // The byte stream cannot be trusted past this point: answer, then close.
  if (active_no_ != 0) return close();
  const std::string body = error_json(message, type, status);
  close_after_ = true;
  enqueue(head_text(status, "application/json", {}, false, body.size()) + body);
}

void Connection::dispatch(HttpRequest req) {
  active_no_ = next_no_++;
  answered_ = false;
  finishing_ = false;
  disarm_timer();
  {
    std::lock_guard lock(cb_mu_);
    on_disconnect_ = nullptr;
    disconnect_no_ = active_no_;
  }
  Responder responder(shared_from_this(), active_no_);
  // The handler runs on this strand; it must not block (documented contract).
  server_->handler(std::move(req), std::move(responder));
}

void Connection::respond(uint64_t no, HttpResponse r) {
  asio::dispatch(strand_, [self = shared_from_this(), no, r = std::move(r)]() mutable {
    if (self->closed_ || no != self->active_no_ || self->answered_) return;
    self->answered_ = true;
    self->finishing_ = true;
    std::string bytes = head_text(r.status, r.content_type, r.headers, self->keep_alive_, r.body.size());
    bytes += r.body;
    self->enqueue(std::move(bytes));
  });
}

std::shared_ptr<ResponseStream> Connection::start_stream(uint64_t no, int status, std::string content_type,
                                                         HeaderList headers) {
  auto stream = std::make_shared<StreamImpl>(weak_from_this(), no, max_stream_buffer_bytes_);
  asio::dispatch(strand_, [self = shared_from_this(), no, status, stream, ct = std::move(content_type),
                           h = std::move(headers)] {
    if (self->closed_ || no != self->active_no_ || self->answered_) return stream->mark_closed();
    self->answered_ = true;
    self->stream_ = stream;
    self->enqueue(head_text(status, ct, h, self->keep_alive_, std::nullopt));
  });
  return stream;
}

void Connection::stream_write(uint64_t no, std::string framed) {
  asio::post(strand_, [self = shared_from_this(), no, f = std::move(framed)]() mutable {
    if (self->closed_ || no != self->active_no_) return;
    self->enqueue(std::move(f));
  });
}

void Connection::stream_finish(uint64_t no) {
  asio::post(strand_, [self = shared_from_this(), no] {
    if (self->closed_ || no != self->active_no_ || self->finishing_) return;
    self->finishing_ = true;
    self->enqueue("0\r\n\r\n");
  });
}

void Connection::stream_kill(uint64_t no) {
  asio::post(strand_, [self = shared_from_this(), no] {
    if (no == self->active_no_) self->close();
  });
}

void Connection::set_disconnect(uint64_t no, std::function<void()> fn) {
  bool now = false;
  {
    std::lock_guard lock(cb_mu_);
    if (no != disconnect_no_) return;
    if (gone_) {
      now = true;
    } else {
      on_disconnect_ = std::move(fn);
    }
  }
  if (now) asio::post(strand_, std::move(fn));
}

void Connection::fire_disconnect() {
  std::function<void()> fn;
  {
    std::lock_guard lock(cb_mu_);
    gone_ = true;
    fn = std::move(on_disconnect_);
    on_disconnect_ = nullptr;
  }
  if (fn) fn();
}

void Connection::enqueue(std::string bytes) {
  if (closed_) return;
  out_.push_back(std::move(bytes));
  if (!writing_) write_some();
}

void Connection::write_some() {
  if (out_.empty()) {
    writing_ = false;
    if (close_after_) return linger_close();
    if (finishing_) response_complete();
    return;
  }
  // Coalesce everything queued into one write: under load a connection's
  // tokens arrive faster than one syscall each.
  writing_buf_ = std::move(out_.front());
  out_.pop_front();
  while (!out_.empty()) {
    writing_buf_ += out_.front();
    out_.pop_front();
  }
  writing_ = true;
  arm_timer(write_timeout_s_);
  asio::async_write(socket_, asio::buffer(writing_buf_),
                    asio::bind_executor(strand_, [self = shared_from_this()](beast::error_code ec, size_t n) {
                      if (self->closed_) return;
                      if (ec) return self->close();
                      if (self->stream_) self->stream_->sent(n);
                      self->disarm_timer();
                      self->write_some();
                    }));
}

void Connection::response_complete() {
  finishing_ = false;
  active_no_ = 0;
  if (stream_) stream_->mark_closed();
  stream_.reset();
  {
    std::lock_guard lock(cb_mu_);
    on_disconnect_ = nullptr;
    disconnect_no_ = 0;
  }
  if (!keep_alive_) return close();
  if (!pipelined_.empty()) {
    HttpRequest next = std::move(pipelined_.front());
    pipelined_.pop_front();
    dispatch(std::move(next));
    read_next();
    return;
  }
  arm_timer(idle_timeout_s_);
  read_next();
}

void Connection::linger_close() {
  // After an error reply the client may still be sending its body: closing with
  // unread data would reset the connection before it reads our answer. Stop
  // sending, then discard what arrives for a moment.
  beast::error_code ignored;
  socket_.shutdown(tcp::socket::shutdown_send, ignored);
  if (reading_) return;
  arm_timer(2.0);
  auto sink = std::make_shared<std::array<char, 16384>>();
  auto drain = std::make_shared<std::function<void()>>();
  *drain = [self = shared_from_this(), sink, drain] {
    self->socket_.async_read_some(asio::buffer(*sink), asio::bind_executor(self->strand_, [self, drain](
                                                                                beast::error_code ec, size_t) {
      if (ec || self->closed_) {
        *drain = nullptr;  // break the self-reference
        return self->close();
      }
      (*drain)();
    }));
  };
  (*drain)();
}

void Connection::close() {
  if (closed_) return;
  closed_ = true;
  disarm_timer();
  if (stream_) stream_->mark_closed();
  if (active_no_ != 0) fire_disconnect();
  beast::error_code ignored;
  socket_.shutdown(tcp::socket::shutdown_both, ignored);
  socket_.close(ignored);
  out_.clear();
}

void Responder::respond(HttpResponse response) const { connection_->respond(request_no_, std::move(response)); }

std::shared_ptr<ResponseStream> Responder::start_stream(int status, std::string content_type,
                                                        HeaderList headers) const {
  return connection_->start_stream(request_no_, status, std::move(content_type), std::move(headers));
}

void Responder::on_disconnect(std::function<void()> fn) const {
  connection_->set_disconnect(request_no_, std::move(fn));
}

std::string_view HttpRequest::header(std::string_view name) const {
  for (const auto& [k, v] : headers)
    if (k == name) return v;
  return {};
}

HttpServer::HttpServer(HttpServerConfig config, HttpHandler handler) : impl_(std::make_unique<Impl>()) {
  impl_->config = std::move(config);
  impl_->handler = std::move(handler);
}

HttpServer::~HttpServer() { stop(); }

Status HttpServer::start() {
  beast::error_code ec;
  const auto address = asio::ip::make_address(impl_->config.host, ec);
  if (ec) return error(ErrorKind::InvalidArgument, "serve: bad --host '" + impl_->config.host + "': " + ec.message());
  const tcp::endpoint ep(address, static_cast<uint16_t>(impl_->config.port));
  const std::string where = impl_->config.host + ":" + std::to_string(impl_->config.port);
  impl_->acceptor.open(ep.protocol(), ec);
  if (!ec) impl_->acceptor.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) impl_->acceptor.bind(ep, ec);
  if (!ec) impl_->acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) return error(ErrorKind::IoError, "serve: cannot listen on " + where + ": " + ec.message());
  impl_->accept();
  return Status::ok();
}

int HttpServer::port() const {
  beast::error_code ec;
  const auto ep = impl_->acceptor.local_endpoint(ec);
  return ec ? 0 : ep.port();
}

void HttpServer::run() {
  std::vector<std::thread> threads;
  for (int i = 1; i < std::max(1, impl_->config.n_io_threads); ++i) threads.emplace_back([this] { impl_->ioc.run(); });
  impl_->ioc.run();
  for (auto& t : threads) t.join();
}

void HttpServer::stop_accepting() {
  impl_->accepting = false;
  asio::post(impl_->ioc, [this] {
    beast::error_code ignored;
    impl_->acceptor.close(ignored);
  });
}

void HttpServer::stop() {
  if (!impl_) return;
  stop_accepting();
  std::vector<std::shared_ptr<Connection>> open;
  {
    std::lock_guard lock(impl_->conns_mu);
    for (auto& [p, w] : impl_->conns)
      if (auto c = w.lock()) open.push_back(std::move(c));
  }
  for (auto& c : open) c->close_from_outside();
  open.clear();
  // Let the closes run, then end run().
  asio::post(impl_->ioc, [this] {
    impl_->retry.expires_after(std::chrono::milliseconds(100));
    impl_->retry.async_wait([this](beast::error_code) { impl_->ioc.stop(); });
  });
}

int HttpServer::n_connections() const { return impl_->n_connections.load(); }

}  // namespace tern::server
