// Big tensor storage in shared memory: chunks of memfd that this process maps, so that another
// process given a chunk's descriptor (a Python pool process, process_pool.cpp) reads a tensor
// where it lies instead of a copy of it in its input region.
//
// Who allocates here: TensorInternals::uninitialized, for kMinBytes or more (decoders, stack,
// tensors made from numpy arrays). Smaller storage stays on the heap, where malloc serves it
// without faults; storage the arena cannot give (it is off, or memfd/mmap failed: warned once)
// falls back to the heap too, so the arena never makes an allocation fail.
//
// Memory: a chunk's free bytes stay mapped for reuse up to kKeepFreeBytes over all chunks;
// beyond that, freed ranges are given back (fallocate PUNCH_HOLE), so RSS follows what lives
// and chunks (address space) stay valid for the processes that mapped them.
//
// fork(): a child must not share what its parent will reuse. The child copies every range that
// is live at the fork into private memory at the same address (its tensors read the same bytes,
// and no later write of the parent reaches them), unmaps the rest and closes the descriptors: it
// starts with an empty arena of its own. The parent does not reuse or free a range until the
// child has made its copy (fork() waits for it; nothing live: no wait). posix_spawn (vfork) runs
// no fork handlers and needs none.
//
// Under AddressSanitizer the free parts of chunks (and the tail of an allocation's last granule)
// are poisoned, so overflows out of arena storage are still reported.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>

#include "conveyor/tensor.hpp"

namespace conveyor {

// Where bytes of the arena lie: a chunk, by a descriptor the receiving process maps once.
struct SharedLocation {
  int fd = -1;                // the chunk's memfd (the arena's: dup it to keep it)
  uint32_t chunk = 0;         // the chunk's id: unique in this process's life, never reused
  std::size_t chunk_size = 0; // the chunk's length (fixed for its life)
  std::size_t offset = 0;     // of the first byte asked about
};

class SharedArena {
public:
  static constexpr std::size_t kMinBytes = 64 << 10;      // smaller storage stays on the heap
  static constexpr std::size_t kGranule = 64 << 10;       // allocations are whole granules
  static constexpr std::size_t kChunkBytes = 64 << 20;    // bigger allocations get a chunk each
  static constexpr std::size_t kKeepFreeBytes = 64 << 20; // free bytes kept mapped, over chunks

  // The process's arena (made on first use; its fork handlers registered then).
  static SharedArena& instance();

  // Uninitialized storage of `bytes` (>= kMinBytes), aligned to kGranule, freed when the last
  // copy of the returned owner is gone (on any thread). Null when the arena is off or cannot
  // grow: the caller uses the heap.
  StorageOwner allocate(std::size_t bytes);
  // Where [data, data + size) lies when it lies wholly inside one live allocation of this
  // process's arena (a view into a tensor counts); nullopt otherwise.
  std::optional<SharedLocation> locate(const void* data, std::size_t size) const;

  // Other memory of this process that other processes share (a Python pool's result blocks,
  // result_blocks.hpp) and a fork's child must make its own in the same hand-shake: `prepare`
  // runs before the fork, with the arena's lock held (it takes its own locks, and says whether
  // anything of it lives); `child` runs in the child (make_private, below) before the parent
  // goes on; `parent` then releases its locks. Added once per kind, never removed.
  struct ForkHooks {
    bool (*prepare)() = nullptr;
    void (*parent)() = nullptr;
    void (*child)() = nullptr;
  };
  void add_fork_hooks(ForkHooks hooks);

  // Off: allocate() returns null from now on (tests; CONVEYOR_SHARED_ARENA=0 at first use).
  void set_enabled(bool on);
  bool enabled() const;

  struct Stats {
    std::size_t chunks = 0;         // mapped now
    std::size_t live_bytes = 0;     // in allocations that live (whole granules)
    std::size_t kept_free = 0;      // free and still backed by memory
    uint64_t allocations = 0;       // served since the start
    uint64_t punched = 0;           // ranges whose memory was given back
    uint64_t fork_copied_bytes = 0; // copied by this process as a fork's child
  };
  Stats stats() const;

  SharedArena(const SharedArena&) = delete;
  SharedArena& operator=(const SharedArena&) = delete;

private:
  SharedArena();
  ~SharedArena() = default; // never destroyed: storage may outlive static destruction
  struct State;
  State* state_; // (the implementation's: chunks, free lists, the lock, fork hand-shake)
};

// Replaces the shared map [start, start + length) (page-aligned) by private memory with the same
// first `bytes` bytes and protection `prot`, at the same address: a fork's child's tensors keep
// reading what they read, and no later write of another process reaches them. Only calls that
// are safe in a fork's child. False when there is no memory for the copy (it stays shared; said
// on stderr).
bool make_private(void* start, std::size_t length, std::size_t bytes, int prot);

} // namespace conveyor
