// The bulk writer (net/bulk_writer.hpp): one epoll thread writing gather buffers.
#include "net/bulk_writer.hpp"

#include <fcntl.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <vector>

#include "node/log.hpp"
#include "pipeline/tensor/buffer_pool.hpp"
#include "pipeline/runtime/thread_name.hpp"

namespace conveyor::actors {

namespace {

constexpr const char* kLog = "bulk";
constexpr uint64_t kWakeTag = ~uint64_t{0}; // epoll tag of the wake-up eventfd
constexpr int kMaxIov = 64;                 // pieces per sendmsg (2 per frame: header, tensor)

struct Conn {
  int fd = -1;
  std::string label;
  std::deque<GatherBuffer> queue;
  std::size_t offset = 0; // bytes of queue.front() written
  bool blocked = false;   // the last write found the socket full: wait for EPOLLOUT
  bool broken = false;    // a write failed: what comes is dropped
};

struct Command {
  enum class Kind { add, send, remove } kind;
  uint64_t key = 0;
  int fd = -1;
  std::string label;
  GatherBuffer buffer;
};

} // namespace

struct BulkWriter::Impl {
  int epoll_fd = -1;
  int wake_fd = -1;
  std::thread thread;

  std::mutex mu; // guards commands and stop
  std::vector<Command> commands;
  bool stop = false;

  std::unordered_map<uint64_t, Conn> conns; // the thread's own

  std::atomic<int64_t> buffers{0}, bytes{0}, syscalls{0}, would_block{0};

  void post(Command c) {
    bool wake = false;
    {
      std::lock_guard<std::mutex> lock{mu};
      wake = commands.empty();
      commands.push_back(std::move(c));
    }
    if (wake)
      wake_up();
  }

  void wake_up() {
    const uint64_t one = 1;
    [[maybe_unused]] auto n = ::write(wake_fd, &one, sizeof one);
  }

  void close_conn(Conn& c) {
    ::epoll_ctl(epoll_fd, EPOLL_CTL_DEL, c.fd, nullptr); // before close: CAF's descriptor of
    ::close(c.fd);                                       // the same socket stays open
    if (!c.queue.empty() && !c.broken)
      log::warning(kLog, c.label + " closed with " + std::to_string(c.queue.size()) +
                           " frame(s) unsent (the consumer fails or refetches them)");
  }

  void apply(Command& cmd) {
    switch (cmd.kind) {
      case Command::Kind::add: {
        if (auto old = conns.find(cmd.key); old != conns.end()) { // a reused key: the old one went
          close_conn(old->second);
          conns.erase(old);
        }
        epoll_event ev{};
        ev.events = EPOLLOUT | EPOLLET;
        ev.data.u64 = cmd.key;
        if (::epoll_ctl(epoll_fd, EPOLL_CTL_ADD, cmd.fd, &ev) != 0) {
          log::warning(kLog, cmd.label + ": cannot watch its socket (" + std::strerror(errno) +
                               "): closing it, the consumer refetches or fails its frames");
          ::shutdown(cmd.fd, SHUT_RDWR); // CAF's side sees the close: the channel breaks
          ::close(cmd.fd);
          return;
        }
        Conn c;
        c.fd = cmd.fd;
        c.label = std::move(cmd.label);
        conns[cmd.key] = std::move(c);
        return;
      }
      case Command::Kind::send: {
        auto c = conns.find(cmd.key);
        if (c != conns.end() && !c->second.broken)
          c->second.queue.push_back(std::move(cmd.buffer));
        return;
      }
      case Command::Kind::remove: {
        auto c = conns.find(cmd.key);
        if (c == conns.end())
          return;
        close_conn(c->second);
        conns.erase(c);
        return;
      }
    }
  }

