// The shared tensor arena (pipeline/tensor/shared_arena.hpp): storage in memfd chunks another
// process can map (the tests map the descriptor themselves), reused most recently freed first,
// memory given back beyond kKeepFreeBytes, freed from any thread, and a fork's child keeps the
// bytes its tensors had while the parent reuses their ranges.
#include <doctest/doctest.h>

#include <poll.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "pipeline/tensor/shared_arena.hpp"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#endif

using namespace conveyor;

namespace {

constexpr std::size_t kMiB = 1 << 20;

unsigned char* bytes_of(const StorageOwner& owner) {
  return static_cast<unsigned char*>(const_cast<void*>(owner.get()));
}

// A MiB of the arena's, every byte `value`.
StorageOwner filled_mib(SharedArena& arena, unsigned char value) {
  StorageOwner owner = arena.allocate(kMiB);
  REQUIRE(owner != nullptr);
  std::memset(bytes_of(owner), value, kMiB);
  return owner;
}

bool all_bytes(const unsigned char* p, std::size_t n, unsigned char value) {
  for (std::size_t i = 0; i < n; ++i)
    if (p[i] != value)
      return false;
  return true;
}

// Bytes of memory a chunk holds now (tmpfs counts its pages in st_blocks).
std::size_t backed_bytes(int fd) {
  struct stat st {};
  REQUIRE(::fstat(fd, &st) == 0);
  return static_cast<std::size_t>(st.st_blocks) * 512;
}

// Waits (bounded) for a byte on `fd`; false on timeout, EOF or error.
bool await_byte(int fd, int timeout_ms = 20000) {
  pollfd p{fd, POLLIN, 0};
  if (::poll(&p, 1, timeout_ms) != 1)
    return false;
  char byte;
  return ::read(fd, &byte, 1) == 1;
}

bool send_byte(int fd) {
  const char byte = 1;
  return ::write(fd, &byte, 1) == 1;
}

} // namespace

TEST_CASE("shared arena: storage is granule-aligned, writable, and locate finds it in its chunk") {
  SharedArena& arena = SharedArena::instance();
  REQUIRE(arena.enabled());
  const std::size_t size = 3 * SharedArena::kGranule + 100;
  StorageOwner owner = arena.allocate(size);
  REQUIRE(owner != nullptr);
  unsigned char* p = bytes_of(owner);
  CHECK(reinterpret_cast<uintptr_t>(p) % SharedArena::kGranule == 0);
  for (std::size_t i = 0; i < size; ++i)
    p[i] = static_cast<unsigned char>(i * 7);

  auto whole = arena.locate(p, size);
  REQUIRE(whole.has_value());
  CHECK(whole->offset % SharedArena::kGranule == 0);
  CHECK(whole->chunk_size == SharedArena::kChunkBytes);
  CHECK(whole->offset + size <= whole->chunk_size);
  // The descriptor maps the same bytes (as a pool process would see them).
  void* map = ::mmap(nullptr, whole->chunk_size, PROT_READ, MAP_SHARED, whole->fd, 0);
  REQUIRE(map != MAP_FAILED);
  CHECK(std::memcmp(static_cast<unsigned char*>(map) + whole->offset, p, size) == 0);
  ::munmap(map, whole->chunk_size);

  auto inside = arena.locate(p + 1000, 500);
  REQUIRE(inside.has_value());
  CHECK(inside->chunk == whole->chunk);
  CHECK(inside->fd == whole->fd);
  CHECK(inside->offset == whole->offset + 1000);
  CHECK(arena.locate(p + size - 1, 1).has_value());

  CHECK_FALSE(arena.locate(p + size - 10, 20).has_value()); // straddles the end
  CHECK_FALSE(arena.locate(p + size, 1).has_value());       // the granule's tail
  CHECK_FALSE(arena.locate(p - 1, 2).has_value());          // starts before it
  int on_stack = 0;
  CHECK_FALSE(arena.locate(&on_stack, sizeof on_stack).has_value());
  owner.reset();
  CHECK_FALSE(arena.locate(p, 1).has_value()); // freed
}

