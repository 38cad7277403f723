// Private to the `load` kernel: one opened snapshot chunk's elements, as the reader hands them
// out. The read-ahead (chunk_read_ahead.hpp) decodes them on the executor while the reader hands
// out the chunk before, until the reader comes to this chunk (or kMaxDecodedAhead of them): the
// reader moves those out and decodes the rest itself, one at a time into the caller's element,
// viewing the chunk's bytes as before. So the two threads share the decoding by how fast each
// runs: on a busy machine, where the executor thread gets no core, the reader does it all.
//
// A decoded element costs its Element and Tensor objects (about 170 bytes for one component)
// plus the payloads it could not view (numeric ones under 17 bytes or misaligned), so the bound
// is a count: at most kMaxDecodedAhead elements, about 3 MB, beside the chunk's own bytes.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "pipeline/tensor/codec.hpp"

namespace conveyor::kernels {

class ChunkElements {
public:
  // An 8 MiB chunk of elements of 512 bytes or more is decoded ahead whole.
  static constexpr std::size_t kMaxDecodedAhead = 16384;

  explicit ChunkElements(BatchReader reader) : reader_(std::move(reader)) {}

  // Decodes the next elements (up to kMaxDecodedAhead) now, until `stop` is set (the reader has
  // come to this chunk). An error stops it; the elements decoded before it are handed out first,
  // then the error.
  void decode_ahead(const std::atomic<bool>& stop);

  uint64_t count() const { return reader_.count(); }
  bool done() const { return next_ == decoded_.size() && error_.ok() && reader_.done(); }
  // As BatchReader's: the next element into `out`; read no further after an error (it is the
  // codec's, naming the element: the caller names the chunk).
  Status next(Element& out);
  // Elements decoded ahead and not handed out yet.
  std::size_t decoded_left() const { return decoded_.size() - next_; }

private:
  BatchReader reader_;
  std::vector<Element> decoded_; // handed out by moving: the reader takes no count per tensor
  std::size_t next_ = 0;
  Status error_; // stopped decode_ahead, after decoded_
};

} // namespace conveyor::kernels
