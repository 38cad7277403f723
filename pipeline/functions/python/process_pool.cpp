// The pool of Python interpreter processes (see the header).
#include "pipeline/functions/python/process_pool.hpp"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <set>

#include "pipeline/runtime/warnings.hpp"

extern char** environ;

namespace conveyor::python {

namespace {

constexpr std::size_t kMaxReply = 1 << 20; // a reply header or an error with its traceback
constexpr std::size_t kAlign = 16;

std::size_t aligned(std::size_t n) { return (n + kAlign - 1) & ~(kAlign - 1); }

template <class T>
void put(std::string& out, T value) {
  out.append(reinterpret_cast<const char*>(&value), sizeof value);
}

// Reads the reply's little-endian fields (x86-64 and aarch64 are little-endian, as the script).
class Reader {
public:
  Reader(const char* data, std::size_t size) : data_(data), size_(size) {}
  template <class T>
  bool get(T& out) {
    if (size_ - pos_ < sizeof out)
      return false;
    std::memcpy(&out, data_ + pos_, sizeof out);
    pos_ += sizeof out;
    return true;
  }
  bool get(std::string& out, std::size_t n) {
    if (size_ - pos_ < n)
      return false;
    out.assign(data_ + pos_, n);
    pos_ += n;
    return true;
  }

private:
  const char* data_;
  std::size_t size_;
  std::size_t pos_ = 0;
};

std::string describe_exit(int status) {
  if (WIFSIGNALED(status))
    return "was killed by signal " + std::to_string(WTERMSIG(status));
  if (WIFEXITED(status))
    return "exited with status " + std::to_string(WEXITSTATUS(status));
  return "ended";
}

} // namespace

// One pool process: its socket, and the two shared memory regions.
class PoolProcess {
public:
  ~PoolProcess() {
    unmap(in_map_, in_size_);
    unmap(out_map_, out_size_);
    for (int fd : {sock_, in_fd_, out_fd_})
      if (fd >= 0)
        ::close(fd);
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      int status = 0;
      ::waitpid(pid_, &status, 0);
    }
  }

