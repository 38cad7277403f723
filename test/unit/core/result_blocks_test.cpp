// Result blocks (pipeline/runtime/result_blocks.hpp): a block is handed out again only once the
// last tensor viewing it is gone, none when all are viewed, and a view outlives its blocks' maker.
// The test writes a block through its own map of the memfd, as a pool process does.
#include <doctest/doctest.h>

#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <vector>

#include "pipeline/runtime/result_blocks.hpp"

using namespace conveyor;

namespace {

// Writes `value` into the whole block, through a map of its descriptor of our own.
void fill(const ResultBlocks::Lease& lease, unsigned char value) {
  void* map = ::mmap(nullptr, lease.capacity, PROT_READ | PROT_WRITE, MAP_SHARED, lease.fd, 0);
  REQUIRE(map != MAP_FAILED);
  std::memset(map, value, lease.capacity);
  ::munmap(map, lease.capacity);
}

Tensor view(ResultBlocks& blocks, const ResultBlocks::Lease& lease) {
  return Tensor::numeric_view(DType::uint8, Shape{static_cast<int64_t>(lease.capacity)},
                              blocks.owner(lease.index), blocks.data(lease.index), lease.capacity);
}

bool all_bytes(const Tensor& t, unsigned char value) {
  for (unsigned char b : t.bytes())
    if (b != value)
      return false;
  return true;
}

} // namespace

TEST_CASE("result blocks: reused only after the last view goes, none when all are viewed") {
  auto blocks = std::make_shared<ResultBlocks>();
  auto first = blocks->acquire(100 << 10);
  REQUIRE(first.ok());
  CHECK(first->index == 0);
  CHECK(first->capacity == 128 << 10); // whole granules
  CHECK(first->send_fd);
  blocks->sent(first->index);
  fill(*first, 7);
  Tensor kept = view(*blocks, *first);
  Tensor copy = kept; // a second view of the same block
  for (int i = 0; i < 10; ++i) {
    auto next = blocks->acquire(100 << 10);
    REQUIRE(next.ok());
    CHECK(next->index == 1); // never the viewed one
    fill(*next, static_cast<unsigned char>(i));
    blocks->sent(next->index);
    Tensor t = view(*blocks, *next); // gone at the end of the turn: the block is free again
    CHECK(all_bytes(t, static_cast<unsigned char>(i)));
  }
  CHECK(all_bytes(kept, 7));
  kept = Tensor();
  CHECK(blocks->busy() == 1); // the copy still views it
  copy = Tensor();
  CHECK(blocks->busy() == 0);
  auto again = blocks->acquire(64 << 10);
  REQUIRE(again.ok());
  CHECK(again->index == 0);
  CHECK(!again->send_fd); // the process has its descriptor already
  blocks->release(again->index);
}

TEST_CASE(
  "result blocks: all viewed leaves none to lease; a grown block; views outlive the maker") {
  auto blocks = std::make_shared<ResultBlocks>();
  std::vector<Tensor> views;
  for (int i = 0; i < ResultBlocks::kMaxBlocks; ++i) {
    auto lease = blocks->acquire(64 << 10);
    REQUIRE(lease.ok());
    REQUIRE(lease->index == i);
    fill(*lease, static_cast<unsigned char>(i));
    views.push_back(view(*blocks, *lease));
  }
  auto none = blocks->acquire(64 << 10);
  REQUIRE(none.ok());
  CHECK(none->index == -1); // the caller copies instead of waiting
  views[5] = Tensor();
  auto grown = blocks->acquire(1 << 20); // the free one, made bigger
  REQUIRE(grown.ok());
  CHECK(grown->index == 5);
  CHECK(grown->capacity == 1 << 20);
  fill(*grown, 99);
  views[5] = view(*blocks, *grown);
  // Most released at once: a few keep their memory, the rest give it back (length 0).
  for (int i = 10; i < ResultBlocks::kMaxBlocks; ++i)
    views[i] = Tensor();
  int with_memory = 0;
  for (int i = 10; i < ResultBlocks::kMaxBlocks; ++i)
    with_memory += blocks->capacity(i) > 0;
  CHECK(with_memory == ResultBlocks::kKeepFree);
  // The maker lets go first (the pool ends): the views still hold the blocks.
  blocks.reset();
  CHECK(all_bytes(views[3], 3));
  CHECK(all_bytes(views[5], 99));
  CHECK(views[5].bytes().size() == 1 << 20);
}

