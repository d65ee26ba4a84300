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
#include "server/http_framing.h"

namespace tern::server {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

namespace {

constexpr uint32_t kMaxHeaderBytes = 16 * 1024;
constexpr size_t kMaxPipelined = 16;

}  // namespace

// The server-wide count of buffered bytes (request bodies not yet handled,
// response bytes not yet sent). Shared, so a stream or a request outliving the
// server's Impl still releases safely.
class ByteBudget {
 public:
  explicit ByteBudget(int64_t limit) : limit_(limit) {}
  void add(int64_t n) { used_.fetch_add(n, std::memory_order_relaxed); }
  void sub(int64_t n) { used_.fetch_sub(n, std::memory_order_relaxed); }
  int64_t used() const { return used_.load(std::memory_order_relaxed); }
  bool over() const { return used() > limit_; }

 private:
  const int64_t limit_;
  std::atomic<int64_t> used_{0};
};

// Releases n bytes from the budget when the last copy of the request holding it is destroyed.
std::shared_ptr<const void> hold_bytes(const std::shared_ptr<ByteBudget>& budget, int64_t n) {
  struct Hold {
    Hold(std::shared_ptr<ByteBudget> b, int64_t bytes) : budget(std::move(b)), n(bytes) { budget->add(n); }
    Hold(const Hold&) = delete;
    Hold& operator=(const Hold&) = delete;
    ~Hold() { budget->sub(n); }
    std::shared_ptr<ByteBudget> budget;
    int64_t n;
  };
  return std::make_shared<Hold>(budget, n);
}

// A stream whose client holds less than this unsent is never the one cut when
// the server-wide budget is exceeded: it is keeping up.
constexpr int64_t kStreamFairShareBytes = 256 * 1024;

class StreamImpl;

class Connection : public std::enable_shared_from_this<Connection> {
 public:
  Connection(tcp::socket socket, HttpServer::Impl* server, std::string peer);
  ~Connection();
  void start() {
    asio::dispatch(strand_, [self = shared_from_this()] { self->read_next(); });
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
  // Bytes handed to this connection and not yet written or dropped.
  int64_t unsent() const { return unsent_.load(std::memory_order_relaxed); }
  const ByteBudget& budget() const { return *budget_; }

  const int64_t max_stream_buffer_bytes_;
  const std::string peer_;

 private:
  // A request read ahead of its turn, or the error that ended reading.
  struct Queued {
    HttpRequest request;
    bool keep_alive = true;
    int error_status = 0;  // > 0: answer this and close
    std::string error_message;
    int64_t bytes = 0;     // counted in queued_bytes_
  };
  enum class ReadPhase { None, Waiting, Head, Body };

  void read_next();
  void read_head();
  void on_head(beast::error_code ec);
  void read_body();
  void on_request();
  void on_read_error(beast::error_code ec, ReadPhase phase);
  void reject(int status, std::string message);
  void serve_queue();
  void dispatch(Queued q);
  void send_error_and_close(int status, const std::string& message);
  void account(int64_t n);
  void release(int64_t n);
  void enqueue(std::string bytes);  // bytes already accounted
  void write_some();
  void response_complete();
  void close();
  void linger_close();
  void drain();  // reads and discards until EOF, error or close
  void fire_disconnect();
  void arm_read_timer(double seconds);
  void disarm_read_timer() { ++read_gen_, read_timer_.cancel(); }
  void arm_write_timer(double seconds);
  void disarm_write_timer() { ++write_gen_, write_timer_.cancel(); }

  HttpServer::Impl* server_;
  std::shared_ptr<ByteBudget> budget_;
  tcp::socket socket_;
  asio::strand<asio::io_context::executor_type> strand_;
  asio::steady_timer read_timer_, write_timer_;
  uint64_t read_gen_ = 0, write_gen_ = 0;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  const HttpServerConfig& config_;
  std::atomic<int64_t> unsent_{0};

  // Strand-only state.
  std::deque<std::string> out_;
  std::string writing_buf_;
  bool writing_ = false;
  bool closed_ = false;
  bool reading_ = false;
  ReadPhase phase_ = ReadPhase::None;
  bool read_timed_out_ = false;  // the pending read was cut by a header/body deadline
  bool stop_reading_ = false;    // a last request (Connection: close) or an error was read
  std::deque<Queued> queue_;
  int64_t queued_bytes_ = 0;
  uint64_t active_no_ = 0;       // request being answered (0 = none)
  uint64_t next_no_ = 1;
  bool answered_ = false;        // respond/start_stream taken for active_no_
  bool finishing_ = false;       // the whole response is queued; complete once flushed
  bool keep_alive_ = true;       // of the active request
  bool head_only_ = false;       // the active request is HEAD: no body goes out
  bool close_after_ = false;     // close once the queue drains (error replies)
  std::shared_ptr<StreamImpl> stream_;
  std::unique_ptr<std::array<char, 16384>> sink_;  // linger_close()'s discard buffer

  std::mutex cb_mu_;             // guards the three below (set from any thread)
  std::function<void()> on_disconnect_;
  uint64_t disconnect_no_ = 0;
  bool gone_ = false;            // the client went away mid-response
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
    const int64_t behind = c->unsent() + static_cast<int64_t>(data.size());
    const bool too_far = behind > limit_;
    const bool server_full = c->budget().over() && behind > kStreamFairShareBytes;
    if (too_far || server_full) {
      // A reader this far behind is treated as gone; its request is cancelled.
      TERN_LOG_WARN("server: stream: client not reading, closing connection unsent_bytes=%lld%s",
                    static_cast<long long>(behind), server_full ? " (server buffer budget exceeded)" : "");
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

 private:
  std::weak_ptr<Connection> conn_;
  const uint64_t no_;
  const int64_t limit_;
  std::atomic<bool> closed_{false};
};

struct HttpServer::Impl {
  HttpServerConfig config;
  HttpHandler handler;
  std::shared_ptr<ByteBudget> budget;
  std::atomic<int> n_connections{0};
  std::atomic<bool> accepting{true};
  std::atomic<int> bound_port{0};
  std::mutex conns_mu;
  std::unordered_map<Connection*, std::weak_ptr<Connection>> conns;  // guarded by conns_mu
  std::unordered_map<std::string, int> per_ip;                       // open connections by peer; guarded by conns_mu
  // Declared after what connections touch in their destructors: destroying the
  // io_context destroys pending handlers, and with them the last connections.
  asio::io_context ioc;
  // Every acceptor operation (accept, retry, close) runs on this strand: two
  // io threads may otherwise close it while another re-arms an accept.
  asio::strand<asio::io_context::executor_type> accept_strand = asio::make_strand(ioc);
  tcp::acceptor acceptor{accept_strand};
  asio::steady_timer retry{accept_strand};
  asio::steady_timer stop_timer{ioc};
  // Keeps run() going while nothing is pending (no accept after stop_accepting,
  // a stream between two tokens): outputs posted later must still be written.
  asio::executor_work_guard<asio::io_context::executor_type> work = asio::make_work_guard(ioc);

  // Ends run() once every connection is gone, or at the deadline.
  void stop_when_closed(std::chrono::steady_clock::time_point deadline) {
    if (n_connections.load() == 0 || std::chrono::steady_clock::now() >= deadline) return ioc.stop();
    stop_timer.expires_after(std::chrono::milliseconds(10));
    stop_timer.async_wait([this, deadline](beast::error_code) { stop_when_closed(deadline); });
  }

  // Answers a connection we will not serve, then closes it.
  static void refuse(tcp::socket& socket, std::string_view message) {
    const std::string body = error_json(message, "server_error", 503);
    std::string r = head_text(503, "application/json", {{"Retry-After", "1"}}, false, body.size()) + body;
    beast::error_code ignored;
    asio::write(socket, asio::buffer(r), ignored);
    socket.close(ignored);
  }

  void accept() {
    acceptor.async_accept(asio::make_strand(ioc), asio::bind_executor(accept_strand, [this](beast::error_code ec, tcp::socket socket) {
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
      beast::error_code ignored;
      const auto ep = socket.remote_endpoint(ignored);
      std::string peer = ignored ? std::string() : ep.address().to_string();
      bool per_ip_full = false;
      if (config.max_connections_per_ip > 0) {
        std::lock_guard lock(conns_mu);
        per_ip_full = per_ip[peer] >= config.max_connections_per_ip;
      }
      if (n_connections.load() >= config.max_connections) {
        refuse(socket, "too many connections");
      } else if (per_ip_full) {
        refuse(socket, "too many connections from this address");
      } else {
        socket.set_option(tcp::no_delay(true), ec);
        auto c = std::make_shared<Connection>(std::move(socket), this, std::move(peer));
        {
          std::lock_guard lock(conns_mu);
          conns[c.get()] = c;
          ++per_ip[c->peer_];
        }
        c->start();
      }
      if (accepting.load() && acceptor.is_open()) accept();
    }));
  }
};

Connection::Connection(tcp::socket socket, HttpServer::Impl* server, std::string peer)
    : max_stream_buffer_bytes_(server->config.max_stream_buffer_bytes),
      peer_(std::move(peer)),
      server_(server),
      budget_(server->budget),
      socket_(std::move(socket)),
      strand_(asio::make_strand(server->ioc)),
      read_timer_(strand_),
      write_timer_(strand_),
      config_(server->config) {
  server_->n_connections.fetch_add(1);
}

Connection::~Connection() {
  budget_->sub(unsent_.load());  // whatever was never written nor dropped
  server_->n_connections.fetch_sub(1);
  std::lock_guard lock(server_->conns_mu);
  server_->conns.erase(this);
  auto it = server_->per_ip.find(peer_);
  if (it != server_->per_ip.end() && --it->second <= 0) server_->per_ip.erase(it);
}

void Connection::arm_read_timer(double seconds) {
  const uint64_t gen = ++read_gen_;
  read_timer_.expires_after(std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000)));
  read_timer_.async_wait([self = shared_from_this(), gen](beast::error_code ec) {
    if (ec || gen != self->read_gen_ || self->closed_) return;
    if (self->phase_ == ReadPhase::Head || self->phase_ == ReadPhase::Body) {
      // A request started but stalled: cut the pending read (it completes at
      // once as end-of-stream) and answer 408 in its turn.
      self->read_timed_out_ = true;
      beast::error_code ignored;
      self->socket_.shutdown(tcp::socket::shutdown_receive, ignored);
      return;
    }
    self->close();  // idle too long, or lingering after an error reply
  });
}

void Connection::arm_write_timer(double seconds) {
  const uint64_t gen = ++write_gen_;
  write_timer_.expires_after(std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000)));
  write_timer_.async_wait([self = shared_from_this(), gen](beast::error_code ec) {
    if (ec || gen != self->write_gen_ || self->closed_) return;
    self->close();  // a write stalled: the client stopped reading
  });
}

