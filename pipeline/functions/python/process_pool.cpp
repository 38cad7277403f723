// The pool of Python interpreter processes (see the header).
#include "pipeline/functions/python/process_pool.hpp"

#include <dlfcn.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cassert>
#include <cstring>
#include <deque>
#include <map>
#include <optional>
#include <set>
#include <unordered_set>

#include "pipeline/runtime/executor.hpp"
#include "pipeline/runtime/result_blocks.hpp"
#include "pipeline/runtime/warnings.hpp"
#include "pipeline/tensor/shared_arena.hpp"
#include "pipeline/tensor/tensor_internals.hpp"

extern char** environ;

namespace conveyor::python {

namespace {

constexpr std::size_t kMaxReply = 1 << 20; // a reply header or an error with its traceback
constexpr std::size_t kAlign = 16;
// Results this big go into a result block, viewed in place; smaller ones are copied out of the
// output region (a copy costs less than a block's hand-off there).
constexpr std::size_t kBlockBytes = 64 << 10;

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

// A request's header: what it attaches (descriptors, in this order) is the byte at kAttachedAt.
constexpr std::size_t kAttachedAt = 8 + 1 + 1 + 8 + 8 + 4 + 8;
constexpr uint8_t kAttachedRegion = 1; // the slot's input region (new, or grown)
constexpr uint8_t kAttachedBlock = 2;  // the result block (new to the process)
constexpr uint8_t kAttachedChunks = 4; // arena chunks the components lie in (new to the process)
// A component's bytes in the slot's input region, else in the arena chunk of that id.
constexpr int32_t kSlotRegion = -1;
// Arena chunks one request may introduce; components in more are copied instead. (64 MiB
// chunks: a request meets a few at most.)
constexpr std::size_t kMaxNewChunks = 8;

// Reply flags (pool_worker_script.cpp).
constexpr uint8_t kInBlock = 1;     // the result is in the request's block, else the output region
constexpr uint8_t kPlaced = 2;      // numpy made a component there: the pool process copied nothing
constexpr uint8_t kHeld = 4;        // an array of the process lives in the block: not free yet
constexpr uint8_t kNoAllocator = 8; // the process has no conveyor_pool_alloc: it copies results

// How much nicer than the worker its pool processes run. The thread that feeds a map's processes
// and reads their replies (its caller's, map.cpp) must not wait for a core behind them: at the
// same priority, N busy processes leave it 1/(N+1) of a core where cores are scarce, and they
// then wait for it in turn. Lowered, they still get every cycle it leaves (2 cores, 1 MiB `x + 1`
// through a pool of 2: 60-67 -> ~51 us per element, docs/BENCHMARKS.md).
constexpr int kPoolNiceIncrement = 5;

void lower_priority(pid_t pid) {
  errno = 0;
  const int worker = ::getpriority(PRIO_PROCESS, 0);
  if (errno != 0 || ::setpriority(PRIO_PROCESS, static_cast<id_t>(pid),
                                  std::min(worker + kPoolNiceIncrement, 19)) != 0)
    pipeline_warning(
      "Python pool: cannot lower the priority of pool process " + std::to_string(pid) + " (" +
      std::strerror(errno) +
      "); it runs at the worker's, and may leave the map's thread waiting for a core");
}

std::string describe_exit(int status) {
  if (WIFSIGNALED(status))
    return "was killed by signal " + std::to_string(WTERMSIG(status));
  if (WIFEXITED(status))
    return "exited with status " + std::to_string(WEXITSTATUS(status));
  return "ended";
}

} // namespace

// One shared memory region (memfd + mmap).
struct Region {
  int fd = -1;
  unsigned char* map = nullptr;
  std::size_t size = 0;

  ~Region() { reset(); }
  void unmap() {
    if (map != nullptr)
      ::munmap(map, size);
    map = nullptr;
    size = 0;
  }
  void reset() {
    unmap();
    if (fd >= 0)
      ::close(fd);
    fd = -1;
  }
};

// One call's request, from the call that took a process to its reply. It waits in the
// process's queue for a free slot; whichever thread takes it then (the call's own, or the one
// that read the reply freeing the slot) copies its element into the slot's input region outside
// the process's lock, so several copies run at once and none on the map's thread; the requests
// are sent in the order taken.
struct PoolRequest {
  enum class State { waiting, copying, ready, sent, failed };
  // (a numeric component's bytes, copied outside the lock)
  struct Copy {
    unsigned char* to;
    const unsigned char* from;
    std::size_t size;
  };

  PoolRequest(uint64_t fn_id, const std::string* function, bool is_import, Element in,
              std::string worker)
    : fn_id(fn_id), function(function), is_import(is_import), in(std::move(in)),
      worker(std::move(worker)) {}

