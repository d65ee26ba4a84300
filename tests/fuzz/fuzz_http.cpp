// HTTP/1.1 request framing as `tern serve` reads it (server/http_server.h on Beast): one server
// on loopback for the whole run, one connection per input. The input is sent as the client's
// whole byte stream, then the client half-closes and reads until the server closes. Whatever the
// bytes (pipelined requests, chunked bodies, bad framing, truncation), the server must answer
// with HTTP responses only, close the connection promptly, and afterwards hold no connection and
// no buffered byte. Routes: /echo answers the body, /stream streams it back in pieces, the rest 404.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>

#include "fuzz.h"
#include "server/http_server.h"

namespace {

using tern::server::HttpServer;

[[noreturn]] void fail(const char* what) {
  std::fprintf(stderr, "fuzz_http: %s\n", what);
  std::abort();
}

// Stopped and joined at exit, so no I/O thread outlives the statics it uses.
struct Running {
  std::unique_ptr<HttpServer> srv;
  std::thread io;
  ~Running() {
    srv->stop();
    io.join();
  }
};

HttpServer& server() {
  static Running r = [] {
    tern::server::HttpServerConfig c;
    c.port = 0;
    c.n_io_threads = 1;
    c.max_body_bytes = 64 << 10;
    c.idle_timeout_s = c.header_timeout_s = c.body_timeout_s = c.write_timeout_s = 0.5;
    auto srv = std::make_unique<HttpServer>(c, [](tern::server::HttpRequest req, tern::server::Responder out) {
      if (req.path == "/echo") {
        out.respond({200, "text/plain", req.body, {}});
      } else if (req.path == "/stream") {
        auto st = out.start_stream(200, "text/event-stream");
        for (size_t i = 0; i < req.body.size(); i += 5) st->write("data: " + req.body.substr(i, 5) + "\n\n");
        st->finish();
      } else {
        out.respond({404, "application/json", "{}", {}});
      }
    });
    if (!srv->start().is_ok()) fail("cannot listen on loopback");
    HttpServer* p = srv.get();
    return Running{std::move(srv), std::thread([p] { p->run(); })};
  }();
  return *r.srv;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > (256u << 10)) return 0;
  HttpServer& srv = server();
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(srv.port()));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (fd < 0) fail("socket");
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    // Interrupted (SIGALRM), the connection goes on in the background: wait for it.
    if (errno != EINTR) fail("cannot connect");
    pollfd p{fd, POLLOUT, 0};
    while (::poll(&p, 1, 1000) <= 0) if (errno != EINTR) fail("cannot connect");
    int err = 0;
    socklen_t len = sizeof err;
    if (::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0 || err != 0) fail("cannot connect");
  }
  // Send and read together: a server answering pipelined requests may wait for us to read.
  std::string got;
  size_t sent = 0;
  bool half_closed = false;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  for (;;) {
    if (sent == size && !half_closed) ::shutdown(fd, SHUT_WR), half_closed = true;
    pollfd p{fd, static_cast<short>(POLLIN | (half_closed ? 0 : POLLOUT)), 0};
    // libFuzzer's -timeout ticks with SIGALRM: an interrupted call is tried again.
    if (::poll(&p, 1, 100) < 0) {
      if (errno == EINTR) continue;
      fail("poll");
    }
    if (std::chrono::steady_clock::now() > deadline) fail("the server kept the connection open for 5 s");
    if (p.revents & POLLOUT) {
      const ssize_t n = ::send(fd, data + sent, size - sent, MSG_NOSIGNAL);
      if (n > 0) sent += static_cast<size_t>(n);
      else if (errno != EINTR) sent = size;  // the server closed its side: the rest cannot go
    }
    if (p.revents & (POLLIN | POLLHUP | POLLERR)) {
      char buf[16384];
      const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      got.append(buf, static_cast<size_t>(n));
    }
  }
  ::close(fd);
  if (!got.empty() && got.rfind("HTTP/1.1 ", 0) != 0) fail("the server sent something other than an HTTP response");
  // The server's side of the connection goes and its buffers are released.
  for (int i = 0; srv.n_connections() > 0 || srv.buffered_bytes() > 0; ++i) {
    if (i > 2000) fail("a connection or buffered bytes outlived the connection");
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return 0;
}