void Connection::read_next() {
  if (closed_ || reading_ || stop_reading_ || close_after_) return;
  // Back-pressure: requests read ahead wait in memory; stop reading (the
  // client's sends block) until the queue drains.
  if (queue_.size() >= kMaxPipelined || queued_bytes_ >= config_.max_pipelined_bytes) return;
  reading_ = true;
  if (buffer_.size() > 0) return read_head();
  // Wait for the first byte before any head deadline: a keep-alive connection
  // between requests, or one waiting for its answer, is not slow.
  phase_ = ReadPhase::Waiting;
  if (next_no_ == 1 && queue_.empty())
    arm_read_timer(config_.header_timeout_s);  // a new connection that sends nothing holds a slot for nothing
  else if (active_no_ == 0 && queue_.empty())
    arm_read_timer(config_.idle_timeout_s);
  else
    disarm_read_timer();
  socket_.async_wait(tcp::socket::wait_read,
                     asio::bind_executor(strand_, [self = shared_from_this()](beast::error_code ec) {
                       if (ec) return self->on_read_error(ec, ReadPhase::Waiting);
                       self->read_head();
                     }));
}

void Connection::read_head() {
  phase_ = ReadPhase::Head;
  arm_read_timer(config_.header_timeout_s);
  parser_.emplace();
  parser_->header_limit(kMaxHeaderBytes);
  parser_->body_limit(static_cast<uint64_t>(config_.max_body_bytes));
  http::async_read_header(socket_, buffer_, *parser_,
                          asio::bind_executor(strand_, [self = shared_from_this()](beast::error_code ec, size_t) {
                            self->on_head(ec);
                          }));
}