  const uint64_t fn_id;
  const std::string* const function; // the pool's copy (ProcessPool::function_id)
  const bool is_import;
  const Element in;
  const std::string worker;
  // Guarded by the process's mu_.
  State state = State::waiting;
  int slot = -1;       // from copying on
  uint64_t ticket = 0; // once sent: its place in the process's reply order
  bool died = false;   // failed: the process was gone before it was sent
  Status error;        // failed, not died: why it could not be written
  std::vector<Copy> copies;
  // Its call's thread sleeps here, woken only when what it waits for came: its turn to read its
  // reply (or its send, `until_sent`: a dropped call), its failure, the process's death.
  std::condition_variable wake;
  bool sleeping = false;
  bool until_sent = false;
};

// One pool process: its socket and, per request slot, an input and an output region. Up to
// kPoolDepth requests are in flight on it (the next one waits in its socket while it runs one),
// each in a slot of its own from when it is taken off the queue until its reply was read (and its
// result block went to its tensors); the replies come back in the order sent, each read by the
// call that made its request, in turn. The pool hands a process to up to kPoolCalls calls: the
// one past kPoolDepth waits in the queue, and the thread that reads a reply sends it (the process
// runs the one in its socket meanwhile).
class PoolProcess {
public:
  ~PoolProcess() {
    if (sock_ >= 0)
      ::close(sock_);
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      int status = 0;
      ::waitpid(pid_, &status, 0);
    }
  }

  static Expected<std::shared_ptr<PoolProcess>> start(const std::string& python,
                                                      const std::vector<std::string>& sys_path,
                                                      const std::string& allocator) {
    int fds[2];
    if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, fds) != 0)
      return io_error(std::string{"Python pool: socketpair: "} + std::strerror(errno));
    auto process = std::shared_ptr<PoolProcess>(new PoolProcess);
    process->sock_ = fds[0];
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, fds[1], 3); // dup2 clears close-on-exec
    // Nothing else of the worker's: a descriptor someone opened without close-on-exec (a
    // library's socket) would stay open in the pool process after the worker closed it.
    posix_spawn_file_actions_addclosefrom_np(&actions, 4);
    std::vector<std::string> args = {python, "-c", pool_worker_script(), "3", allocator};
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
    process->pid_shown_ = pid;
    lower_priority(pid);
    return process;
  }

  int pid() const { return pid_shown_; }

  // Requests sent to it and not answered yet.
  int unanswered() {
    std::lock_guard<std::mutex> lock{mu_};
    return static_cast<int>(sent_ - received_);
  }

  // The outcome of one call: `died` when the process went away before its reply came (the
  // result is then an error describing it, and the caller runs the element again elsewhere);
  // `sent` tells whether this call's request had reached it (a call that finds the process dead
  // before sending has not run its element there).
  struct Outcome {
    Expected<Element> result = internal_error("Python pool: no outcome");
    bool died = false;
    bool sent = false;
  };

  // Queues a request behind those taken before it (false: the process is gone, nothing queued).
  bool enqueue(const std::shared_ptr<PoolRequest>& request) {
    std::lock_guard<std::mutex> lock{mu_};
    if (dead_)
      return false;
    waiting_.push_back(request);
    return true;
  }

  // The call's whole request: sends what the queue lets this thread send (its own request among
  // them when a slot is free), waits until its own was sent, then for its reply.
  Outcome deliver(PoolRequest& request, const std::string& name) {
    pump();
    std::unique_lock<std::mutex> lock{mu_};
    sleep(lock, request, [&] {
      return request.state == PoolRequest::State::failed ||
             (request.state == PoolRequest::State::sent && (received_ == request.ticket || dead_));
    });
    if (request.state == PoolRequest::State::failed)
      return failure(request, name);
    lock.unlock();
    return await_reply(request, name);
  }

  // A dropped call's request: one still queued leaves the queue (false); one taken is waited for
  // until sent (true: its reply must be read, see await_reply) or failed (false).
  bool withdraw(PoolRequest& request) {
    std::unique_lock<std::mutex> lock{mu_};
    if (request.state == PoolRequest::State::waiting) {
      waiting_.erase(std::find_if(waiting_.begin(), waiting_.end(),
                                  [&](const auto& r) { return r.get() == &request; }));
      request.state = PoolRequest::State::failed;
      return false;
    }
    request.until_sent = true;
    sleep(lock, request, [&] { return sent_or_failed(request); });
    return request.state == PoolRequest::State::sent;
  }

  // Reads the reply to a sent request, in its turn; then sends what its slot lets through.
  Outcome await_reply(PoolRequest& request, const std::string& name) {
    const int slot = request.slot;
    const uint64_t ticket = request.ticket;
    const Element& in = request.in;
    const std::string& worker = request.worker;
    std::unique_lock<std::mutex> lock{mu_};
    // The replies come in request order: wait for this request's turn to read the socket.
    sleep(lock, request, [&] { return received_ == ticket || dead_; });
    if (dead_)
      return {internal_error(death_ + " while running Python function `" + name + "`"), true, true};
    lock.unlock(); // this thread alone reads the socket and this slot's output until its turn ends
    int received_fd = -1;
    const ssize_t n = receive(received_fd);
    Outcome outcome;
    outcome.sent = true;
    // The result's size in shared memory, as the process reports it (0: an argument returned).
    std::optional<std::size_t> needed;
    if (n <= 0) {
      outcome.died = true;
    } else if (received_fd >= 0 && !map_output(slot, received_fd).ok()) {
      outcome.result = internal_error("Python pool: cannot map the output region of process " +
                                      std::to_string(pid_shown_));
    } else if (reply_[0] == 'E' || reply_[0] == 'F') {
      outcome.result =
        function_error(std::string(reply_.data(), static_cast<std::size_t>(n)), name, worker);
      if (reply_[0] == 'F')
        hold_block(slot); // the failed call made an array there that outlives it
    } else {
      outcome.result = decode(static_cast<std::size_t>(n), slot, in, name, needed);
    }
    free_block(slot); // (a result viewing it holds it through its owner)
    lock.lock();
    if (needed)
      result_hint_ = needed; // the next request's block is made this big, or none
    if (outcome.died) {
      mark_dead_locked(worker); // wakes the calls waiting for their turn: they run again too
      outcome.result = internal_error(death_ + " while running Python function `" + name + "`");
    } else {
      ++received_;
      if (!unread_.empty() && unread_.front().get() == &request) // (else another call saw it die)
        unread_.pop_front();
      slot_busy_[slot] = false;
      if (!unread_.empty())
        wake_locked(*unread_.front()); // its turn
    }
    const bool queued = !waiting_.empty() && !dead_;
    lock.unlock();
    if (queued)
      pump(); // the process runs the request in its socket meanwhile
    return outcome;
  }

