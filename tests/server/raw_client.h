// A deliberately small blocking HTTP/1.1 client over POSIX sockets, for tests
// that must control the bytes on the wire (malformed requests, disconnects,
// clients that stop reading). Not a general client.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <string>
#include <string_view>

namespace tern::test {

class RawConnection {
 public:
  explicit RawConnection(int port, int rcvbuf_bytes = 0) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    if (rcvbuf_bytes > 0) ::setsockopt(fd_, SOL_SOCKET, SO_RCVBUF, &rcvbuf_bytes, sizeof rcvbuf_bytes);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) close();
  }
  ~RawConnection() { close(); }
  RawConnection(const RawConnection&) = delete;
  RawConnection& operator=(const RawConnection&) = delete;

  bool ok() const { return fd_ >= 0; }
  void close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }
  bool send_all(std::string_view data) {
    while (!data.empty()) {
      const ssize_t n = ::send(fd_, data.data(), data.size(), MSG_NOSIGNAL);
      if (n <= 0) return false;
      data.remove_prefix(static_cast<size_t>(n));
    }
    return true;
  }
  // Sends what the socket takes now without blocking; bytes sent, 0 when full, -1 on error.
  ssize_t send_some(std::string_view data) {
    const ssize_t n = ::send(fd_, data.data(), data.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0) return errno == EAGAIN || errno == EWOULDBLOCK ? 0 : -1;
    return n;
  }
  // Reads whatever arrives within timeout_ms (appends to out); false on EOF/error.
  bool read_some(std::string& out, int timeout_ms) {
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, timeout_ms) <= 0) return true;
    char buf[65536];
    const ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
    if (n <= 0) return false;
    out.append(buf, static_cast<size_t>(n));
    return true;
  }
  // Reads until `needle` appears, EOF, or the deadline; returns what was read.
  std::string read_until(std::string_view needle, int timeout_ms = 20000) {
    std::string out;
    const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    while (out.find(needle) == std::string::npos && std::chrono::steady_clock::now() < end)
      if (!read_some(out, 50)) break;
    return out;
  }
  std::string read_to_eof(int timeout_ms = 20000) { return read_until("\x01\x02never\x03", timeout_ms); }

 private:
  int fd_ = -1;
};

inline std::string http_request(std::string_view method, std::string_view path, std::string_view body,
                                std::string_view extra_headers = "", bool close = true) {
  std::string r = std::string(method) + " " + std::string(path) + " HTTP/1.1\r\nHost: 127.0.0.1\r\n";
  if (!body.empty() || method == "POST") {
    r += "Content-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) + "\r\n";
  }
  r += extra_headers;
  if (close) r += "Connection: close\r\n";
  r += "\r\n";
  r += body;
  return r;
}

struct Reply {
  int status = 0;
  std::string head, body;  // body with chunked framing removed
};

inline Reply parse_reply(const std::string& raw) {
  Reply r;
  const size_t end = raw.find("\r\n\r\n");
  if (raw.size() < 12 || end == std::string::npos) return r;
  r.status = std::atoi(raw.c_str() + 9);
  r.head = raw.substr(0, end);
  std::string rest = raw.substr(end + 4);
  if (r.head.find("Transfer-Encoding: chunked") == std::string::npos) {
    r.body = rest;
    return r;
  }
  size_t pos = 0;
  while (pos < rest.size()) {
    const size_t eol = rest.find("\r\n", pos);
    if (eol == std::string::npos) break;
    const size_t n = std::stoul(rest.substr(pos, eol - pos), nullptr, 16);
    if (n == 0) break;
    r.body += rest.substr(eol + 2, n);
    pos = eol + 2 + n + 2;
  }
  return r;
}

// One request on a fresh connection, read to the end.
inline Reply fetch(int port, std::string_view method, std::string_view path, std::string_view body = "",
                   std::string_view extra_headers = "") {
  RawConnection c(port);
  if (!c.ok() || !c.send_all(http_request(method, path, body, extra_headers))) return {};
  return parse_reply(c.read_to_eof());
}

}  // namespace tern::test
