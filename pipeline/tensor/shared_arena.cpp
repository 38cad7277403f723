// Big tensor storage in shared memory (see the header for what and why).
//
// Bookkeeping, all under one mutex:
//  - chunks: memfd + its map (kGranule-aligned), never unmapped while the process lives
//    (other processes hold maps of them);
//  - per chunk, the free runs (offset -> length, coalesced) for first fit;
//  - "kept" ranges: freed ranges still backed by memory, per chunk (offset -> length, age) and
//    over all chunks by age, to reuse the most recently freed first and give back the oldest;
//  - live allocations by address, for locate() and free.
#include "pipeline/tensor/shared_arena.hpp"

#include <fcntl.h>
#include <linux/falloc.h>
#include <pthread.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "pipeline/runtime/warnings.hpp"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#define CONVEYOR_ARENA_POISON(p, n) ASAN_POISON_MEMORY_REGION(p, n)
#define CONVEYOR_ARENA_UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION(p, n)
#else
#define CONVEYOR_ARENA_POISON(p, n) ((void)(p), (void)(n))
#define CONVEYOR_ARENA_UNPOISON(p, n) ((void)(p), (void)(n))
#endif

namespace conveyor {

namespace {

constexpr std::size_t round_up(std::size_t n, std::size_t to) { return (n + to - 1) / to * to; }

// How many of the most recently freed ranges allocate() looks at before first fit: enough for
// tensors of a few sizes in turn, few enough to stay cheap when many small ranges are kept.
constexpr int kRecentTries = 16;

// CONVEYOR_SHARED_ARENA: unset or "1" on, "0" off; anything else is said, not guessed at.
bool enabled_by_environment() {
  const char* v = std::getenv("CONVEYOR_SHARED_ARENA");
  if (v == nullptr || std::strcmp(v, "1") == 0)
    return true;
  if (std::strcmp(v, "0") == 0)
    return false;
  pipeline_warning(std::string{"CONVEYOR_SHARED_ARENA="} + v +
                   ": expected 0 (tensors on the heap) or 1 (in shared memory); it stays on");
  return true;
}

} // namespace

struct SharedArena::State {
  struct Kept {
    std::size_t length;
    uint64_t age; // when freed (a counter)
  };
  struct Chunk {
    uint32_t id = 0;
    int fd = -1;
    unsigned char* base = nullptr;
    std::size_t size = 0;
    std::size_t free_bytes = 0;
    std::map<std::size_t, std::size_t> free; // offset -> length, coalesced
    std::map<std::size_t, Kept> kept;        // offset -> still backed free range
  };
  struct Live {
    Chunk* chunk;
    std::size_t offset;
    std::size_t length;    // whole granules
    std::size_t requested; // what allocate() was asked for
  };
  struct Place {
    Chunk* chunk = nullptr;
    std::size_t offset = 0;
  };

  mutable std::mutex mu;
  std::atomic<bool> on{enabled_by_environment()};
  std::vector<std::unique_ptr<Chunk>> chunks;
  std::vector<ForkHooks> hooks;   // other shared memory a fork's child copies (add_fork_hooks)
  std::map<uintptr_t, Live> live; // by first byte
  std::map<std::pair<uint64_t, std::size_t>, Chunk*> kept_by_age; // (age, offset) -> chunk
  uint64_t clock = 0;
  uint32_t next_chunk_id = 1;
  // A fork's child starts a new generation: storage of an older one is an orphan (private
  // memory, not the arena's) and its deleter just unmaps it.
  uint64_t generation = 0;
  Stats stats;
  bool warned = false;
  int fork_pipe[2] = {-1, -1}; // the child says on [1] that it has copied what was live
  int fork_pipe_errno = 0;     // pipe2's at the last fork (warned after it, outside the lock)

  // The process's arena, for the fork handlers. A function's static, not a class member: a plugin
  // linking its own copy of this file must not define the same global (ASan's ODR check).
  static State*& the() {
    static State* state = nullptr;
    return state;
  }

  // --- free runs ---

  static void add_free(Chunk& c, std::size_t offset, std::size_t length) {
    c.free_bytes += length;
    auto next = c.free.lower_bound(offset);
    if (next != c.free.end() && offset + length == next->first) {
      length += next->second;
      next = c.free.erase(next);
    }
    if (next != c.free.begin()) {
      auto prev = std::prev(next);
      if (prev->first + prev->second == offset) {
        prev->second += length;
        return;
      }
    }
    c.free.emplace_hint(next, offset, length);
  }