private:
  PoolProcess() : reply_(kMaxReply) {}

  // Under mu_ (held by `lock`): sleeps on the request's own condition variable until `done`.
  // What it waits for (an earlier request's reply read, a queued one sent) may be a lazy call
  // of a map (map.cpp) whose thread is the one waiting here: those go to the executor's threads.
  template <class Done>
  static void sleep(std::unique_lock<std::mutex>& lock, PoolRequest& r, Done done) {
    while (!done()) {
      Executor::shared().publish_lazy();
      r.sleeping = true;
      r.wake.wait(lock);
      r.sleeping = false;
    }
  }
  static void wake_locked(PoolRequest& r) {
    if (r.sleeping)
      r.wake.notify_one();
  }

  static bool sent_or_failed(const PoolRequest& r) {
    return r.state == PoolRequest::State::sent || r.state == PoolRequest::State::failed;
  }

  // Under mu_: a failed request's outcome.
  Outcome failure(const PoolRequest& r, const std::string& name) const {
    if (r.died)
      return {internal_error(death_ + " while running Python function `" + name + "`"), true,
              false};
    return {r.error, false, false};
  }

  // Takes queued requests while a slot is free: each is written into its slot here, its numeric
  // bytes copied with the lock released (other threads fill other slots meanwhile), and sent in
  // the order taken by whichever thread finishes the copy that lets it go.
  void pump() {
    std::unique_lock<std::mutex> lock{mu_};
    while (!dead_ && !waiting_.empty()) {
      const int slot = free_slot();
      if (slot < 0)
        return;
      std::shared_ptr<PoolRequest> r = std::move(waiting_.front());
      waiting_.pop_front();
      slot_busy_[slot] = true;
      r->slot = slot;
      r->state = PoolRequest::State::copying;
      taken_.emplace(next_order_++, r);
      if (Status st = write_request(*r); !st.ok()) {
        free_block(slot);
        slot_busy_[slot] = false;
        r->error = st;
        r->state = PoolRequest::State::failed;
      } else {
        if (!r->copies.empty()) {
          lock.unlock();
          // memcpy, not streaming stores: the pool process's function reads it next, and finds
          // it in the shared cache (see streaming_copy.hpp).
          for (const PoolRequest::Copy& c : r->copies)
            std::memcpy(c.to, c.from, c.size);
          lock.lock();
        }
        r->state = PoolRequest::State::ready;
      }
      send_taken_locked();
    }
  }

  // Under mu_: sends the taken requests that are ready, in the order taken.
  void send_taken_locked() {
    for (auto it = taken_.begin(); it != taken_.end() && it->first == next_send_ &&
                                   it->second->state != PoolRequest::State::copying;
         it = taken_.erase(it), ++next_send_) {
      PoolRequest& r = *it->second;
      if (r.state != PoolRequest::State::failed && (dead_ || !send(r.slot))) {
        free_block(r.slot);
        mark_dead_locked(r.worker);
        r.died = true;
        r.state = PoolRequest::State::failed;
      }
      if (r.state == PoolRequest::State::failed) {
        wake_locked(r);
        continue;
      }
      r.ticket = sent_++;
      r.state = PoolRequest::State::sent;
      unread_.push_back(it->second);
      if (r.until_sent || r.ticket == received_)
        wake_locked(r); // (else the reply before it wakes it: its turn)
    }
  }

  // Under mu_: a slot no request holds (-1: none).
  int free_slot() const {
    for (int i = 0; i < kPoolDepth; ++i)
      if (!slot_busy_[i])
        return i;
    return -1;
  }

  // Under mu_: the request in its slot's input region and request_[slot]; the numeric bytes
  // are left in `copies` (copied under the lock with the function on its first call, so no
  // request sent before it can need the function).
  Status write_request(PoolRequest& r) {
    const int slot = r.slot;
    const Element& in = r.in;
    const std::string& function = *r.function;
    const bool load = loaded_.count(r.fn_id) == 0;
    r.copies.clear();
    // Layout of the input region: the function (first call only), then each component. (Room
    // for all of them: one in the shared arena is copied after all when the request cannot
    // carry its chunk, and room left unwritten costs no memory.)
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
    if (Status st = ensure_input(slot, size); !st.ok())
      return st;
    // A result block when the result is likely big: as big as the last result, or at first the
    // arguments (`x + 1`).
    const std::size_t expected = result_hint_.value_or(size);
    ResultBlocks::Lease block;
    if (expected >= kBlockBytes) {
      auto leased = blocks_->acquire(expected);
      if (!leased.ok())
        return leased.status();
      block = *leased;
    }
    slot_block_[slot] = block.index;
    send_block_fd_[slot] = block.send_fd ? block.fd : -1;
    send_chunks_[slot].clear();
    unsigned char* const region = in_[slot].map;
    std::string& msg = request_[slot];
    msg.clear();
    put<uint64_t>(msg, r.fn_id);
    put<uint8_t>(msg, static_cast<uint8_t>(slot));
    put<uint8_t>(msg, load ? (r.is_import ? 2 : 1) : 0);
    put<uint64_t>(msg, 0);
    put<uint64_t>(msg, load ? function.size() : 0);
    put<int32_t>(msg, block.index);
    put<uint64_t>(msg, block.capacity);
    assert(msg.size() == kAttachedAt);
    put<uint8_t>(msg, static_cast<uint8_t>((send_region_[slot] ? kAttachedRegion : 0) |
                                           (block.send_fd ? kAttachedBlock : 0)));
    std::size_t pos = 0;
    if (load) {
      std::memcpy(region, function.data(), function.size());
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
          std::memcpy(region + table + 16 * i, entry, sizeof entry);
          std::memcpy(region + at, s.data(), s.size());
          at += s.size();
        }
        put<int32_t>(msg, kSlotRegion);
        put<uint64_t>(msg, table);
        put<uint64_t>(msg, 16 * static_cast<uint64_t>(t.num_elements()));
        pos = aligned(at);
      } else {
        const ByteView bytes = t.bytes();
        // Storage in the shared arena is read where it lies (the request holds the element
        // until its reply is read); anything else is copied into the slot's region.
        if (std::optional<SharedLocation> at = in_arena(bytes, slot)) {
          put<int32_t>(msg, static_cast<int32_t>(at->chunk));
          put<uint64_t>(msg, at->offset);
          put<uint64_t>(msg, bytes.size());
          continue;
        }
        if (bytes.size() > 0)
          r.copies.push_back({region + pos, bytes.data(), bytes.size()});
        put<int32_t>(msg, kSlotRegion);
        put<uint64_t>(msg, pos);
        put<uint64_t>(msg, bytes.size());
        pos += aligned(bytes.size());
      }
    }
    // The chunks new to the process: their ids, then their count (the process reads from the end).
    if (!send_chunks_[slot].empty()) {
      for (const SharedLocation& c : send_chunks_[slot])
        put<uint32_t>(msg, c.chunk);
      put<uint8_t>(msg, static_cast<uint8_t>(send_chunks_[slot].size()));
      msg[kAttachedAt] = static_cast<char>(msg[kAttachedAt] | kAttachedChunks);
    }
    if (load) {
      for (const PoolRequest::Copy& c : r.copies)
        std::memcpy(c.to, c.from, c.size);
      r.copies.clear();
      loaded_.insert(r.fn_id);
    }
    return Status::OK();
  }

  // Under mu_: where `bytes` lie in the shared arena, when the process can be told (it has the
  // chunk, or the request can carry its descriptor); nullopt: they are copied.
  std::optional<SharedLocation> in_arena(ByteView bytes, int slot) {
    if (bytes.size() < SharedArena::kMinBytes)
      return std::nullopt;
    std::optional<SharedLocation> at = SharedArena::instance().locate(bytes.data(), bytes.size());
    if (at && chunks_sent_.count(at->chunk) == 0) {
      std::vector<SharedLocation>& sending = send_chunks_[slot];
      const bool listed = std::any_of(sending.begin(), sending.end(), [&](const SharedLocation& c) {
        return c.chunk == at->chunk;
      });
      if (!listed && sending.size() == kMaxNewChunks)
        at.reset();
      else if (!listed)
        sending.push_back(*at);
    }
    if (counters_ != nullptr)
      (at ? counters_->args_in_place : counters_->args_copied)
        .fetch_add(1, std::memory_order_relaxed);
    return at;
  }

  Status ensure_input(int slot, std::size_t size) {
    Region& r = in_[slot];
    if (size <= r.size && r.fd >= 0)
      return Status::OK();
    const std::size_t new_size = std::max<std::size_t>({size, 2 * r.size, 1 << 16});
    if (r.fd < 0) {
      r.fd = ::memfd_create("conveyor-pool-in", MFD_CLOEXEC);
      if (r.fd < 0)
        return io_error(std::string{"Python pool: memfd_create: "} + std::strerror(errno));
    }
    if (::ftruncate(r.fd, static_cast<off_t>(new_size)) != 0)
      return io_error(std::string{"Python pool: ftruncate: "} + std::strerror(errno));
    r.unmap();
    void* map = ::mmap(nullptr, new_size, PROT_READ | PROT_WRITE, MAP_SHARED, r.fd, 0);
    if (map == MAP_FAILED)
      return io_error(std::string{"Python pool: mmap: "} + std::strerror(errno));
    r.map = static_cast<unsigned char*>(map);
    r.size = new_size;
    send_region_[slot] = true; // the process maps the region again (its size changed)
    return Status::OK();
  }

  // Under mu_: request_[slot], with the slot's input region when it was (re)made.
  bool send(int slot) {
    const std::string& request = request_[slot];
    iovec iov{const_cast<char*>(request.data()), request.size()};
    msghdr hdr{};
    hdr.msg_iov = &iov;
    hdr.msg_iovlen = 1;
    // The descriptors the request's flags name, in order: the input region, the result block,
    // the arena's chunks the process maps first.
    int fds[2 + kMaxNewChunks];
    int count = 0;
    if (send_region_[slot])
      fds[count++] = in_[slot].fd;
    if (send_block_fd_[slot] >= 0)
      fds[count++] = send_block_fd_[slot];
    for (const SharedLocation& c : send_chunks_[slot])
      fds[count++] = c.fd;
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof fds)] = {};
    if (count > 0) {
      hdr.msg_control = control;
      hdr.msg_controllen = CMSG_SPACE(count * sizeof(int));
      cmsghdr* c = CMSG_FIRSTHDR(&hdr);
      c->cmsg_level = SOL_SOCKET;
      c->cmsg_type = SCM_RIGHTS;
      c->cmsg_len = CMSG_LEN(count * sizeof(int));
      std::memcpy(CMSG_DATA(c), fds, count * sizeof(int));
    }
    ssize_t sent;
    do
      sent = ::sendmsg(sock_, &hdr, MSG_NOSIGNAL);
    while (sent < 0 && errno == EINTR);
    if (sent != static_cast<ssize_t>(request.size()))
      return false;
    send_region_[slot] = false;
    if (send_block_fd_[slot] >= 0)
      blocks_->sent(slot_block_[slot]);
    for (const SharedLocation& c : send_chunks_[slot])
      chunks_sent_.insert(c.chunk);
    send_chunks_[slot].clear();
    return true;
  }

  // Into reply_ (kept between calls: a fresh megabyte per call cost more than the call).
  ssize_t receive(int& fd) {
    iovec iov{reply_.data(), reply_.size()};
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

  Status map_output(int slot, int fd) {
    Region& r = out_[slot];
    r.reset();
    r.fd = fd;
    struct stat st {};
    if (::fstat(fd, &st) != 0)
      return io_error(std::string{"Python pool: fstat: "} + std::strerror(errno));
    void* map = ::mmap(nullptr, static_cast<std::size_t>(st.st_size), PROT_READ, MAP_SHARED, fd, 0);
    if (map == MAP_FAILED)
      return io_error(std::string{"Python pool: mmap: "} + std::strerror(errno));
    r.map = static_cast<unsigned char*>(map);
    r.size = static_cast<std::size_t>(st.st_size);
    return Status::OK();
  }

  // Under mu_: the process is gone (reaped once, by whichever call noticed first). The queued
  // requests fail unsent (their calls run them elsewhere), and every waiting call wakes.
  void mark_dead_locked(const std::string& worker) {
    if (dead_)
      return;
    for (const auto& r : waiting_) {
      r->died = true;
      r->state = PoolRequest::State::failed;
      wake_locked(*r);
    }
    waiting_.clear();
    for (const auto& r : unread_)
      wake_locked(*r);
    unread_.clear();
    int status = 0;
    std::string how = "closed its connection";
    if (pid_ > 0 && ::waitpid(pid_, &status, 0) == pid_)
      how = describe_exit(status);
    pid_ = -1; // reaped
    dead_ = true;
    death_ = "Python pool process " + std::to_string(pid_shown_) + " of " + worker + " " + how;
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
                       worker + " (pool process " + std::to_string(pid_shown_) + ": " + summary +
                       "); start the worker with `--python-path DIR` naming the directory "
                       "that holds it, or install it there");
    return invalid_argument("Python function `" + name + "` raised " + summary + "\n" + traceback);
  }

  // The reply's element: numeric components view the slot's result block when the process wrote
  // them there (the block's owner keeps it from reuse), else are copied out of its output region.
  // `needed`: the result's size in shared memory (the next block's size).
  Expected<Element> decode(std::size_t size, int slot, const Element& in, const std::string& name,
                           std::optional<std::size_t>& needed) {
    const std::string what = "the result of Python function `" + name + "`";
    Reader r(reply_.data() + 1, size - 1);
    uint8_t flags = 0;
    uint64_t total = 0;
    uint16_t released = 0;
    if (!r.get(flags) || !r.get(total) || !r.get(released) ||
        ((flags & (kInBlock | kHeld)) != 0 && slot_block_[slot] < 0) ||
        (flags & (kInBlock | kHeld)) == (kInBlock | kHeld))
      return internal_error("Python pool: a malformed reply");
    for (uint16_t i = 0; i < released; ++i) { // blocks the process held: free once nothing views
      int32_t index = -1;
      if (!r.get(index) || held_.erase(index) == 0)
        return internal_error("Python pool: a reply releasing a block the process did not hold");
      blocks_->release(index);
    }
    if (flags & kHeld)
      hold_block(slot);
    if ((flags & kNoAllocator) && counters_ != nullptr &&
        !counters_->allocator_warned.exchange(true))
      pipeline_warning("Python pool process " + std::to_string(pid_shown_) +
                       " could not load conveyor_pool_alloc (its stderr says why): it copies each "
                       "result of 64 KiB or more into the worker's shared memory");
    if ((flags & kPlaced) && counters_ != nullptr)
      counters_->placed.fetch_add(1, std::memory_order_relaxed);
    uint32_t count = 0;
    if (!r.get(count))
      return internal_error("Python pool: a malformed reply");
    needed = total;
    const int block = (flags & kInBlock) ? slot_block_[slot] : -1;
    const std::size_t out_size = block >= 0 ? blocks_->capacity(block) : out_[slot].size;
    const unsigned char* const out_map = block >= 0 ? blocks_->data(block) : out_[slot].map;
    StorageOwner owner; // the block's, made for its first numeric component
    if (block < 0 && total >= kBlockBytes && counters_ != nullptr)
      counters_->copied.fetch_add(1, std::memory_order_relaxed); // no block free, big enough, or
                                                                 // the process kept its block
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
      if (!r.get(offset) || !r.get(length) || offset > out_size || length > out_size - offset)
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
      if (block >= 0 && *dtype != DType::string && length > 0) {
        uint64_t elements = 1;
        for (int64_t d : shape)
          elements *= d < 0 ? ~uint64_t{0} : static_cast<uint64_t>(d);
        if (length != elements * dtype_size(*dtype) || offset % dtype_size(*dtype) != 0)
          return internal_error("Python pool: a reply whose size does not match its shape");
        if (owner == nullptr) {
          owner = blocks_->owner(block);
          slot_block_[slot] = -1; // the owner frees it
        }
        parts.push_back(Tensor::numeric_view(*dtype, std::move(shape), owner, out_map + offset,
                                             static_cast<std::size_t>(length)));
        continue;
      }
      // Numeric bytes are all copied over from the region: no zero-fill first.
      Tensor t = *dtype == DType::string || length == 0
                   ? Tensor(*dtype, shape)
                   : TensorInternals::uninitialized(*dtype, shape);
      if (*dtype == DType::string) {
        auto& strings = t.mutable_strings();
        if (length != 16 * strings.size())
          return internal_error("Python pool: a malformed string table");
        for (std::size_t i = 0; i < strings.size(); ++i) {
          uint64_t entry[2];
          std::memcpy(entry, out_map + offset + 16 * i, sizeof entry);
          if (entry[0] > out_size || entry[1] > out_size - entry[0])
            return internal_error("Python pool: a string outside the output region");
          strings[i].assign(reinterpret_cast<const char*>(out_map + entry[0]), entry[1]);
        }
      } else {
        if (length != t.bytes().size())
          return internal_error("Python pool: a reply whose size does not match its shape");
        if (length > 0)
          std::memcpy(t.mutable_data<unsigned char>(), out_map + offset, length);
      }
      parts.push_back(std::move(t));
    }
    return Element{std::move(parts)};
  }

  // By the call whose turn it is: the process keeps slot `slot`'s block (an array the function
  // kept lives there), busy until a later reply releases it.
  void hold_block(int slot) {
    if (slot_block_[slot] >= 0)
      held_.insert(slot_block_[slot]);
    slot_block_[slot] = -1;
  }

  // Under mu_ or by the call whose turn it is: slot `slot`'s block is free again.
  void free_block(int slot) {
    if (slot_block_[slot] >= 0)
      blocks_->release(slot_block_[slot]);
    slot_block_[slot] = -1;
  }

  pid_t pid_ = -1;     // -1 once reaped
  int pid_shown_ = -1; // for messages and pids()
  int sock_ = -1;
  std::vector<char> reply_; // the reply being read (by the call whose turn it is)
  Region out_[kPoolDepth];  // the process's output regions (read by the call whose turn it is)
  std::mutex mu_;           // guards what follows
  std::deque<std::shared_ptr<PoolRequest>> unread_;  // sent, replies not read, in the order sent
  std::deque<std::shared_ptr<PoolRequest>> waiting_; // queued, not taken yet
  // Taken and not sent yet, by the order taken (sent in it: next_send_ first).
  std::map<uint64_t, std::shared_ptr<PoolRequest>> taken_;
  uint64_t next_order_ = 0;
  uint64_t next_send_ = 0;
  bool slot_busy_[kPoolDepth] = {}; // a request holds it (taken, until its reply was read)
  // Per slot, by the request holding it: its message, input region, and result block.
  std::string request_[kPoolDepth];
  Region in_[kPoolDepth];
  bool send_region_[kPoolDepth] = {};
  // Result blocks: shared with the tensors viewing them, so they outlive this process if need be.
  std::shared_ptr<ResultBlocks> blocks_ = std::make_shared<ResultBlocks>();
  static_assert(kPoolDepth == 2, "the slot arrays below start as {-1, -1}");
  int slot_block_[kPoolDepth] = {-1, -1};    // the block of the request in each slot (-1: none)
  int send_block_fd_[kPoolDepth] = {-1, -1}; // its descriptor, when the process lacks it yet
  // The arena's chunks the request in each slot sends the process (it has not mapped them yet),
  // and those it has.
  std::vector<SharedLocation> send_chunks_[kPoolDepth];
  std::unordered_set<uint32_t> chunks_sent_;
  std::optional<std::size_t> result_hint_; // the last result's size in shared memory
  std::set<int> held_; // blocks the process keeps (by the call whose turn it is)
  std::set<uint64_t> loaded_;
  uint64_t sent_ = 0;     // requests sent
  uint64_t received_ = 0; // replies read: the request whose reply comes next
  bool dead_ = false;
  std::string death_; // "Python pool process PID of WORKER was killed by signal 9"