#if defined(__SANITIZE_ADDRESS__)
TEST_CASE(
  "shared arena: under AddressSanitizer free granules and an allocation's tail are poisoned") {
  SharedArena& arena = SharedArena::instance();
  const std::size_t size = SharedArena::kGranule + 100;
  StorageOwner owner = arena.allocate(size);
  REQUIRE(owner != nullptr);
  const unsigned char* p = bytes_of(owner);
  CHECK(__asan_region_is_poisoned(const_cast<unsigned char*>(p), size) == nullptr);
  CHECK(__asan_address_is_poisoned(p + size));
  CHECK(!__asan_address_is_poisoned(p + size - 1));
  CHECK(__asan_address_is_poisoned(p + 2 * SharedArena::kGranule - 1));
  owner.reset();
  CHECK(__asan_address_is_poisoned(p));
  StorageOwner again = arena.allocate(size); // the same range, addressable again
  REQUIRE(again.get() == p);
  CHECK(__asan_region_is_poisoned(const_cast<unsigned char*>(p), size) == nullptr);
}
#endif

TEST_CASE("shared arena: storage freed and asked for again is the same range (cache-warm)") {
  SharedArena& arena = SharedArena::instance();
  StorageOwner other = arena.allocate(kMiB); // a neighbour, so that first fit is not the answer
  StorageOwner a = arena.allocate(kMiB);
  REQUIRE(a != nullptr);
  const void* first = a.get();
  StorageOwner b = arena.allocate(kMiB);
  a.reset();
  b.reset(); // freed last: b's range is the one reused, then a's
  StorageOwner again = arena.allocate(kMiB);
  StorageOwner again2 = arena.allocate(kMiB);
  REQUIRE(again != nullptr);
  REQUIRE(again2 != nullptr);
  CHECK(again2.get() == first);
  CHECK(again.get() != first);
}

TEST_CASE(
  "shared arena: allocations fill chunks in turn, and one bigger than a chunk gets its own") {
  SharedArena& arena = SharedArena::instance();
  const uint64_t before = arena.stats().allocations;
  std::vector<StorageOwner> owners;
  std::set<uint32_t> chunks;
  uint32_t last_chunk = 0;
  const std::size_t most = 2 * SharedArena::kChunkBytes / kMiB + 2;
  for (std::size_t i = 0; i < most && chunks.size() < 2; ++i) {
    owners.push_back(arena.allocate(kMiB));
    REQUIRE(owners.back() != nullptr);
    auto where = arena.locate(owners.back().get(), kMiB);
    REQUIRE(where.has_value());
    CHECK(where->chunk_size == SharedArena::kChunkBytes);
    chunks.insert(where->chunk);
    last_chunk = std::max(last_chunk, where->chunk);
  }
  CHECK(chunks.size() == 2);
  CHECK(arena.stats().chunks >= 2);
  CHECK(arena.stats().allocations == before + owners.size());

  const std::size_t big = SharedArena::kChunkBytes + 1;
  StorageOwner huge = arena.allocate(big);
  REQUIRE(huge != nullptr);
  bytes_of(huge)[big - 1] = 9;
  auto where = arena.locate(huge.get(), big);
  REQUIRE(where.has_value());
  CHECK(where->chunk > last_chunk); // a new chunk, never a reused id
  CHECK(where->offset == 0);
  CHECK(where->chunk_size == SharedArena::kChunkBytes + SharedArena::kGranule);
}

