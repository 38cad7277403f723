// A loopback TCP forwarder that delays what the server sends by a fixed latency: a slow link (or
// a slow peer) in front of a real server, without network namespaces or root. Each accepted
// connection gets its own connection to the target; bytes from the target reach the client
// `delay` after they were read, in order. Everything stops in the destructor.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace conveyor::testing {

class DelayProxy {
public:
  DelayProxy(uint16_t target_port, std::chrono::milliseconds delay)
    : target_port_(target_port), delay_(delay) {
    listener_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(a);
    if (listener_ < 0 || ::bind(listener_, reinterpret_cast<sockaddr*>(&a), len) != 0 ||
        ::listen(listener_, 64) != 0 ||
        ::getsockname(listener_, reinterpret_cast<sockaddr*>(&a), &len) != 0)
      return;
    port_ = ntohs(a.sin_port);
    accept_thread_ = std::thread([this] { accept_loop(); });
  }

  ~DelayProxy() {
    stop_ = true;
    if (accept_thread_.joinable())
      accept_thread_.join(); // no connection threads are added after this
    for (auto& c : conns_)
      c->cv.notify_all();
    for (auto& t : threads_)
      t.join();
    for (auto& c : conns_) {
      ::close(c->client);
      ::close(c->server);
    }
    if (listener_ >= 0)
      ::close(listener_);
  }

  DelayProxy(const DelayProxy&) = delete;
  DelayProxy& operator=(const DelayProxy&) = delete;

  uint16_t port() const { return port_; } // 0: the proxy could not listen
  int connections() const { return accepted_.load(); }

private:
  using Clock = std::chrono::steady_clock;
  struct Chunk {
    Clock::time_point due;
    std::vector<char> bytes;
  };
  struct Conn {
    int client = -1;
    int server = -1;
    std::mutex mx;
    std::condition_variable cv;
    std::deque<Chunk> to_client; // read from the server, not yet due
    bool server_closed = false;
  };

  // Waits up to 50 ms for `fd` to be readable, so that every loop sees stop_.
  static bool readable(int fd) {
    pollfd p{fd, POLLIN, 0};
    return ::poll(&p, 1, 50) > 0;
  }

  void accept_loop() {
    while (!stop_) {
      if (!readable(listener_))
        continue;
      int client = ::accept(listener_, nullptr, nullptr);
      if (client < 0)
        continue;
      int server = ::socket(AF_INET, SOCK_STREAM, 0);
      sockaddr_in a{};
      a.sin_family = AF_INET;
      a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      a.sin_port = htons(target_port_);
      if (server < 0 || ::connect(server, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
        ::close(client);
        if (server >= 0)
          ::close(server);
        continue;
      }
      ++accepted_;
      auto c = std::make_shared<Conn>();
      c->client = client;
      c->server = server;
      conns_.push_back(c);
      threads_.emplace_back([this, c] { pump(c->client, c->server); }); // client -> server: as is
      threads_.emplace_back([this, c] { read_server(*c); });
      threads_.emplace_back([this, c] { write_client(*c); });
    }
  }

  void pump(int from, int to) {
    std::vector<char> buf(64 * 1024);
    while (!stop_) {
      if (!readable(from))
        continue;
      auto n = ::recv(from, buf.data(), buf.size(), 0);
      if (n <= 0 || !send_all(to, buf.data(), static_cast<std::size_t>(n))) {
        ::shutdown(to, SHUT_WR);
        return;
      }
    }
  }

  void read_server(Conn& c) {
    std::vector<char> buf(64 * 1024);
    while (!stop_) {
      if (!readable(c.server))
        continue;
      auto n = ::recv(c.server, buf.data(), buf.size(), 0);
      std::lock_guard<std::mutex> guard(c.mx);
      if (n <= 0) {
        c.server_closed = true;
        c.cv.notify_all();
        return;
      }
      c.to_client.push_back(Chunk{Clock::now() + delay_, {buf.begin(), buf.begin() + n}});
      c.cv.notify_all();
    }
  }

  void write_client(Conn& c) {
    std::unique_lock<std::mutex> lock(c.mx);
    while (!stop_) {
      if (c.to_client.empty()) {
        if (c.server_closed) {
          ::shutdown(c.client, SHUT_WR);
          return;
        }
        c.cv.wait_for(lock, std::chrono::milliseconds(50));
        continue;
      }
      auto due = c.to_client.front().due;
      if (Clock::now() < due) {
        c.cv.wait_until(lock, std::min(due, Clock::now() + std::chrono::milliseconds(50)));
        continue;
      }
      auto chunk = std::move(c.to_client.front());
      c.to_client.pop_front();
      lock.unlock();
      bool ok = send_all(c.client, chunk.bytes.data(), chunk.bytes.size());
      lock.lock();
      if (!ok)
        return;
    }
  }

  static bool send_all(int fd, const char* p, std::size_t n) {
    while (n > 0) {
      auto k = ::send(fd, p, n, MSG_NOSIGNAL);
      if (k <= 0)
        return false;
      p += k;
      n -= static_cast<std::size_t>(k);
    }
    return true;
  }

  uint16_t target_port_;
  std::chrono::milliseconds delay_;
  int listener_ = -1;
  uint16_t port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<int> accepted_{0};
  std::thread accept_thread_;
  // Only the accept thread adds to these; the destructor reads them after joining it.
  std::vector<std::shared_ptr<Conn>> conns_;
  std::vector<std::thread> threads_;
};

} // namespace conveyor::testing