public:
  PoolCounters* counters_ = nullptr; // the pool's
  int in_flight = 0; // calls that took it and have not returned it; guarded by ProcessPool::mu_
};

ProcessPool::ProcessPool(std::string python, std::vector<std::string> sys_path,
                         std::string allocator)
  : python_(std::move(python)), sys_path_(std::move(sys_path)), allocator_(std::move(allocator)) {
  counters_.allocator_warned = allocator_.empty(); // warned here, once for all its processes
  if (allocator_.empty())
    pipeline_warning("Python pool: no conveyor_pool_alloc.so next to this program or library, "
                     "nor installed with it (a build without numpy's headers?): pool processes "
                     "copy each result of 64 KiB or more into the worker's shared memory");
}

std::string pool_allocator_module() {
  // Beside the code running the pool: the `_conveyor` extension (the Python client), else the
  // program (`conveyor worker` and the tests in the build tree), else where `cmake --install`
  // puts it for the installed program (LIBDIR/conveyor/, given relative to BINDIR).
  std::vector<std::string> dirs;
  Dl_info info{};
  if (::dladdr(reinterpret_cast<void*>(&pool_worker_script), &info) != 0 &&
      info.dli_fname != nullptr) {
    const std::string file = info.dli_fname;
    if (file.find('/') != std::string::npos)
      dirs.push_back(file.substr(0, file.rfind('/')));
  }
  char exe[4096];
  const ssize_t n = ::readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n > 0) {
    const std::string file(exe, static_cast<std::size_t>(n));
    dirs.push_back(file.substr(0, file.rfind('/')));
#ifdef CONVEYOR_POOL_ALLOC_FROM_BIN
    dirs.push_back(dirs.back() + "/" CONVEYOR_POOL_ALLOC_FROM_BIN);
#endif
  }
  for (const std::string& dir : dirs) {
    const std::string path = dir + "/conveyor_pool_alloc.so";
    if (::access(path.c_str(), R_OK) == 0)
      return path;
  }
  return "";
}