  // [offset, offset + length) lies inside one free run (the caller found it there).
  static void take_free(Chunk& c, std::size_t offset, std::size_t length) {
    auto run = std::prev(c.free.upper_bound(offset));
    const std::size_t run_start = run->first, run_end = run->first + run->second;
    c.free.erase(run);
    if (run_start < offset)
      c.free.emplace(run_start, offset - run_start);
    if (offset + length < run_end)
      c.free.emplace(offset + length, run_end - offset - length);
    c.free_bytes -= length;
  }

  // --- kept (freed, still backed) ranges ---

  void keep(Chunk& c, std::size_t offset, std::size_t length) {
    const uint64_t age = ++clock;
    c.kept.emplace(offset, Kept{length, age});
    kept_by_age.emplace(std::make_pair(age, offset), &c);
    stats.kept_free += length;
  }

  // Forgets the kept parts of [offset, offset + length), which is being allocated; parts of a
  // kept range outside it stay kept, with the range's age.
  void unkeep(Chunk& c, std::size_t offset, std::size_t length) {
    const std::size_t end = offset + length;
    auto it = c.kept.upper_bound(offset);
    if (it != c.kept.begin() && std::prev(it)->first + std::prev(it)->second.length > offset)
      --it;
    while (it != c.kept.end() && it->first < end) {
      const std::size_t k_start = it->first, k_end = it->first + it->second.length;
      const uint64_t age = it->second.age;
      kept_by_age.erase(std::make_pair(age, k_start));
      it = c.kept.erase(it);
      stats.kept_free -= k_end - k_start;
      if (k_start < offset)
        restore_kept(c, k_start, offset - k_start, age);
      if (end < k_end)
        restore_kept(c, end, k_end - end, age);
    }
  }

  void restore_kept(Chunk& c, std::size_t offset, std::size_t length, uint64_t age) {
    c.kept.emplace(offset, Kept{length, age});
    kept_by_age.emplace(std::make_pair(age, offset), &c);
    stats.kept_free += length;
  }

  // Gives back the memory of the range freed longest ago: the recently freed ones are the
  // likeliest to be reused next and to be in a cache still (the reason to keep any), while
  // punching the one just freed would make a steady alloc/free of one size fault every time.
  // Returns a warning to give (outside the lock) or an empty string.
  std::string punch_oldest() {
    auto oldest = kept_by_age.begin();
    Chunk& c = *oldest->second;
    const std::size_t offset = oldest->first.second;
    const std::size_t length = c.kept.at(offset).length;
    kept_by_age.erase(oldest);
    c.kept.erase(offset);
    stats.kept_free -= length;
    if (::fallocate(c.fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, static_cast<off_t>(offset),
                    static_cast<off_t>(length)) != 0)
      // The range stays free (and backed: no longer counted in kept_free).
      return first_warning(std::string{"shared tensor arena: fallocate(PUNCH_HOLE): "} +
                           std::strerror(errno));
    ++stats.punched;
    return {};
  }

  std::string first_warning(std::string message) {
    if (warned)
      return {};
    warned = true;
    return message;
  }

  // --- allocation ---

  Place find_place(std::size_t length) const {
    int tries = 0;
    for (auto it = kept_by_age.rbegin(); it != kept_by_age.rend() && tries < kRecentTries;
         ++it, ++tries) {
      Chunk& c = *it->second;
      if (c.kept.at(it->first.second).length >= length)
        return Place{&c, it->first.second};
    }
    for (const auto& c : chunks) {
      if (c->free_bytes < length)
        continue;
      for (const auto& [offset, run] : c->free)
        if (run >= length)
          return Place{c.get(), offset};
    }
    return Place{};
  }

