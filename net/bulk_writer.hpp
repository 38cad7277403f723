// Writes the bulk data path's frames to plain TCP connections from a thread of its own, each
// frame with gather writes (sendmsg over its pieces, pipeline/tensor/gather_buffer.hpp): a large
// tensor goes from the storage its pipeline produced it in to the kernel with no copy.
//
// Why not CAF: a caf::io scribe writes one contiguous buffer, so every frame had to be encoded
// into one (a copy of every payload byte; `bench service` 1 MiB: ~14% of the service's CPU).
// The bulk server broker (net/bulk.cpp) still accepts the connections and reads them through
// CAF (the hello, and the close); once a connection is greeted the writer holds a duplicate of
// its socket and writes every byte the worker sends on it, the ack first.
//
// No CAF and no actors: plain sockets, epoll and one thread ("conveyor-bulkw"), so that it can
// be tested on its own. Everything a connection was sent is written in order. A write that fails
// (the peer went) drops the rest with a warning naming `label`, and shuts the socket down, so
// that the broker sees the connection close and the consumer its channel break (it refetches
// or fails what it waited for); removing a connection with frames left warns the same way.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "pipeline/tensor/gather_buffer.hpp"
#include "pipeline/runtime/status.hpp"

namespace conveyor::actors {

class BulkWriter {
public:
  BulkWriter();
  // Stops the thread; closes every duplicate socket, releasing what was not written.
  ~BulkWriter();
  BulkWriter(const BulkWriter&) = delete;
  BulkWriter& operator=(const BulkWriter&) = delete;

  // Starts writing to a duplicate of `fd` under `key` (the caller keeps `fd`). An error when the
  // socket cannot be duplicated or watched. `label` names the connection in warnings.
  Status add(uint64_t key, int fd, std::string label);
  // Queues `buffer` behind what `key` was sent before; dropped if `key` is unknown.
  void send(uint64_t key, GatherBuffer buffer);
  // Stops writing to `key` and closes its duplicate socket (the peer sees the connection close
  // once the caller closed its own descriptor too); anything unwritten is dropped.
  void remove(uint64_t key);

  struct Stats {
    int64_t buffers = 0;     // written whole
    int64_t bytes = 0;       // written
    int64_t syscalls = 0;    // sendmsg calls
    int64_t would_block = 0; // of them, found the socket full
  };
  Stats stats() const;

private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

} // namespace conveyor::actors