TEST_CASE("result blocks: big free ones give their memory back beyond 64 MiB, the newest stays") {
  auto blocks = std::make_shared<ResultBlocks>();
  const std::size_t big = 48 << 20; // (a memfd's pages exist only once written: none are here)
  std::vector<int> leased;
  for (int i = 0; i < 3; ++i) {
    auto lease = blocks->acquire(big);
    REQUIRE(lease.ok());
    leased.push_back(lease->index);
  }
  for (int index : leased)
    blocks->release(index);
  CHECK(blocks->capacity(leased[0]) == 0);
  CHECK(blocks->capacity(leased[1]) == 0);
  CHECK(blocks->capacity(leased[2]) == big);
  auto again = blocks->acquire(big); // the one kept, not a regrown one
  REQUIRE(again.ok());
  CHECK(again->index == leased[2]);
  auto bigger = blocks->acquire(100 << 20); // more than kKeepFreeBytes alone: kept when freed
  REQUIRE(bigger.ok());
  blocks->release(again->index);
  blocks->release(bigger->index);
  CHECK(blocks->capacity(bigger->index) == 100 << 20);
  CHECK(blocks->capacity(again->index) == 0);
}

TEST_CASE("result blocks across fork: the child keeps the bytes it viewed, and its frees never "
          "touch the parent's blocks") {
  auto blocks = std::make_shared<ResultBlocks>();
  // Free blocks past kKeepFree: in the parent, freeing one more gives the oldest's memory back
  // (ftruncate), which a child sharing the memfds must never do to the parent.
  std::vector<ResultBlocks::Lease> spare;
  for (int i = 0; i < ResultBlocks::kKeepFree; ++i) {
    auto lease = blocks->acquire(1 << 20);
    REQUIRE(lease.ok());
    spare.push_back(*lease);
  }
  for (const ResultBlocks::Lease& lease : spare)
    blocks->release(lease.index);
  auto leased = blocks->acquire(1 << 20);
  REQUIRE(leased.ok());
  fill(*leased, 7);
  Tensor viewed = view(*blocks, *leased);
  int go[2];
  REQUIRE(::pipe(go) == 0);
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    char byte;
    int failed = (::read(go[0], &byte, 1) != 1) ? 1 : 0; // the parent reused the block by now
    failed |= all_bytes(viewed, 7) ? 0 : 2;
    viewed = Tensor(); // frees the child's copy (and must not truncate the parent's memfds)
    failed |= blocks->acquire(1 << 20).ok() ? 4 : 0;
    ::_exit(failed);
  }
  // The parent frees its view and leases the same block again, written over.
  const int index = leased->index;
  viewed = Tensor();
  auto again = blocks->acquire(1 << 20);
  REQUIRE(again.ok());
  CHECK(again->index == index);
  fill(*again, 9);
  Tensor now = view(*blocks, *again);
  REQUIRE(::write(go[1], "x", 1) == 1);
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0); // 2: the child saw the parent's new bytes; 4: it leased
  CHECK(all_bytes(now, 9));
  // Every free block still has its memory (a truncated one would fault when written).
  std::vector<Tensor> all;
  for (int i = 0; i < ResultBlocks::kKeepFree; ++i) {
    auto lease = blocks->acquire(1 << 20);
    REQUIRE(lease.ok());
    fill(*lease, static_cast<unsigned char>(i));
    all.push_back(view(*blocks, *lease));
    CHECK(all_bytes(all.back(), static_cast<unsigned char>(i)));
  }
  for (int fd : go)
    ::close(fd);
}
