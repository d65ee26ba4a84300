#include "loadgen/openai_client.h"

#include <boost/asio/connect.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <limits>
#include <unordered_set>

#include "loadgen/sse.h"

namespace tern::loadgen {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

constexpr size_t kMaxKeptBody = 64 * 1024;

double seconds_since(Clock::time_point origin) {
  return std::chrono::duration<double>(Clock::now() - origin).count();
}

class Call;

}  // namespace

struct HttpClient::Impl {
  asio::io_context& io;
  HttpUrl url;
  std::string api_key;
  tcp::resolver::results_type endpoints;
  std::unordered_set<std::shared_ptr<Call>> live;
};

namespace {

// One request on its own connection. Holds itself alive through the shared
// pointers captured by its pending handlers and the client's live set.
class Call : public std::enable_shared_from_this<Call> {
 public:
  Call(HttpClient::Impl& client, HttpCall spec, Clock::time_point origin, std::function<void(CallRecord)> done)
      : client_(client),
        spec_(std::move(spec)),
        origin_(origin),
        done_(std::move(done)),
        stream_(client.io),
        sse_([this](std::string_view data) { on_event(data); }) {}

  void start() {
    rec_.t_start = seconds_since(origin_);
    req_.method(spec_.method == "GET" ? http::verb::get : http::verb::post);
    req_.target(client_.url.base_path + spec_.path);
    req_.version(11);
    req_.set(http::field::host, client_.url.host + ":" + std::to_string(client_.url.port));
    req_.set(http::field::user_agent, "tern-bench-serve");
    req_.set(http::field::connection, "close");
    if (!client_.api_key.empty()) req_.set(http::field::authorization, "Bearer " + client_.api_key);
    if (spec_.method != "GET") {
      req_.set(http::field::content_type, "application/json");
      req_.body() = spec_.body;
    }
    if (spec_.stream) req_.set(http::field::accept, "text/event-stream");
    req_.prepare_payload();
    parser_.body_limit(std::numeric_limits<std::uint64_t>::max());
    stream_.expires_at(spec_.deadline);
    stream_.async_connect(client_.endpoints, [self = shared_from_this()](beast::error_code ec, const tcp::endpoint&) {
      if (ec) return self->fail(ec, "connect");
      http::async_write(self->stream_, self->req_, [self](beast::error_code ec2, size_t) {
        if (ec2) return self->fail(ec2, "io_error");
        http::async_read_header(self->stream_, self->buf_, self->parser_,
                                [self](beast::error_code ec3, size_t) { self->on_header(ec3); });
      });
    });
  }

  void cancel() {
    cancelled_ = true;
    beast::error_code ignored;
    stream_.socket().close(ignored);
  }

 private:
  void on_header(beast::error_code ec) {
    if (ec) return fail(ec, "io_error");
    rec_.http_status = static_cast<int>(parser_.get().result_int());
    read_body();
  }

  void read_body() {
    parser_.get().body().data = chunk_;
    parser_.get().body().size = sizeof(chunk_);
    http::async_read_some(stream_, buf_, parser_,
                          [self = shared_from_this()](beast::error_code ec, size_t) { self->on_body(ec); });
  }

  void on_body(beast::error_code ec) {
    if (ec == http::error::need_buffer) ec = {};
    const size_t got = sizeof(chunk_) - parser_.get().body().size;
    if (got > 0) take_bytes(std::string_view(chunk_, got));
    if (ec) return fail(ec, "io_error");
    if (finished_) return;  // a stream error ended the call early
    if (parser_.is_done()) return complete();
    read_body();
  }

  void take_bytes(std::string_view bytes) {
    if (rec_.http_status == 200 && spec_.stream) {
      now_ = seconds_since(origin_);
      sse_.feed(bytes);
    } else if (rec_.body.size() < kMaxKeptBody) {
      rec_.body.append(bytes.substr(0, kMaxKeptBody - rec_.body.size()));
    }
  }

  void on_event(std::string_view data) {
    if (saw_done_ || finished_) return;
    const ChunkInfo c = interpret_chunk(data);
    if (c.done) {
      saw_done_ = true;
      return;
    }
    if (c.malformed) return set_error("malformed_chunk", "unexpected stream chunk: " + std::string(data.substr(0, 200)));
    if (c.is_error) {
      set_error("stream_error", c.error_type.empty() ? c.error_message : c.error_type + ": " + c.error_message);
      return;
    }
    if (c.prompt_tokens) rec_.usage_prompt_tokens = c.prompt_tokens;
    if (c.completion_tokens) rec_.usage_completion_tokens = c.completion_tokens;
    if (!c.finish_reason.empty()) rec_.finish_reason = c.finish_reason;
    if (!c.content.empty()) {
      if (!rec_.t_first_token) rec_.t_first_token = now_;
      rec_.t_chunks.push_back(now_);
      rec_.n_output_bytes += c.content.size();
    }
  }

  void set_error(const std::string& type, const std::string& message) {
    if (!rec_.error_type.empty()) return;
    rec_.error_type = type;
    rec_.error_message = message;
  }

  void complete() {
    if (rec_.http_status != 200) {
      std::string type, message;
      read_error_body(rec_.body, type, message);
      set_error("http_" + std::to_string(rec_.http_status), message.empty() ? type : message);
    } else if (spec_.stream) {
      sse_.finish();
      if (!saw_done_) set_error("incomplete_stream", "the stream ended without data: [DONE]");
    }
    finish();
  }

