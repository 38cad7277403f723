// Result blocks of a pool process (see the header).
#include "pipeline/runtime/result_blocks.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

#include "pipeline/tensor/shared_arena.hpp"

namespace conveyor {

namespace {

// Every ResultBlocks alive, for the fork hand-shake (never destroyed: a block's owner may
// outlive static destruction).
std::mutex& registry_mu() {
  static auto* mu = new std::mutex;
  return *mu;
}
std::vector<ResultBlocks*>& registry() {
  static auto* all = new std::vector<ResultBlocks*>;
  return *all;
}

} // namespace

ResultBlocks::ResultBlocks() {
  static const bool hooked = [] {
    SharedArena::instance().add_fork_hooks({&fork_prepare, &fork_parent, &fork_child});
    return true;
  }();
  (void)hooked;
  std::lock_guard<std::mutex> lock{registry_mu()};
  registry().push_back(this);
}

// Before the fork (the arena's lock held): no block changes hands until the child has copied.
bool ResultBlocks::fork_prepare() {
  registry_mu().lock();
  bool viewed = false;
  for (ResultBlocks* r : registry()) {
    r->mu_.lock();
    for (const Block& b : r->blocks_)
      viewed = viewed || (b.busy && b.map != nullptr && !r->inherited_);
  }
  return viewed;
}

void ResultBlocks::fork_parent() {
  for (ResultBlocks* r : registry())
    r->mu_.unlock();
  registry_mu().unlock();
}

// The child's only thread: the blocks its tensors view become private copies; the rest of its
// maps and the memfds go.
void ResultBlocks::fork_child() {
  for (ResultBlocks* r : registry()) {
    if (!r->inherited_) {
      for (Block& b : r->blocks_) {
        if (b.map != nullptr && !(b.busy && make_private(b.map, b.size, b.size, PROT_READ))) {
          ::munmap(b.map, b.size);
          b.map = nullptr;
          b.size = 0;
        }
        if (b.fd >= 0)
          ::close(b.fd);
        b.fd = -1;
      }
      r->inherited_ = true;
    }
    r->mu_.unlock();
  }
  registry_mu().unlock();
}

ResultBlocks::~ResultBlocks() {
  {
    std::lock_guard<std::mutex> lock{registry_mu()};
    std::vector<ResultBlocks*>& all = registry();
    all.erase(std::find(all.begin(), all.end(), this));
  }
  for (Block& b : blocks_) {
    if (b.map != nullptr)
      ::munmap(b.map, b.size);
    if (b.fd >= 0)
      ::close(b.fd);
  }
}

Status ResultBlocks::resize_locked(Block& b, std::size_t size) {
  if (b.map != nullptr)
    ::munmap(b.map, b.size);
  b.map = nullptr;
  b.size = 0;
  // A shorter length frees the pages in both processes; the pool process's map of the block
  // stays, unused while the block is free (a later lease tells it the new size).
  if (::ftruncate(b.fd, static_cast<off_t>(size)) != 0)
    return io_error(std::string{"Python pool: ftruncate of a result block: "} +
                    std::strerror(errno));
  if (size == 0)
    return Status::OK();
  void* map = ::mmap(nullptr, size, PROT_READ, MAP_SHARED, b.fd, 0);
  if (map == MAP_FAILED)
    return io_error(std::string{"Python pool: mmap of a result block: "} + std::strerror(errno));
  b.map = static_cast<unsigned char*>(map);
  b.size = size;
  return Status::OK();
}

Expected<ResultBlocks::Lease> ResultBlocks::acquire(std::size_t size) {
  size = (size + kGranule - 1) / kGranule * kGranule;
  std::lock_guard<std::mutex> lock{mu_};
  if (inherited_)
    return failed_precondition("Python pool: a pool made before fork() is the parent's; the child "
                               "starts its own");
  // The free one big enough that was freed last (its bytes are likely still in a cache: writing
  // 1 MiB into one of 16 rotating blocks measured twice the time of writing into a recent one);
  // else the biggest free one, grown.
  int chosen = -1;
  for (int i = 0; i < static_cast<int>(blocks_.size()); ++i) {
    const Block& b = blocks_[i];
    if (b.busy)
      continue;
    const bool fits = b.size >= size;
    if (chosen < 0) {
      chosen = i;
      continue;
    }
    const Block& c = blocks_[chosen];
    const bool chosen_fits = c.size >= size;
    if (fits != chosen_fits ? fits : fits ? b.freed > c.freed : b.size > c.size)
      chosen = i;
  }
  if (chosen < 0 || blocks_[chosen].size < size) {
    if (chosen < 0 && static_cast<int>(blocks_.size()) == kMaxBlocks)
      return Lease{};
    if (chosen < 0) {
      Block b;
      b.fd = ::memfd_create("conveyor-pool-result", MFD_CLOEXEC);
      if (b.fd < 0)
        return io_error(std::string{"Python pool: memfd_create: "} + std::strerror(errno));
      blocks_.push_back(b);
      chosen = static_cast<int>(blocks_.size()) - 1;
    }
    if (Status st = resize_locked(blocks_[chosen], size); !st.ok())
      return st;
  }
  Block& b = blocks_[chosen];
  b.busy = true;
  return Lease{chosen, b.fd, b.size, !b.fd_sent};
}

void ResultBlocks::sent(int index) {
  std::lock_guard<std::mutex> lock{mu_};
  blocks_[index].fd_sent = true;
}

void ResultBlocks::release(int index) {
  std::lock_guard<std::mutex> lock{mu_};
  if (inherited_) { // the child's copy of a block it viewed at the fork, or nothing
    Block& b = blocks_[index];
    if (b.map != nullptr)
      ::munmap(b.map, b.size);
    b = Block{};
    return;
  }
  blocks_[index].busy = false;
  blocks_[index].freed = ++clock_;
  // A burst of kept results made many blocks, or big ones: keep a few for reuse (at most kKeepFree,
  // of at most kKeepFreeBytes together, but always the one just freed), and give the memory of
  // those freed longest ago back (an error leaves one as it is: still free, still mapped).
  for (;;) {
    int free_with_memory = 0;
    std::size_t bytes = 0;
    int oldest = -1;
    for (int i = 0; i < static_cast<int>(blocks_.size()); ++i) {
      const Block& b = blocks_[i];
      if (b.busy || b.size == 0)
        continue;
      ++free_with_memory;
      bytes += b.size;
      if (oldest < 0 || b.freed < blocks_[oldest].freed)
        oldest = i;
    }
    if ((free_with_memory <= kKeepFree && bytes <= kKeepFreeBytes) || oldest == index ||
        !resize_locked(blocks_[oldest], 0).ok())
      return;
  }
}

const unsigned char* ResultBlocks::data(int index) const {
  std::lock_guard<std::mutex> lock{mu_};
  return blocks_[index].map;
}

std::size_t ResultBlocks::capacity(int index) const {
  std::lock_guard<std::mutex> lock{mu_};
  return blocks_[index].size;
}

StorageOwner ResultBlocks::owner(int index) {
  std::shared_ptr<ResultBlocks> self = shared_from_this();
  const unsigned char* map = data(index);
  return StorageOwner(static_cast<const void*>(map),
                      [self, index](const void*) { self->release(index); });
}

int ResultBlocks::busy() const {
  std::lock_guard<std::mutex> lock{mu_};
  int n = 0;
  for (const Block& b : blocks_)
    n += b.busy;
  return n;
}

} // namespace conveyor
