#include "pipeline/io/snapshot_writer.hpp"

#include <sys/stat.h>

namespace conveyor::snapshot {

Status StreamWriter::append(Element element) {
  buffered_bytes_ += encoded_element_size(element);
  buffer_.push_back(std::move(element));
  if (!options_.split_aligned && buffered_bytes_ >= options_.chunk_bytes)
    return commit(next_chunk_);
  return Status::OK();
}

Status StreamWriter::finish() { return buffer_.empty() ? Status::OK() : commit(next_chunk_); }

Status StreamWriter::end_of_splits(int64_t last_split, bool force) {
  if (buffer_.empty() || (!force && buffered_bytes_ < options_.chunk_bytes))
    return Status::OK();
  return commit(last_split);
}

Status StreamWriter::commit(int64_t index) {
  if (options_.before_commit)
    CONVEYOR_RETURN_IF_ERROR(options_.before_commit(index));
  auto chunk =
    write_chunk(dir_, options_.stream, index, buffer_, options_.compression, options_.sync);
  if (!chunk.ok())
    return chunk.status();
  next_chunk_ = index + 1;
  struct stat written {};
  if (::stat(chunk->path.c_str(), &written) == 0)
    file_bytes_ += static_cast<int64_t>(written.st_size);
  ++chunks_;
  elements_ += static_cast<int64_t>(buffer_.size());
  bytes_ += static_cast<int64_t>(buffered_bytes_);
  buffer_.clear();
  buffered_bytes_ = 0;
  return Status::OK();
}

} // namespace conveyor::snapshot
