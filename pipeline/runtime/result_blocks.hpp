// Shared memory blocks (memfds) that one Python pool process writes its results into, viewed in
// place as the new elements' tensor storage (pipeline/functions/python/process_pool.cpp): no copy
// out of the pool process's output region. Nothing here needs Python (tested without it).
// A request is given a free block; a tensor made from the reply holds the block (through its
// StorageOwner) and the block is free again only when the last tensor viewing it is gone, on any
// thread. The blocks outlive the pool and its process while a tensor views them (the owner holds
// this object). When none is free (results kept by the pipeline hold them all) the request gets
// none and its result is copied out of the output region as before, counted by the pool.
// fork(): in the same hand-shake as the shared arena's (shared_arena.hpp), a child copies the
// blocks its tensors view into memory of its own, closes the memfds and never touches them again
// (the parent goes on using them): an inherited object only frees that private memory.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "conveyor/tensor.hpp"
#include "pipeline/runtime/status.hpp"

namespace conveyor {

class ResultBlocks : public std::enable_shared_from_this<ResultBlocks> {
public:
  static constexpr int kMaxBlocks = 64; // per pool process
  static constexpr int kKeepFree = 8;   // free blocks beyond these give their memory back, and
  static constexpr std::size_t kKeepFreeBytes = 64 << 20; // beyond these bytes (but the newest)
  static constexpr std::size_t kGranule = 64 << 10;

  // A block handed to one request: its index (the process maps it by index), its memfd (sent to
  // the process the first time, `send_fd`), and its size (the process maps it again when it grew).
  struct Lease {
    int index = -1; // -1: none free
    int fd = -1;
    std::size_t capacity = 0;
    bool send_fd = false;
  };

  ResultBlocks();
  ~ResultBlocks();

  // A free block of at least `size` bytes (made, or grown while free, when needed), now busy; a
  // lease with index -1 when all kMaxBlocks are viewed. Errors: memfd_create, ftruncate, mmap.
  Expected<Lease> acquire(std::size_t size);
  // The process has the block's descriptor now (a later lease does not send it again).
  void sent(int index);
  // Frees a busy block no tensor took (the call failed, the process died, the result was copied).
  void release(int index);
  // The block's bytes (read-only), valid while it is busy or an owner() of it lives.
  const unsigned char* data(int index) const;
  std::size_t capacity(int index) const;
  // Takes over busy block `index`: it is freed when the last copy of the owner is gone.
  StorageOwner owner(int index);
  int busy() const; // tests: blocks leased or viewed

private:
  struct Block {
    int fd = -1;
    unsigned char* map = nullptr;
    std::size_t size = 0; // mapped here and the memfd's length (0: its memory given back)
    bool busy = false;
    bool fd_sent = false;
    uint64_t freed = 0; // when it was last freed (clock_)
  };
  Status resize_locked(Block& b, std::size_t size);
  // The fork hand-shake (SharedArena::ForkHooks), over every ResultBlocks of the process.
  static bool fork_prepare();
  static void fork_parent();
  static void fork_child();

  mutable std::mutex mu_;
  std::vector<Block> blocks_;
  uint64_t clock_ = 0;
  bool inherited_ = false; // made before a fork, in the child: its blocks are the parent's
};

} // namespace conveyor