TEST_CASE("shared arena: free memory beyond kKeepFreeBytes is given back") {
  SharedArena& arena = SharedArena::instance();
  const uint64_t punched_before = arena.stats().punched;
  // Twice the bound: at least kKeepFreeBytes of these must be given back, whatever else is kept.
  const std::size_t count = 2 * SharedArena::kKeepFreeBytes / kMiB;
  std::vector<StorageOwner> owners;
  std::map<uint32_t, int> fds; // chunk -> a descriptor of our own
  for (std::size_t i = 0; i < count; ++i) {
    owners.push_back(arena.allocate(kMiB));
    REQUIRE(owners.back() != nullptr);
    std::memset(bytes_of(owners.back()), 0x33, kMiB); // backs it
    auto where = arena.locate(owners.back().get(), kMiB);
    REQUIRE(where.has_value());
    if (fds.count(where->chunk) == 0)
      fds[where->chunk] = ::dup(where->fd);
  }
  std::size_t backed_before = 0;
  for (const auto& [chunk, fd] : fds)
    backed_before += backed_bytes(fd);
  CHECK(backed_before >= count * kMiB);

  owners.clear();
  const SharedArena::Stats after = arena.stats();
  CHECK(after.kept_free <= SharedArena::kKeepFreeBytes);
  CHECK(after.punched >= punched_before + (count * kMiB - SharedArena::kKeepFreeBytes) / kMiB);
  std::size_t backed_after = 0;
  for (const auto& [chunk, fd] : fds) {
    backed_after += backed_bytes(fd);
    ::close(fd);
  }
  CHECK(backed_after + SharedArena::kKeepFreeBytes <= backed_before);
}

TEST_CASE("shared arena: storage freed on other threads than the one that made it") {
  SharedArena& arena = SharedArena::instance();
  constexpr int kThreads = 3, kEach = 200;
  std::mutex mu;
  std::condition_variable cv;
  std::deque<std::pair<StorageOwner, unsigned char>> handed;
  std::vector<std::thread> makers;
  for (int t = 0; t < kThreads; ++t)
    makers.emplace_back([&, t] {
      for (int i = 0; i < kEach; ++i) {
        const std::size_t size = SharedArena::kMinBytes * (1 + (i + t) % 4);
        StorageOwner owner = arena.allocate(size);
        const auto value = static_cast<unsigned char>(t * 50 + i % 50);
        if (owner != nullptr)
          std::memset(bytes_of(owner), value, size);
        std::lock_guard<std::mutex> lock{mu};
        handed.emplace_back(std::move(owner), value);
        cv.notify_one();
      }
    });
  int wrong = 0, missing = 0;
  for (int received = 0; received < kThreads * kEach; ++received) {
    std::unique_lock<std::mutex> lock{mu};
    cv.wait(lock, [&] { return !handed.empty(); });
    auto [owner, value] = std::move(handed.front());
    handed.pop_front();
    lock.unlock();
    if (owner == nullptr) {
      ++missing;
      continue;
    }
    const std::size_t size = SharedArena::kMinBytes; // the first granule of each
    wrong += !all_bytes(bytes_of(owner), size, value);
    // `owner` freed here, on this thread, while the makers allocate
  }
  for (auto& m : makers)
    m.join();
  CHECK(missing == 0);
  CHECK(wrong == 0);
}

TEST_CASE("shared arena: off, it gives nothing (the caller uses the heap)") {
  SharedArena& arena = SharedArena::instance();
  arena.set_enabled(false);
  CHECK_FALSE(arena.enabled());
  CHECK(arena.allocate(kMiB) == nullptr);
  arena.set_enabled(true);
  CHECK(arena.allocate(kMiB) != nullptr);
}

namespace {

// The child's side of the fork test: a bit for each thing wrong (0: all well).
int child_checks(StorageOwner a, int ready_fd, int go_fd) {
  SharedArena& arena = SharedArena::instance();
  int wrong = 0;
  if (!all_bytes(bytes_of(a), kMiB, 0xA5))
    wrong |= 1;
  if (!send_byte(ready_fd) || !await_byte(go_fd))
    return wrong | 2;
  // The parent has freed A, taken its range again and overwritten it by now.
  if (!all_bytes(bytes_of(a), kMiB, 0xA5))
    wrong |= 4;
  if (arena.locate(a.get(), kMiB).has_value())
    wrong |= 8;
  if (arena.stats().chunks != 0 || arena.stats().fork_copied_bytes < kMiB)
    wrong |= 16;
  StorageOwner mine = arena.allocate(kMiB); // a chunk of the child's own
  if (mine == nullptr || !arena.locate(mine.get(), kMiB).has_value())
    wrong |= 32;
  else
    std::memset(bytes_of(mine), 1, kMiB);
  a.reset(); // an orphan: unmapped, no bookkeeping
  if (arena.stats().live_bytes != (mine == nullptr ? 0 : kMiB))
    wrong |= 64;
  return wrong;
}

} // namespace

