// What a `cache` iterator saves (cache.cpp): how far its pass got and whether the pass reads a
// complete cache or was filling one. The input's state is nested as one byte string, so an
// iterator that reads a complete cache (and has no input) can take the state of one that was
// filling, and the other way round.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "conveyor/iterator.hpp"
#include "conveyor/iterator_state.hpp"

namespace conveyor::kernels {

struct CacheState {
  bool complete = false;  // the pass read a complete cache; false: it was filling one
  int64_t position = 0;   // the elements this pass delivered
  bool ended = false;     // the pass saw its end
  int64_t file_size = -1; // a complete file cache's size (another size on restore: data_loss)
  // A complete file cache's records checksum (cache_file.hpp), its identity: another on restore
  // is data_loss. -1: unknown (a state of an older build, whose cache file cannot be read now).
  int64_t file_checksum = -1;
  bool recording = true;            // filling: the pass will still be recorded when it ends
  Status pending;                   // filling a file: the error reported in place of the end
  std::optional<std::string> input; // filling, before the end: the input's state

  // The input's state into `input` (a read cursor it sets is passed on to `out`).
  Status save_input(Iterator& it, IteratorStateWriter& out);
  void write(IteratorStateWriter& out) const;
  // data_loss for a malformed state.
  static Expected<CacheState> read(IteratorStateReader& in);
  // `input` restored into `it` (a fresh iterator of the input).
  Status restore_input(Iterator& it) const;
  // Whether a filling pass restored from this state may still become the cache: only when it
  // was recording and had delivered nothing (the delivered elements went with the saved process).
  bool restored_pass_records() const { return recording && position == 0; }
};

} // namespace conveyor::kernels
