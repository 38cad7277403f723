// One stream of a snapshot being written: elements in, committed chunks out. Elements gather in
// memory until they reach `chunk_bytes` (encoded), then become one chunk file, committed
// atomically (snapshot_files.hpp). What was appended is on disk only once its chunk is committed:
// finish() commits the last, partial chunk; a writer destroyed without finish() leaves the
// elements after its last chunk unwritten (the save then failed: mark_failed says so).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "pipeline/io/snapshot_files.hpp"

namespace conveyor::snapshot {

struct WriterOptions {
  int64_t stream = 0;
  int64_t first_chunk = 0; // index of the first chunk this writer commits
  Compression compression = Compression::lz4;
  std::size_t chunk_bytes = 64u << 20; // encoded bytes per chunk (at least one element each)
  bool sync = true;                    // fsync every chunk (tests of the format skip it)
  // Chunks end only at split boundaries (end_of_splits), named by the last split they hold:
  // the workers' streams of a per-split pipeline (worker/snapshot_stream.hpp), whose next
  // writer resumes after the last committed chunk. append() then never commits by itself.
  bool split_aligned = false;
  // Called before each chunk commits, with its index, while everything appended is in it: the
  // worker's stream saves its pipeline's state there (snapshot_files.hpp checkpoints). An error
  // stops the commit.
  std::function<Status(int64_t index)> before_commit;
};

class StreamWriter {
public:
  StreamWriter(std::string dir, WriterOptions options)
    : dir_(std::move(dir)), options_(options), next_chunk_(options.first_chunk) {}

  Status append(Element element);
  // Commits what is buffered (nothing when empty).
  Status finish();
  // split_aligned: everything appended so far came from the splits up to sequence number
  // `last_split`; commits it as chunk `last_split` when it reached chunk_bytes (or when `force`,
  // at the end of the stream; nothing when empty).
  Status end_of_splits(int64_t last_split, bool force);

  int64_t chunks() const { return chunks_; }
  int64_t elements() const { return elements_; }     // committed
  int64_t bytes() const { return bytes_; }           // encoded bytes committed
  int64_t file_bytes() const { return file_bytes_; } // the committed chunk files' size

private:
  Status commit(int64_t index);

  std::string dir_;
  WriterOptions options_;
  std::vector<Element> buffer_;
  std::size_t buffered_bytes_ = 0;
  int64_t next_chunk_;
  int64_t chunks_ = 0;
  int64_t elements_ = 0;
  int64_t bytes_ = 0;
  int64_t file_bytes_ = 0;
};

} // namespace conveyor::snapshot