TEST_CASE("shared arena: a fork's child keeps its tensors' bytes while the parent reuses them") {
  SharedArena& arena = SharedArena::instance();
  StorageOwner a = filled_mib(arena, 0xA5);
  const void* a_address = a.get();
  int ready[2], go[2];
  REQUIRE(::pipe(ready) == 0);
  REQUIRE(::pipe(go) == 0);
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    ::close(ready[0]);
    ::close(go[1]);
    ::_exit(child_checks(std::move(a), ready[1], go[0]));
  }
  ::close(ready[1]);
  ::close(go[0]);
  const bool child_ready = await_byte(ready[0]);
  CHECK(child_ready);
  a.reset();
  StorageOwner b = arena.allocate(kMiB);
  REQUIRE(b != nullptr);
  CHECK(b.get() == a_address); // the same range, reused
  std::memset(bytes_of(b), 0x5A, kMiB);
  CHECK(send_byte(go[1]));
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  ::close(ready[0]);
  ::close(go[1]);
  REQUIRE(WIFEXITED(status));
  const int child_wrong = WEXITSTATUS(status); // child_checks' bits
  CHECK(child_wrong == 0);
  CHECK(all_bytes(bytes_of(b), kMiB, 0x5A));
  CHECK(arena.stats().fork_copied_bytes == 0); // the parent copied nothing
}

namespace {

// A grandchild: A is an orphan of two generations ago (copied by its parent, inherited by
// copy-on-write), C its parent's live storage (copied at this fork).
int grandchild_checks(StorageOwner a, StorageOwner c) {
  SharedArena& arena = SharedArena::instance();
  int wrong = 0;
  if (!all_bytes(bytes_of(a), kMiB, 0xA5) || !all_bytes(bytes_of(c), kMiB, 0xC3))
    wrong |= 1;
  if (arena.stats().fork_copied_bytes < kMiB || arena.locate(c.get(), kMiB).has_value())
    wrong |= 2;
  a.reset();
  c.reset();
  StorageOwner mine = arena.allocate(kMiB);
  if (mine == nullptr || arena.stats().live_bytes != kMiB)
    wrong |= 4;
  return wrong;
}

int exit_code_of(pid_t pid) {
  int status = 0;
  if (::waitpid(pid, &status, 0) != pid || !WIFEXITED(status))
    return 255;
  return WEXITSTATUS(status);
}

// The child between: storage of its own (C) live when it forks again.
int middle_child(StorageOwner a) {
  StorageOwner c = SharedArena::instance().allocate(kMiB);
  if (c == nullptr)
    return 1;
  std::memset(bytes_of(c), 0xC3, kMiB);
  const pid_t pid = ::fork();
  if (pid < 0)
    return 2;
  if (pid == 0)
    ::_exit(grandchild_checks(std::move(a), std::move(c)));
  int wrong = exit_code_of(pid) == 0 ? 0 : 4;
  std::memset(bytes_of(c), 0x11, kMiB); // the grandchild gone: C is ours alone
  if (!all_bytes(bytes_of(a), kMiB, 0xA5))
    wrong |= 8;
  return wrong;
}

} // namespace

TEST_CASE("shared arena: a grandchild keeps the bytes of both earlier generations") {
  SharedArena& arena = SharedArena::instance();
  StorageOwner a = filled_mib(arena, 0xA5);
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0)
    ::_exit(middle_child(std::move(a)));
  const int child_wrong = exit_code_of(pid);
  CHECK(child_wrong == 0);
}

TEST_CASE("shared arena: fork with nothing live") {
  SharedArena& arena = SharedArena::instance();
  REQUIRE(arena.stats().live_bytes == 0);
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    StorageOwner mine = arena.allocate(kMiB);
    const bool ok = mine != nullptr && arena.stats().fork_copied_bytes == 0 &&
                    arena.locate(mine.get(), kMiB).has_value();
    ::_exit(ok ? 0 : 1);
  }
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  StorageOwner after = arena.allocate(kMiB); // the parent's arena is as it was
  CHECK(after != nullptr);
}