void Connection::on_head(beast::error_code ec) {
  if (close_after_) return close();  // a read left pending while the connection was closing
  if (ec) return on_read_error(ec, ReadPhase::Head);
  const auto& req = parser_->get();
  std::vector<std::string_view> te;
  for (const auto& f : req)
    if (f.name() == http::field::transfer_encoding) te.emplace_back(f.value().data(), f.value().size());
  const FramingVerdict framing =
      check_request_framing(te, req.find(http::field::content_length) != req.end(), static_cast<int>(req.version()));
  if (framing.status != 0) return reject(framing.status, framing.message);
  const auto len = parser_->content_length();
  if (len && *len > static_cast<uint64_t>(config_.max_body_bytes)) return on_read_error(http::error::body_limit, phase_);
  if (budget_->over() && (len.value_or(0) > 0 || parser_->chunked()))
    return reject(503, "the server is holding too much unsent data; retry shortly");
  if (beast::iequals(req[http::field::expect], "100-continue") && active_no_ == 0 && queue_.empty()) {
    std::string cont = "HTTP/1.1 100 Continue\r\n\r\n";
    account(static_cast<int64_t>(cont.size()));
    enqueue(std::move(cont));
  }
  phase_ = ReadPhase::Body;
  arm_read_timer(config_.body_timeout_s);
  read_body();
}

