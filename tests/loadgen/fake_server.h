// tests/loadgen/fake_server.h — a scripted HTTP server on 127.0.0.1 for the
// client and runner tests: one thread per connection, each answering with the
// raw byte pieces the test's script returns (written one by one with a short
// pause, so the client sees split reads). A piece "<hang>" stalls until the
// server is destroyed. It records every request and the most connections
// that were ever being answered at once.
#pragma once

#include <atomic>
#include <boost/asio.hpp>
#include <chrono>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace tern::loadgen::test {

// Wraps data as one HTTP/1.1 chunk.
inline std::string http_chunk(const std::string& data) {
  char size[32];
  std::snprintf(size, sizeof size, "%zx\r\n", data.size());
  return size + data + "\r\n";
}

class FakeServer {
 public:
  using Script = std::function<std::vector<std::string>(const std::string& request)>;

  explicit FakeServer(Script script) : script_(std::move(script)), acceptor_(io_) {
    using boost::asio::ip::tcp;
    acceptor_.open(tcp::v4());
    acceptor_.set_option(tcp::acceptor::reuse_address(true));
    acceptor_.bind(tcp::endpoint(boost::asio::ip::address_v4::loopback(), 0));
    acceptor_.listen();
    port_ = acceptor_.local_endpoint().port();
    accept_thread_ = std::thread([this] { accept_loop(); });
  }

  ~FakeServer() {
    stopping_ = true;
    boost::system::error_code ec;
    boost::asio::ip::tcp::socket wake(io_);
    wake.connect({boost::asio::ip::address_v4::loopback(), port_}, ec);  // unblocks accept()
    accept_thread_.join();
    for (auto& t : connections_) t.join();
  }

  uint16_t port() const { return port_; }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  int max_in_flight() const { return max_in_flight_.load(); }
  std::vector<std::string> requests() {
    std::lock_guard<std::mutex> lock(mu_);
    return requests_;
  }

 private:
  void accept_loop() {
    while (true) {
      auto socket = std::make_shared<boost::asio::ip::tcp::socket>(io_);
      boost::system::error_code ec;
      acceptor_.accept(*socket, ec);
      if (stopping_ || ec) return;
      connections_.emplace_back([this, socket] { serve(*socket); });
    }
  }

  void serve(boost::asio::ip::tcp::socket& socket) {
    std::string request = read_request(socket);
    {
      std::lock_guard<std::mutex> lock(mu_);
      requests_.push_back(request);
    }
    const int now = ++in_flight_;
    for (int seen = max_in_flight_.load(); now > seen && !max_in_flight_.compare_exchange_weak(seen, now);) {
    }
    const std::vector<std::string> pieces = script_(request);
    boost::system::error_code ec;
    for (size_t i = 0; i < pieces.size(); ++i) {
      if (i + 1 == pieces.size()) --in_flight_;  // before the client can see the end
      if (pieces[i] == "<hang>") {
        while (!stopping_) std::this_thread::sleep_for(std::chrono::milliseconds(5));
        break;
      }
      boost::asio::write(socket, boost::asio::buffer(pieces[i]), ec);
      if (ec) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    if (pieces.empty()) --in_flight_;
    socket.shutdown(boost::asio::ip::tcp::socket::shutdown_both, ec);
    socket.close(ec);
  }

  // Headers, then Content-Length bytes of body.
  static std::string read_request(boost::asio::ip::tcp::socket& socket) {
    std::string data;
    char buf[4096];
    boost::system::error_code ec;
    size_t header_end = std::string::npos, need = 0;
    while (true) {
      if (header_end == std::string::npos && (header_end = data.find("\r\n\r\n")) != std::string::npos) {
        header_end += 4;
        std::string lower = data.substr(0, header_end);
        for (auto& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        const size_t cl = lower.find("content-length:");
        need = cl == std::string::npos ? 0 : std::stoul(lower.substr(cl + 15));
      }
      if (header_end != std::string::npos && data.size() >= header_end + need) return data;
      const size_t n = socket.read_some(boost::asio::buffer(buf), ec);
      if (ec) return data;
      data.append(buf, n);
    }
  }

  Script script_;
  boost::asio::io_context io_;
  boost::asio::ip::tcp::acceptor acceptor_;
  uint16_t port_ = 0;
  std::thread accept_thread_;
  std::vector<std::thread> connections_;
  std::atomic<bool> stopping_{false};
  std::atomic<int> in_flight_{0}, max_in_flight_{0};
  std::mutex mu_;
  std::vector<std::string> requests_;
};

}  // namespace tern::loadgen::test