ProcessPool::~ProcessPool() = default;

std::pair<uint64_t, const std::string*> ProcessPool::function_id(const std::string& function,
                                                                 bool is_import) {
  std::lock_guard<std::mutex> lock{mu_};
  auto& ids = function_ids_[is_import ? 1 : 0];
  auto it = ids.find(function);
  if (it == ids.end())
    it = ids.emplace(function, next_function_id_++).first;
  return {it->second, &it->first}; // (an unordered_map's entries stay where they are)
}

std::shared_ptr<PoolProcess> ProcessPool::least_busy(int64_t processes) const {
  std::shared_ptr<PoolProcess> chosen;
  // The first `processes` only: a map of N calls runs on at most N processes, whatever a map of
  // more grew the pool to.
  const std::size_t usable =
    std::min<std::size_t>(live_.size(), static_cast<std::size_t>(processes));
  for (std::size_t i = 0; i < usable; ++i)
    if (chosen == nullptr || live_[i]->in_flight < chosen->in_flight)
      chosen = live_[i];
  return chosen;
}

Expected<std::shared_ptr<PoolProcess>> ProcessPool::take(int64_t processes) {
  std::unique_lock<std::mutex> lock{mu_};
  for (;;) {
    std::shared_ptr<PoolProcess> chosen = least_busy(processes);
    // An idle process first, then a new one, then a request queued behind a running one.
    if (chosen == nullptr || chosen->in_flight > 0) {
      if (started_ < processes) {
        ++started_;
        lock.unlock();
        auto process = PoolProcess::start(python_, sys_path_, allocator_);
        lock.lock();
        if (!process.ok()) {
          --started_;
          idle_changed_.notify_one();
          return process.status();
        }
        (*process)->in_flight = 1;
        (*process)->counters_ = &counters_;
        live_.push_back(*process);
        idle_changed_.notify_one(); // a call waiting for a process may queue behind this one
        return process;
      }
    }
    if (chosen != nullptr && chosen->in_flight < kPoolDepth) {
      ++chosen->in_flight;
      return chosen;
    }
    Executor::shared().publish_lazy(); // (lazy calls of this thread's maps may hold the room)
    idle_changed_.wait(lock);
  }
}