void Connection::read_body() {
  if (parser_->is_done()) return on_request();
  http::async_read_some(socket_, buffer_, *parser_,
                        asio::bind_executor(strand_, [self = shared_from_this()](beast::error_code ec, size_t) {
                          if (ec) return self->on_read_error(ec, ReadPhase::Body);
                          self->arm_read_timer(self->config_.body_timeout_s);  // progress
                          self->read_body();
                        }));
}

void Connection::on_request() {
  reading_ = false;
  phase_ = ReadPhase::None;
  disarm_read_timer();
  http::request<http::string_body> msg = parser_->release();
  Queued q;
  HttpRequest& req = q.request;
  req.method = std::string(msg.method_string());
  req.target = std::string(msg.target());
  const size_t query = req.target.find('?');
  req.path = req.target.substr(0, query);
  for (const auto& f : msg) {
    std::string name(f.name_string());
    for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    req.headers.emplace_back(std::move(name), std::string(f.value()));
  }
  req.remote = peer_;
  req.body = std::move(msg.body());
  q.bytes = static_cast<int64_t>(req.body.size() + req.target.size()) + 256;
  req.budget_hold = hold_bytes(budget_, static_cast<int64_t>(req.body.size()));
  q.keep_alive = msg.keep_alive();
  if (!q.keep_alive) stop_reading_ = true;  // its answer is the connection's last
  queued_bytes_ += q.bytes;
  queue_.push_back(std::move(q));
  serve_queue();
  // Keep a read pending: it notices a client that goes away mid-response and
  // picks up pipelined requests.
  read_next();
}