  void fail(beast::error_code ec, const char* kind) {
    if (finished_) return;
    if (cancelled_) set_error("cancelled", "cancelled (--max-duration reached)");
    else if (ec == beast::error::timeout) set_error("timeout", "no complete answer before --timeout");
    else if (saw_done_ && (ec == http::error::end_of_stream || ec == asio::error::eof)) return finish();
    else set_error(kind, ec.message());
    finish();
  }

  void finish() {
    if (finished_) return;
    finished_ = true;
    rec_.t_end = seconds_since(origin_);
    beast::error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_both, ignored);
    stream_.close();
    auto self = shared_from_this();
    client_.live.erase(self);
    done_(std::move(rec_));
  }

  HttpClient::Impl& client_;
  HttpCall spec_;
  Clock::time_point origin_;
  std::function<void(CallRecord)> done_;
  beast::tcp_stream stream_;
  beast::flat_buffer buf_;
  http::request<http::string_body> req_;
  http::response_parser<http::buffer_body> parser_;
  char chunk_[16384];
  SseParser sse_;
  CallRecord rec_;
  double now_ = 0;
  bool saw_done_ = false, finished_ = false, cancelled_ = false;
};

}  // namespace

std::string HttpUrl::text() const { return "http://" + host + ":" + std::to_string(port) + base_path; }

Result<HttpUrl> parse_http_url(const std::string& url) {
  const std::string scheme = "http://";
  if (url.rfind(scheme, 0) != 0) {
    const auto sep = url.find("://");
    return error(ErrorKind::InvalidArgument,
                 "--url '" + url + "': only plain http:// URLs are supported" +
                     (sep == std::string::npos ? std::string(" (no scheme given)")
                                               : " (got scheme '" + url.substr(0, sep) + "')"));
  }
  std::string rest = url.substr(scheme.size());
  const size_t slash = rest.find('/');
  HttpUrl out;
  std::string authority = rest.substr(0, slash);
  if (slash != std::string::npos) out.base_path = rest.substr(slash);
  while (!out.base_path.empty() && out.base_path.back() == '/') out.base_path.pop_back();
  if (out.base_path.size() >= 3 && out.base_path.compare(out.base_path.size() - 3, 3, "/v1") == 0)
    out.base_path.resize(out.base_path.size() - 3);  // accept ".../v1" as the OpenAI base URL
  if (authority.find('@') != std::string::npos)
    return error(ErrorKind::InvalidArgument, "--url '" + url + "': credentials in the URL are not supported");
  size_t colon = authority.rfind(':');
  if (!authority.empty() && authority.front() == '[') {  // [v6]:port
    const size_t close = authority.find(']');
    if (close == std::string::npos) return error(ErrorKind::InvalidArgument, "--url '" + url + "': bad IPv6 host");
    out.host = authority.substr(1, close - 1);
    colon = authority.find(':', close);
  } else {
    out.host = authority.substr(0, colon);
  }
  if (colon != std::string::npos) {
    const std::string port = authority.substr(colon + 1);
    char* end = nullptr;
    const long p = std::strtol(port.c_str(), &end, 10);
    if (port.empty() || *end || p < 1 || p > 65535)
      return error(ErrorKind::InvalidArgument, "--url '" + url + "': bad port '" + port + "'");
    out.port = static_cast<uint16_t>(p);
  }
  if (out.host.empty()) return error(ErrorKind::InvalidArgument, "--url '" + url + "': missing host");
  return out;
}

HttpClient::HttpClient(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
HttpClient::~HttpClient() = default;

Result<std::unique_ptr<HttpClient>> HttpClient::create(asio::io_context& io, const HttpUrl& url, std::string api_key) {
  auto impl = std::make_unique<Impl>(Impl{io, url, std::move(api_key), {}, {}});
  tcp::resolver resolver(io);
  beast::error_code ec;
  impl->endpoints = resolver.resolve(url.host, std::to_string(url.port), ec);
  if (ec) return error(ErrorKind::InvalidArgument, "cannot resolve '" + url.host + "': " + ec.message());
  return std::unique_ptr<HttpClient>(new HttpClient(std::move(impl)));
}

void HttpClient::start(HttpCall call, Clock::time_point origin, std::function<void(CallRecord)> done) {
  auto c = std::make_shared<Call>(*impl_, std::move(call), origin, std::move(done));
  impl_->live.insert(c);
  c->start();
}

void HttpClient::cancel_all() {
  for (const auto& c : impl_->live) c->cancel();
}

size_t HttpClient::n_in_flight() const { return impl_->live.size(); }

Result<std::string> http_get(const HttpUrl& url, const std::string& path, double timeout_s, const std::string& api_key) {
  asio::io_context io;
  auto client = HttpClient::create(io, url, api_key);
  if (!client) return client.status();
  HttpCall call;
  call.method = "GET";
  call.path = path;
  call.stream = false;
  const auto origin = Clock::now();
  call.deadline = origin + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_s));
  CallRecord rec;
  (*client)->start(std::move(call), origin, [&rec](CallRecord r) { rec = std::move(r); });
  io.run();
  if (!rec.ok())
    return error(ErrorKind::IoError, "GET " + url.text() + path + ": " + rec.error_type +
                                         (rec.error_message.empty() ? "" : " (" + rec.error_message + ")"));
  return rec.body;
}

}  // namespace tern::loadgen