std::shared_ptr<PoolProcess> ProcessPool::try_take(int64_t processes) {
  std::lock_guard<std::mutex> lock{mu_};
  std::shared_ptr<PoolProcess> chosen = least_busy(processes);
  // A process still to start is take()'s to start (on a thread that may wait for it).
  if (chosen == nullptr || chosen->in_flight >= kPoolCalls ||
      (chosen->in_flight > 0 && started_ < processes))
    return nullptr;
  ++chosen->in_flight;
  return chosen;
}

void ProcessPool::give_back(const std::shared_ptr<PoolProcess>& process) {
  std::lock_guard<std::mutex> lock{mu_};
  --process->in_flight;
  idle_changed_.notify_one();
}

void ProcessPool::forget(const std::shared_ptr<PoolProcess>& process) {
  std::lock_guard<std::mutex> lock{mu_};
  --process->in_flight;
  auto it = std::find(live_.begin(), live_.end(), process);
  if (it != live_.end()) { // the first of its calls to notice
    live_.erase(it);
    --started_;
  }
  idle_changed_.notify_one();
}

std::vector<int> ProcessPool::pids() const {
  std::lock_guard<std::mutex> lock{mu_};
  std::vector<int> out;
  for (const auto& p : live_)
    out.push_back(p->pid());
  return out;
}