void Connection::on_read_error(beast::error_code ec, ReadPhase phase) {
  reading_ = false;
  phase_ = ReadPhase::None;
  disarm_read_timer();
  if (closed_) return;
  if (read_timed_out_) {
    read_timed_out_ = false;
    return reject(408, phase == ReadPhase::Body ? "the request body stopped arriving"
                                                : "the request head did not arrive in time");
  }
  if (ec == http::error::body_limit)
    return reject(413, "request body is larger than the server's limit of " + std::to_string(config_.max_body_bytes) +
                           " bytes");
  if (ec == http::error::header_limit) return reject(431, "request headers are larger than 16 KiB");
  if (ec == http::error::end_of_stream || ec == asio::error::eof || ec == asio::error::connection_reset ||
      ec == asio::error::operation_aborted || ec == asio::error::broken_pipe || ec == http::error::partial_message) {
    return close();  // the client went away (mid-response: its request is cancelled)
  }
  reject(400, "malformed HTTP request: " + ec.message());
}

void Connection::reject(int status, std::string message) {
  // The byte stream cannot be trusted past this point: nothing more is read;
  // the error is answered after the requests before it, then we close.
  reading_ = false;
  phase_ = ReadPhase::None;
  disarm_read_timer();
  stop_reading_ = true;
  Queued q;
  q.error_status = status;
  q.error_message = std::move(message);
  queue_.push_back(std::move(q));
  serve_queue();
}

void Connection::serve_queue() {
  if (closed_ || active_no_ != 0 || close_after_ || queue_.empty()) return;
  Queued q = std::move(queue_.front());
  queue_.pop_front();
  queued_bytes_ -= q.bytes;
  if (q.error_status > 0) return send_error_and_close(q.error_status, q.error_message);
  dispatch(std::move(q));
}

void Connection::send_error_and_close(int status, const std::string& message) {
  const std::string body = error_json(message, "invalid_request_error", status);
  std::string bytes = head_text(status, "application/json", {}, false, body.size()) + body;
  close_after_ = true;
  account(static_cast<int64_t>(bytes.size()));
  enqueue(std::move(bytes));
}

void Connection::dispatch(Queued q) {
  active_no_ = next_no_++;
  answered_ = false;
  finishing_ = false;
  keep_alive_ = q.keep_alive;
  head_only_ = q.request.method == "HEAD";
  if (phase_ == ReadPhase::Waiting) disarm_read_timer();  // no longer idle
  {
    std::lock_guard lock(cb_mu_);
    on_disconnect_ = nullptr;
    disconnect_no_ = active_no_;
  }
  Responder responder(shared_from_this(), active_no_);
  // The handler runs on this strand; it must not block (documented contract).
  server_->handler(std::move(q.request), std::move(responder));
}

void Connection::account(int64_t n) {
  unsent_.fetch_add(n, std::memory_order_relaxed);
  budget_->add(n);
}

void Connection::release(int64_t n) {
  unsent_.fetch_sub(n, std::memory_order_relaxed);
  budget_->sub(n);
}

void Connection::respond(uint64_t no, HttpResponse r) {
  asio::dispatch(strand_, [self = shared_from_this(), no, r = std::move(r)]() mutable {
    if (self->closed_ || no != self->active_no_ || self->answered_) return;
    self->answered_ = true;
    self->finishing_ = true;
    // HEAD: the same head (with the length the body would have), no body.
    std::string bytes = head_text(r.status, r.content_type, r.headers, self->keep_alive_, r.body.size());
    if (!self->head_only_) bytes += r.body;
    self->account(static_cast<int64_t>(bytes.size()));
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
    std::string head = head_text(status, ct, h, self->keep_alive_, std::nullopt);
    self->account(static_cast<int64_t>(head.size()));
    self->enqueue(std::move(head));
  });
  return stream;
}

void Connection::stream_write(uint64_t no, std::string framed) {
  account(static_cast<int64_t>(framed.size()));  // held from now on, until written or dropped
  asio::post(strand_, [self = shared_from_this(), no, f = std::move(framed)]() mutable {
    if (self->closed_ || no != self->active_no_ || self->head_only_) return self->release(static_cast<int64_t>(f.size()));
    self->enqueue(std::move(f));
  });
}