  static Expected<std::unique_ptr<PoolProcess>> start(const std::string& python,
                                                      const std::vector<std::string>& sys_path) {
    int fds[2];
    if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, fds) != 0)
      return io_error(std::string{"Python pool: socketpair: "} + std::strerror(errno));
    auto process = std::unique_ptr<PoolProcess>(new PoolProcess);
    process->sock_ = fds[0];
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, fds[1], 3); // dup2 clears close-on-exec
    // Nothing else of the worker's: a descriptor someone opened without close-on-exec (a
    // library's socket) would stay open in the pool process after the worker closed it.
    posix_spawn_file_actions_addclosefrom_np(&actions, 4);
    std::vector<std::string> args = {python, "-c", pool_worker_script(), "3"};
    args.insert(args.end(), sys_path.begin(), sys_path.end());
    std::vector<char*> argv;
    for (auto& a : args)
      argv.push_back(a.data());
    argv.push_back(nullptr);
    pid_t pid = 0;
    const int rc = ::posix_spawn(&pid, python.c_str(), &actions, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    ::close(fds[1]);
    if (rc != 0)
      return io_error("Python pool: cannot start `" + python + "`: " + std::strerror(rc));
    process->pid_ = pid;
    return process;
  }

  int pid() const { return pid_; }

  // The outcome of one call: `died` when the process went away (the result is then an error
  // describing it, and the caller replaces the process).
  struct Outcome {
    Expected<Element> result;
    bool died = false;
  };

  Outcome run(uint64_t fn_id, const std::string& function, bool is_import, const Element& in,
              const std::string& name, const std::string& worker) {
    const bool load = loaded_.count(fn_id) == 0;
    // Layout of the input region: the function (first call only), then each component.
    std::size_t size = load ? aligned(function.size()) : 0;
    for (const Tensor& t : in.components) {
      if (t.dtype() == DType::string) {
        size += aligned(16 * static_cast<std::size_t>(t.num_elements()));
        for (int64_t i = 0; i < t.num_elements(); ++i)
          size += t.string_at(i).size();
        size = aligned(size);
      } else {
        size += aligned(t.bytes().size());
      }
    }
    if (Status st = ensure_input(size); !st.ok())
      return {st, false};
    std::string msg;
    put<uint64_t>(msg, fn_id);
    put<uint8_t>(msg, load ? (is_import ? 2 : 1) : 0);
    put<uint64_t>(msg, 0);
    put<uint64_t>(msg, load ? function.size() : 0);
    std::size_t pos = 0;
    if (load) {
      std::memcpy(in_map_, function.data(), function.size());
      pos = aligned(function.size());
    }
    put<uint32_t>(msg, static_cast<uint32_t>(in.size()));
    for (const Tensor& t : in.components) {
      const std::string dtype = dtype_name(t.dtype());
      put<uint8_t>(msg, static_cast<uint8_t>(dtype.size()));
      msg += dtype;
      put<uint32_t>(msg, static_cast<uint32_t>(t.rank()));
      for (int64_t d : t.shape())
        put<int64_t>(msg, d);
      if (t.dtype() == DType::string) {
        const std::size_t table = pos;
        std::size_t at = aligned(table + 16 * static_cast<std::size_t>(t.num_elements()));
        for (int64_t i = 0; i < t.num_elements(); ++i) {
          const std::string_view s = t.string_at(i);
          const uint64_t entry[2] = {at, s.size()};
          std::memcpy(in_map_ + table + 16 * i, entry, sizeof entry);
          std::memcpy(in_map_ + at, s.data(), s.size());
          at += s.size();
        }
        put<uint64_t>(msg, table);
        put<uint64_t>(msg, 16 * static_cast<uint64_t>(t.num_elements()));
        pos = aligned(at);
      } else {
        const ByteView bytes = t.bytes();
        if (!bytes.empty())
          std::memcpy(in_map_ + pos, bytes.data(), bytes.size());
        put<uint64_t>(msg, pos);
        put<uint64_t>(msg, bytes.size());
        pos += aligned(bytes.size());
      }
    }
    if (!send(msg))
      return died(name, worker);
    if (load)
      loaded_.insert(fn_id);

    std::string reply(kMaxReply, '\0');
    int received_fd = -1;
    const ssize_t n = receive(reply, received_fd);
    if (n <= 0)
      return died(name, worker);
    reply.resize(static_cast<std::size_t>(n));
    if (received_fd >= 0)
      if (Status st = map_output(received_fd); !st.ok())
        return {st, false};
    if (reply[0] == 'E')
      return {function_error(reply, name, worker), false};
    return {decode(reply, in, name), false};
  }