uint64_t ProcessPool::results_copied() const {
  return counters_.copied.load(std::memory_order_relaxed);
}

uint64_t ProcessPool::results_placed() const {
  return counters_.placed.load(std::memory_order_relaxed);
}

uint64_t ProcessPool::arguments_in_place() const {
  return counters_.args_in_place.load(std::memory_order_relaxed);
}

uint64_t ProcessPool::arguments_copied() const {
  return counters_.args_copied.load(std::memory_order_relaxed);
}

std::vector<int> ProcessPool::requests_in_flight() const {
  std::lock_guard<std::mutex> lock{mu_};
  std::vector<int> out;
  for (const auto& p : live_)
    out.push_back(p->unanswered());
  return out;
}

Expected<Element> ProcessPool::call(const std::string& function, bool is_import, const Element& in,
                                    int64_t processes, const std::string& name,
                                    const std::string& worker) {
  return call_after(0, function, is_import, in, processes, name, worker);
}

Expected<Element> ProcessPool::call_after(int deaths, const std::string& function, bool is_import,
                                          const Element& in, int64_t processes,
                                          const std::string& name, const std::string& worker) {
  const auto [id, kept] = function_id(function, is_import);
  for (;;) {
    auto process = take(processes);
    if (!process.ok())
      return process.status();
    auto request = std::make_shared<PoolRequest>(id, kept, is_import, in, worker);
    if (!(*process)->enqueue(request)) { // it died before this element reached it
      forget(*process);
      continue;
    }
    auto outcome = (*process)->deliver(*request, name);
    if (!outcome.died) {
      give_back(*process);
      return std::move(outcome.result);
    }
    forget(*process);
    if (!outcome.sent)
      continue; // it died before this element reached it: not this element's doing
    if (auto failed = after_death(deaths, outcome.result.status()); !failed.ok())
      return failed;
  }
}