void Connection::stream_finish(uint64_t no) {
  asio::post(strand_, [self = shared_from_this(), no] {
    if (self->closed_ || no != self->active_no_ || self->finishing_) return;
    self->finishing_ = true;
    if (self->head_only_) {
      if (!self->writing_) self->write_some();
      return;
    }
    std::string last = "0\r\n\r\n";
    self->account(static_cast<int64_t>(last.size()));
    self->enqueue(std::move(last));
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
  if (closed_) return release(static_cast<int64_t>(bytes.size()));
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
  arm_write_timer(config_.write_timeout_s);
  asio::async_write(socket_, asio::buffer(writing_buf_),
                    asio::bind_executor(strand_, [self = shared_from_this()](beast::error_code ec, size_t) {
                      if (self->closed_) return;  // close() released what was in flight
                      if (ec) return self->close();
                      self->release(static_cast<int64_t>(self->writing_buf_.size()));
                      self->writing_buf_.clear();
                      if (self->writing_buf_.capacity() > (64 << 10)) self->writing_buf_.shrink_to_fit();
                      self->disarm_write_timer();
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
  if (!keep_alive_) return linger_close();
  serve_queue();
  if (active_no_ == 0 && queue_.empty() && phase_ == ReadPhase::Waiting) arm_read_timer(config_.idle_timeout_s);
  read_next();
}

void Connection::linger_close() {
  // After the last reply the client may still be sending (a body we refused,
  // pipelined requests we will not answer): closing with unread data would
  // reset the connection before it reads our answer. Stop sending, then
  // discard what arrives for a moment.
  close_after_ = true;
  beast::error_code ignored;
  socket_.shutdown(tcp::socket::shutdown_send, ignored);
  phase_ = ReadPhase::None;
  arm_read_timer(2.0);
  if (reading_) return;  // the pending read ends in an error or EOF, which closes
  reading_ = true;
  drain();
}

void Connection::drain() {
  if (!sink_) sink_ = std::make_unique<std::array<char, 16384>>();
  socket_.async_read_some(asio::buffer(*sink_),
                          asio::bind_executor(strand_, [self = shared_from_this()](beast::error_code ec, size_t) {
                            if (ec || self->closed_) return self->close();
                            self->drain();
                          }));
}

void Connection::close() {
  if (closed_) return;
  closed_ = true;
  disarm_read_timer();
  disarm_write_timer();
  if (stream_) stream_->mark_closed();
  if (active_no_ != 0) fire_disconnect();
  beast::error_code ignored;
  socket_.shutdown(tcp::socket::shutdown_both, ignored);
  socket_.close(ignored);
  int64_t dropped = writing_ ? static_cast<int64_t>(writing_buf_.size()) : 0;
  for (const std::string& b : out_) dropped += static_cast<int64_t>(b.size());
  release(dropped);
  out_.clear();
  writing_buf_.clear();
  queue_.clear();
  queued_bytes_ = 0;
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
  impl_->budget = std::make_shared<ByteBudget>(impl_->config.max_buffered_bytes);
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
  const auto bound = impl_->acceptor.local_endpoint(ec);
  impl_->bound_port = ec ? 0 : bound.port();
  impl_->accept();
  return Status::ok();
}

int HttpServer::port() const {
  // Read once at listen(): the acceptor belongs to its strand after that.
  return impl_->bound_port.load();
}

void HttpServer::run() {
  std::vector<std::thread> threads;
  for (int i = 1; i < std::max(1, impl_->config.n_io_threads); ++i) threads.emplace_back([this] { impl_->ioc.run(); });
  impl_->ioc.run();
  for (auto& t : threads) t.join();
}

void HttpServer::stop_accepting() {
  impl_->accepting = false;
  asio::post(impl_->accept_strand, [this] {
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
  // Let the closes run (a loaded machine may take a while), then end run().
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  asio::post(impl_->ioc, [impl = impl_.get(), deadline] { impl->stop_when_closed(deadline); });
}

int HttpServer::n_connections() const { return impl_->n_connections.load(); }

int64_t HttpServer::buffered_bytes() const { return impl_->budget->used(); }

}  // namespace tern::server