  // Writes what `c` has queued until the socket is full or the queue empty.
  void write_some(Conn& c) {
    while (!c.queue.empty() && !c.blocked && !c.broken) {
      iovec iov[kMaxIov];
      int n = 0;
      std::size_t skip = c.offset;
      for (const GatherBuffer& b : c.queue) {
        if (n == kMaxIov)
          break;
        b.for_each_piece([&](const char* p, std::size_t size) {
          if (n == kMaxIov)
            return;
          if (skip >= size) {
            skip -= size;
            return;
          }
          iov[n].iov_base = const_cast<char*>(p + skip);
          iov[n].iov_len = size - skip;
          skip = 0;
          ++n;
        });
      }
      std::size_t written = 0;
      if (n > 0) {
        msghdr m{};
        m.msg_iov = iov;
        m.msg_iovlen = static_cast<std::size_t>(n);
        const ssize_t w = ::sendmsg(c.fd, &m, MSG_NOSIGNAL | MSG_DONTWAIT);
        syscalls.fetch_add(1, std::memory_order_relaxed);
        if (w < 0) {
          if (errno == EINTR)
            continue;
          if (errno == EAGAIN || errno == EWOULDBLOCK) {
            c.blocked = true;
            would_block.fetch_add(1, std::memory_order_relaxed);
            return;
          }
          log::warning(kLog, c.label + ": writing failed (" + std::strerror(errno) + "), " +
                               std::to_string(c.queue.size()) +
                               " frame(s) unsent (the consumer fails or refetches them)");
          c.broken = true;
          c.queue.clear();
          ::epoll_ctl(epoll_fd, EPOLL_CTL_DEL, c.fd, nullptr); // nothing more to write to it
          ::shutdown(c.fd, SHUT_RDWR); // so that CAF's side sees the close too: the channel breaks
          return;
        }
        written = static_cast<std::size_t>(w);
        bytes.fetch_add(w, std::memory_order_relaxed);
      }
      c.offset += written;
      while (!c.queue.empty() && c.offset >= c.queue.front().size()) {
        c.offset -= c.queue.front().size();
        BufferPool::global().release(std::move(c.queue.front().own)); // large only when compressed
        c.queue.pop_front();
        buffers.fetch_add(1, std::memory_order_relaxed);
      }
    }
  }

  void run() {
    name_this_thread("conveyor-bulkw");
    epoll_event events[64];
    std::vector<Command> todo;
    for (;;) {
      const int n = ::epoll_wait(epoll_fd, events, 64, -1);
      for (int i = 0; i < n; ++i) {
        if (events[i].data.u64 == kWakeTag) {
          uint64_t count = 0;
          [[maybe_unused]] auto r = ::read(wake_fd, &count, sizeof count);
          continue;
        }
        if (auto c = conns.find(events[i].data.u64); c != conns.end())
          c->second.blocked = false; // writable again (or failed: the next write says)
      }
      {
        std::lock_guard<std::mutex> lock{mu};
        if (stop)
          return;
        todo.swap(commands);
      }
      for (auto& cmd : todo)
        apply(cmd);
      todo.clear();
      for (auto& [key, c] : conns)
        write_some(c);
    }
  }
};

BulkWriter::BulkWriter() : impl_(std::make_unique<Impl>()) {
  impl_->epoll_fd = ::epoll_create1(EPOLL_CLOEXEC);
  impl_->wake_fd = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = kWakeTag;
  if (impl_->epoll_fd < 0 || impl_->wake_fd < 0 ||
      ::epoll_ctl(impl_->epoll_fd, EPOLL_CTL_ADD, impl_->wake_fd, &ev) != 0) {
    log::error(kLog, std::string{"the bulk writer cannot start ("} + std::strerror(errno) +
                       "): plain bulk connections will refuse to open");
    return;
  }
  impl_->thread = std::thread([impl = impl_.get()] { impl->run(); });
}

BulkWriter::~BulkWriter() {
  if (impl_->thread.joinable()) {
    {
      std::lock_guard<std::mutex> lock{impl_->mu};
      impl_->stop = true;
    }
    impl_->wake_up();
    impl_->thread.join();
  }
  for (auto& entry : impl_->conns)
    impl_->close_conn(entry.second);
  for (auto& cmd : impl_->commands) // never applied: an added socket's duplicate is still ours
    if (cmd.kind == Command::Kind::add)
      ::close(cmd.fd);
  if (impl_->wake_fd >= 0)
    ::close(impl_->wake_fd);
  if (impl_->epoll_fd >= 0)
    ::close(impl_->epoll_fd);
}

Status BulkWriter::add(uint64_t key, int fd, std::string label) {
  if (!impl_->thread.joinable())
    return internal_error("the bulk writer did not start");
  const int dup = ::fcntl(fd, F_DUPFD_CLOEXEC, 0);
  if (dup < 0)
    return unavailable(label + ": cannot duplicate its socket: " + std::strerror(errno));
  Command c{Command::Kind::add, key, dup, std::move(label), {}};
  impl_->post(std::move(c));
  return Status::OK();
}

void BulkWriter::send(uint64_t key, GatherBuffer buffer) {
  impl_->post(Command{Command::Kind::send, key, -1, {}, std::move(buffer)});
}

void BulkWriter::remove(uint64_t key) {
  impl_->post(Command{Command::Kind::remove, key, -1, {}, {}});
}

BulkWriter::Stats BulkWriter::stats() const {
  Stats s;
  s.buffers = impl_->buffers.load(std::memory_order_relaxed);
  s.bytes = impl_->bytes.load(std::memory_order_relaxed);
  s.syscalls = impl_->syscalls.load(std::memory_order_relaxed);
  s.would_block = impl_->would_block.load(std::memory_order_relaxed);
  return s;
}

} // namespace conveyor::actors