// A killed process (OOM killer, an operator's kill) loses no element: the element runs again on
// a fresh process; so does the one queued behind it. Twice in a row means the element itself kills
// it.
Status ProcessPool::after_death(int& deaths, const Status& death) {
  if (++deaths == 2)
    return death.with_context("the element was run again on a fresh pool process, which died too");
  pipeline_warning(death.message() + "; started a new pool process and running the element again");
  return Status::OK();
}

// A request queued by start(); finish() sends it (unless the thread reading an earlier reply did)
// and reads its reply. Not finished (its map dropped it): a request still queued is withdrawn, and
// the reply of one sent is read and dropped here, so the calls queued behind it get theirs. (This
// waits for the earlier requests' replies, and running calls queued after it wait for this one:
// WorkQueue::cancel_and_wait destroys its dropped items front to back, in the order they were
// started, before it waits for its running ones.)
class PoolCall {
public:
  PoolCall(ProcessPool& pool, std::shared_ptr<PoolProcess> process,
           std::shared_ptr<PoolRequest> request, int64_t processes, std::string name)
    : pool_(pool), process_(std::move(process)), request_(std::move(request)),
      processes_(processes), name_(std::move(name)) {}
  ~PoolCall() {
    if (process_ == nullptr)
      return;
    if (!process_->withdraw(*request_)) {
      if (request_->died)
        pool_.forget(process_);
      else
        pool_.give_back(process_);
      return;
    }
    auto outcome = process_->await_reply(*request_, name_);
    if (outcome.died)
      pool_.forget(process_);
    else
      pool_.give_back(process_);
  }

  Expected<Element> finish() {
    auto outcome = process_->deliver(*request_, name_);
    auto process = std::move(process_);
    if (!outcome.died) {
      pool_.give_back(process);
      return std::move(outcome.result);
    }
    pool_.forget(process);
    int deaths = 0;
    if (outcome.sent) // (one that died before this element reached it is not this element's doing)
      if (auto failed = ProcessPool::after_death(deaths, outcome.result.status()); !failed.ok())
        return failed;
    // Run again as a first call runs when start() cannot queue it (a blocking call).
    return pool_.call_after(deaths, *request_->function, request_->is_import, request_->in,
                            processes_, name_, request_->worker);
  }

private:
  ProcessPool& pool_;
  std::shared_ptr<PoolProcess> process_; // null once finished
  std::shared_ptr<PoolRequest> request_;
  int64_t processes_;
  std::string name_;
};

std::function<Expected<Element>()> ProcessPool::start(const std::string& function, bool is_import,
                                                      const Element& in, int64_t processes,
                                                      const std::string& name,
                                                      const std::string& worker) {
  auto process = try_take(processes);
  if (process == nullptr)
    return nullptr;
  const auto [id, kept] = function_id(function, is_import);
  auto request = std::make_shared<PoolRequest>(id, kept, is_import, in, worker);
  if (!process->enqueue(request)) { // the blocking call starts a process, runs it again
    forget(process);
    return nullptr;
  }
  auto call =
    std::make_shared<PoolCall>(*this, std::move(process), std::move(request), processes, name);
  return [call] { return call->finish(); };
}

} // namespace conveyor::python