  // A chunk of `size` bytes mapped at a kGranule-aligned address (so that allocations are, as
  // the header promises): a reservation kGranule longer is mapped over and its ends trimmed.
  // Null and a warning (the failing call and why) on failure.
  Chunk* add_chunk(std::size_t size, std::string& warning) {
    auto fail = [&](const char* call, int fd) -> Chunk* {
      const int err = errno;
      if (fd >= 0)
        ::close(fd);
      warning = first_warning(std::string{"shared tensor arena: "} + call + ": " +
                              std::strerror(err) + " (tensors use the heap instead)");
      return nullptr;
    };
    const int fd = ::memfd_create("conveyor-tensors", MFD_CLOEXEC);
    if (fd < 0)
      return fail("memfd_create", -1);
    if (::ftruncate(fd, static_cast<off_t>(size)) != 0)
      return fail("ftruncate", fd);
    void* reserved = ::mmap(nullptr, size + kGranule, PROT_NONE,
                            MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (reserved == MAP_FAILED)
      return fail("mmap", fd);
    auto* start =
      reinterpret_cast<unsigned char*>(round_up(reinterpret_cast<uintptr_t>(reserved), kGranule));
    if (::mmap(start, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd, 0) == MAP_FAILED) {
      ::munmap(reserved, size + kGranule);
      return fail("mmap", fd);
    }
    auto* r = static_cast<unsigned char*>(reserved);
    if (start > r)
      ::munmap(r, static_cast<std::size_t>(start - r));
    if (start + size < r + size + kGranule)
      ::munmap(start + size, static_cast<std::size_t>(r + size + kGranule - (start + size)));
    CONVEYOR_ARENA_POISON(start, size);

    auto c = std::make_unique<Chunk>();
    c->id = next_chunk_id++;
    c->fd = fd;
    c->base = start;
    c->size = size;
    add_free(*c, 0, size);
    chunks.push_back(std::move(c));
    return chunks.back().get();
  }

  unsigned char* allocate_locked(std::size_t requested, std::string& warning) {
    const std::size_t length = round_up(requested, kGranule);
    Place place = find_place(length);
    if (place.chunk == nullptr) {
      // Bigger than a chunk: a chunk of its own, of its size.
      place.chunk = add_chunk(length > kChunkBytes ? length : kChunkBytes, warning);
      if (place.chunk == nullptr)
        return nullptr;
    }
    Chunk& c = *place.chunk;
    take_free(c, place.offset, length);
    unkeep(c, place.offset, length);
    unsigned char* start = c.base + place.offset;
    live.emplace(reinterpret_cast<uintptr_t>(start), Live{&c, place.offset, length, requested});
    stats.live_bytes += length;
    ++stats.allocations;
    // The tail after `requested` stays poisoned: an overflow into it is reported.
    CONVEYOR_ARENA_UNPOISON(start, requested);
    return start;
  }

  // The deleter of an allocation of generation `gen`.
  void release(uint64_t gen, unsigned char* start, std::size_t length) {
    std::string warning;
    {
      std::lock_guard<std::mutex> lock{mu};
      if (gen != generation) {
        // An orphan of a fork: private memory of this process at the same address.
        CONVEYOR_ARENA_UNPOISON(start, length);
        ::munmap(start, length);
        return;
      }
      auto it = live.find(reinterpret_cast<uintptr_t>(start));
      const Live l = it->second;
      live.erase(it);
      stats.live_bytes -= l.length;
      CONVEYOR_ARENA_POISON(start, l.length);
      add_free(*l.chunk, l.offset, l.length);
      keep(*l.chunk, l.offset, l.length);
      while (stats.kept_free > kKeepFreeBytes) {
        std::string w = punch_oldest();
        if (!w.empty())
          warning = std::move(w);
      }
    }
    if (!warning.empty())
      pipeline_warning(warning);
  }

  // --- fork ---

  static void before_fork() {
    State& s = *the();
    s.mu.lock();
    bool live = !s.live.empty();
    for (const ForkHooks& h : s.hooks)
      live = h.prepare() || live;
    // Nothing live: nothing for the child to copy, nothing to wait for.
    if (!live)
      return;
    if (::pipe2(s.fork_pipe, O_CLOEXEC) != 0) {
      s.fork_pipe[0] = s.fork_pipe[1] = -1;
      s.fork_pipe_errno = errno;
    }
  }

  static void after_fork_in_parent() {
    State& s = *the();
    if (s.fork_pipe[1] >= 0) {
      ::close(s.fork_pipe[1]);
      // A byte: the child has copied. EOF: it died first, or fork() failed (no child).
      char byte;
      ssize_t n;
      do
        n = ::read(s.fork_pipe[0], &byte, 1);
      while (n < 0 && errno == EINTR);
      ::close(s.fork_pipe[0]);
      s.fork_pipe[0] = s.fork_pipe[1] = -1;
    }
    std::string warning;
    if (s.fork_pipe_errno != 0) {
      warning = s.first_warning(std::string{"shared tensor arena: pipe2 at fork: "} +
                                std::strerror(s.fork_pipe_errno) +
                                " (the parent could not wait for the child's copy of its tensors)");
    }
    s.fork_pipe_errno = 0;
    for (const ForkHooks& h : s.hooks)
      h.parent();
    s.mu.unlock();
    if (!warning.empty())
      pipeline_warning(warning);
  }

  // The only thread of the new process (it holds the lock since before_fork). Iterates the
  // containers as they are, so that the copy loop does not allocate.
  static void after_fork_in_child() {
    State& s = *the();
    for (const auto& [address, l] : s.live)
      s.stats.fork_copied_bytes += copy_to_private(reinterpret_cast<unsigned char*>(address), l);
    for (const auto& c : s.chunks) {
      for (const auto& [offset, length] : c->free) {
        CONVEYOR_ARENA_UNPOISON(c->base + offset, length);
        ::munmap(c->base + offset, length);
      }
      ::close(c->fd);
    }
    s.chunks.clear();
    s.live.clear();
    s.kept_by_age.clear();
    s.stats.live_bytes = 0;
    s.stats.kept_free = 0;
    ++s.generation;
    s.fork_pipe_errno = 0;
    for (const ForkHooks& h : s.hooks)
      h.child();
    if (s.fork_pipe[1] >= 0) {
      const char byte = 1;
      while (::write(s.fork_pipe[1], &byte, 1) < 0 && errno == EINTR) {
      }
      ::close(s.fork_pipe[0]);
      ::close(s.fork_pipe[1]);
      s.fork_pipe[0] = s.fork_pipe[1] = -1;
    }
    s.mu.unlock();
  }

  // Only the requested bytes: the tail of the last granule is garbage (and poisoned).
  static std::size_t copy_to_private(unsigned char* start, const Live& l) {
    return make_private(start, l.length, l.requested, PROT_READ | PROT_WRITE) ? l.requested : 0;
  }
};

bool make_private(void* start, std::size_t length, std::size_t bytes, int prot) {
  void* copy = ::mmap(nullptr, length, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (copy != MAP_FAILED) {
    std::memcpy(copy, start, bytes);
    if ((prot == (PROT_READ | PROT_WRITE) || ::mprotect(copy, length, prot) == 0) &&
        ::mremap(copy, length, length, MREMAP_MAYMOVE | MREMAP_FIXED, start) != MAP_FAILED)
      return true;
    ::munmap(copy, length);
  }
  // Said with write(): nothing else is safe in a fork's child.
  static const char message[] = "conveyor pipeline: warning: a fork's child could not copy shared "
                                "memory its tensors view (mmap/mremap failed); it stays shared\n";
  [[maybe_unused]] ssize_t ignored = ::write(2, message, sizeof message - 1);
  return false;
}

SharedArena::SharedArena() : state_(new State) {}

SharedArena& SharedArena::instance() {
  static SharedArena* arena = [] {
    auto* a = new SharedArena;
    State::the() = a->state_;
    ::pthread_atfork(&State::before_fork, &State::after_fork_in_parent,
                     &State::after_fork_in_child);
    return a;
  }();
  return *arena;
}

void SharedArena::add_fork_hooks(ForkHooks hooks) {
  std::lock_guard<std::mutex> lock{state_->mu};
  state_->hooks.push_back(hooks);
}

StorageOwner SharedArena::allocate(std::size_t bytes) {
  if (!enabled() || bytes == 0)
    return nullptr;
  State& s = *state_;
  std::string warning;
  unsigned char* start;
  uint64_t gen;
  {
    std::lock_guard<std::mutex> lock{s.mu};
    start = s.allocate_locked(bytes, warning);
    gen = s.generation;
  }
  if (!warning.empty())
    pipeline_warning(warning);
  if (start == nullptr)
    return nullptr;
  const std::size_t length = round_up(bytes, kGranule);
  State* state = state_;
  return StorageOwner(static_cast<const void*>(start), [state, gen, start, length](const void*) {
    state->release(gen, start, length);
  });
}

std::optional<SharedLocation> SharedArena::locate(const void* data, std::size_t size) const {
  const auto address = reinterpret_cast<uintptr_t>(data);
  std::lock_guard<std::mutex> lock{state_->mu};
  auto it = state_->live.upper_bound(address);
  if (it == state_->live.begin())
    return std::nullopt;
  --it;
  const State::Live& l = it->second;
  const uintptr_t end = it->first + l.requested;
  if (address >= end || size > end - address)
    return std::nullopt;
  return SharedLocation{l.chunk->fd, l.chunk->id, l.chunk->size,
                        l.offset + static_cast<std::size_t>(address - it->first)};
}

void SharedArena::set_enabled(bool on) { state_->on.store(on, std::memory_order_relaxed); }

bool SharedArena::enabled() const { return state_->on.load(std::memory_order_relaxed); }

SharedArena::Stats SharedArena::stats() const {
  std::lock_guard<std::mutex> lock{state_->mu};
  Stats s = state_->stats;
  s.chunks = state_->chunks.size();
  return s;
}

} // namespace conveyor