private:
  PoolProcess() = default;

  static void unmap(unsigned char* map, std::size_t size) {
    if (map != nullptr)
      ::munmap(map, size);
  }

  Status ensure_input(std::size_t size) {
    if (size <= in_size_ && in_fd_ >= 0)
      return Status::OK();
    const std::size_t new_size = std::max<std::size_t>({size, 2 * in_size_, 1 << 16});
    if (in_fd_ < 0) {
      in_fd_ = ::memfd_create("conveyor-pool-in", MFD_CLOEXEC);
      if (in_fd_ < 0)
        return io_error(std::string{"Python pool: memfd_create: "} + std::strerror(errno));
    }
    if (::ftruncate(in_fd_, static_cast<off_t>(new_size)) != 0)
      return io_error(std::string{"Python pool: ftruncate: "} + std::strerror(errno));
    unmap(in_map_, in_size_);
    void* map = ::mmap(nullptr, new_size, PROT_READ | PROT_WRITE, MAP_SHARED, in_fd_, 0);
    if (map == MAP_FAILED) {
      in_map_ = nullptr;
      in_size_ = 0;
      return io_error(std::string{"Python pool: mmap: "} + std::strerror(errno));
    }
    in_map_ = static_cast<unsigned char*>(map);
    in_size_ = new_size;
    send_region_ = true; // the process maps the region again (its size changed)
    return Status::OK();
  }

  bool send(const std::string& msg) {
    iovec iov{const_cast<char*>(msg.data()), msg.size()};
    msghdr hdr{};
    hdr.msg_iov = &iov;
    hdr.msg_iovlen = 1;
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
    if (send_region_) {
      hdr.msg_control = control;
      hdr.msg_controllen = sizeof control;
      cmsghdr* c = CMSG_FIRSTHDR(&hdr);
      c->cmsg_level = SOL_SOCKET;
      c->cmsg_type = SCM_RIGHTS;
      c->cmsg_len = CMSG_LEN(sizeof(int));
      std::memcpy(CMSG_DATA(c), &in_fd_, sizeof(int));
    }
    ssize_t sent;
    do
      sent = ::sendmsg(sock_, &hdr, MSG_NOSIGNAL);
    while (sent < 0 && errno == EINTR);
    if (sent != static_cast<ssize_t>(msg.size()))
      return false;
    send_region_ = false;
    return true;
  }

  ssize_t receive(std::string& buffer, int& fd) {
    iovec iov{buffer.data(), buffer.size()};
    msghdr hdr{};
    hdr.msg_iov = &iov;
    hdr.msg_iovlen = 1;
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
    hdr.msg_control = control;
    hdr.msg_controllen = sizeof control;
    ssize_t n;
    do
      n = ::recvmsg(sock_, &hdr, MSG_CMSG_CLOEXEC);
    while (n < 0 && errno == EINTR);
    for (cmsghdr* c = CMSG_FIRSTHDR(&hdr); c != nullptr; c = CMSG_NXTHDR(&hdr, c))
      if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS)
        std::memcpy(&fd, CMSG_DATA(c), sizeof(int));
    return n;
  }

  Status map_output(int fd) {
    struct stat st {};
    if (::fstat(fd, &st) != 0) {
      ::close(fd);
      return io_error(std::string{"Python pool: fstat: "} + std::strerror(errno));
    }
    unmap(out_map_, out_size_);
    if (out_fd_ >= 0)
      ::close(out_fd_);
    out_fd_ = fd;
    out_size_ = static_cast<std::size_t>(st.st_size);
    void* map = ::mmap(nullptr, out_size_, PROT_READ, MAP_SHARED, fd, 0);
    if (map == MAP_FAILED) {
      out_map_ = nullptr;
      out_size_ = 0;
      return io_error(std::string{"Python pool: mmap: "} + std::strerror(errno));
    }
    out_map_ = static_cast<unsigned char*>(map);
    return Status::OK();
  }

  Outcome died(const std::string& name, const std::string& worker) {
    int status = 0;
    std::string how = "closed its connection";
    if (::waitpid(pid_, &status, 0) == pid_)
      how = describe_exit(status);
    const int pid = pid_;
    pid_ = -1; // reaped
    return {internal_error("Python pool process " + std::to_string(pid) + " of " + worker + " " +
                           how + " while running Python function `" + name + "`"),
            true};
  }

  Status function_error(const std::string& reply, const std::string& name,
                        const std::string& worker) const {
    const std::size_t a = reply.find('\0', 1);
    const std::size_t b = a == std::string::npos ? a : reply.find('\0', a + 1);
    if (b == std::string::npos)
      return internal_error("Python pool: a malformed error reply");
    const std::string module = reply.substr(1, a - 1);
    const std::string summary = reply.substr(a + 1, b - a - 1);
    const std::string traceback = reply.substr(b + 1);
    if (!module.empty())
      return not_found("Python function `" + name + "`: cannot import module `" + module + "` on " +
                       worker + " (pool process " + std::to_string(pid_) + ": " + summary +
                       "); start the worker with `--python-path DIR` naming the directory "
                       "that holds it, or install it there");
    return invalid_argument("Python function `" + name + "` raised " + summary + "\n" + traceback);
  }

  Expected<Element> decode(const std::string& reply, const Element& in,
                           const std::string& name) const {
    const std::string what = "the result of Python function `" + name + "`";
    Reader r(reply.data() + 1, reply.size() - 1);
    uint32_t count = 0;
    if (!r.get(count))
      return internal_error("Python pool: a malformed reply");
    std::vector<Tensor> parts;
    for (uint32_t c = 0; c < count; ++c) {
      uint8_t name_size = 0;
      std::string dtype_text;
      uint32_t rank = 0;
      if (!r.get(name_size) || !r.get(dtype_text, name_size) || !r.get(rank) || rank > 64)
        return internal_error("Python pool: a malformed reply");
      Shape shape(rank);
      for (auto& d : shape)
        if (!r.get(d))
          return internal_error("Python pool: a malformed reply");
      uint64_t offset = 0, length = 0;
      if (!r.get(offset) || !r.get(length) || offset > out_size_ || length > out_size_ - offset)
        return internal_error("Python pool: a reply outside the output region");
      if (!dtype_text.empty() && dtype_text[0] == '@') { // argument J returned unchanged
        const std::size_t j = std::strtoul(dtype_text.c_str() + 1, nullptr, 10);
        if (j >= in.size())
          return internal_error("Python pool: a reply naming a missing argument");
        parts.push_back(in[j]);
        continue;
      }
      auto dtype = dtype_from_name(dtype_text);
      if (!dtype)
        return invalid_argument(what + " (component " + std::to_string(c) + ") has numpy dtype " +
                                dtype_text + ", which conveyor tensors do not hold");
      Tensor t(*dtype, shape);
      if (*dtype == DType::string) {
        auto& strings = t.mutable_strings();
        if (length != 16 * strings.size())
          return internal_error("Python pool: a malformed string table");
        for (std::size_t i = 0; i < strings.size(); ++i) {
          uint64_t entry[2];
          std::memcpy(entry, out_map_ + offset + 16 * i, sizeof entry);
          if (entry[0] > out_size_ || entry[1] > out_size_ - entry[0])
            return internal_error("Python pool: a string outside the output region");
          strings[i].assign(reinterpret_cast<const char*>(out_map_ + entry[0]), entry[1]);
        }
      } else {
        if (length != t.bytes().size())
          return internal_error("Python pool: a reply whose size does not match its shape");
        if (length > 0)
          std::memcpy(t.mutable_data<unsigned char>(), out_map_ + offset, length);
      }
      parts.push_back(std::move(t));
    }
    return Element{std::move(parts)};
  }

  pid_t pid_ = -1;
  int sock_ = -1;
  int in_fd_ = -1;
  unsigned char* in_map_ = nullptr;
  std::size_t in_size_ = 0;
  bool send_region_ = false;
  int out_fd_ = -1;
  unsigned char* out_map_ = nullptr;
  std::size_t out_size_ = 0;
  std::set<uint64_t> loaded_;
};

ProcessPool::ProcessPool(std::string python, std::vector<std::string> sys_path)
  : python_(std::move(python)), sys_path_(std::move(sys_path)) {}

ProcessPool::~ProcessPool() = default;

uint64_t ProcessPool::function_id(const std::string& key) {
  std::lock_guard<std::mutex> lock{mu_};
  auto [it, added] = function_ids_.emplace(key, function_ids_.size());
  return it->second;
}

Expected<std::unique_ptr<PoolProcess>> ProcessPool::take(int64_t processes) {
  std::unique_lock<std::mutex> lock{mu_};
  for (;;) {
    if (!idle_.empty()) {
      auto process = std::move(idle_.back());
      idle_.pop_back();
      return process;
    }
    if (started_ < processes) {
      ++started_;
      lock.unlock();
      auto process = PoolProcess::start(python_, sys_path_);
      lock.lock();
      if (!process.ok()) {
        --started_;
        return process.status();
      }
      pids_.push_back((*process)->pid());
      return process;
    }
    idle_changed_.wait(lock);
  }
}

void ProcessPool::give_back(std::unique_ptr<PoolProcess> process) {
  std::lock_guard<std::mutex> lock{mu_};
  idle_.push_back(std::move(process));
  idle_changed_.notify_one();
}

void ProcessPool::forget(int pid) {
  std::lock_guard<std::mutex> lock{mu_};
  --started_;
  pids_.erase(std::remove(pids_.begin(), pids_.end(), pid), pids_.end());
  idle_changed_.notify_one();
}

std::vector<int> ProcessPool::pids() const {
  std::lock_guard<std::mutex> lock{mu_};
  return pids_;
}

Expected<Element> ProcessPool::call(const std::string& function, bool is_import, const Element& in,
                                    int64_t processes, const std::string& name,
                                    const std::string& worker) {
  const uint64_t id = function_id((is_import ? "import:" : "pickle:") + function);
  for (int attempt = 0;; ++attempt) {
    auto process = take(processes);
    if (!process.ok())
      return process.status();
    const int pid = (*process)->pid();
    auto outcome = (*process)->run(id, function, is_import, in, name, worker);
    if (!outcome.died) {
      give_back(std::move(*process));
      return std::move(outcome.result);
    }
    process->reset();
    forget(pid);
    // A killed process (OOM killer, an operator's kill) loses no element: the element runs
    // again on a fresh process. Twice in a row means the element itself kills it.
    if (attempt == 1)
      return outcome.result.status().with_context(
        "the element was run again on a fresh pool process, which died too");
    pipeline_warning(outcome.result.status().message() +
                     "; started a new pool process and running the element again");
  }
}

} // namespace conveyor::python
