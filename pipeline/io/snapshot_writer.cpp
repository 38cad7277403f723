#include "pipeline/io/snapshot_writer.hpp"

namespace conveyor::snapshot {

Status StreamWriter::append(Element element) {
  buffered_bytes_ += encoded_element_size(element);
  buffer_.push_back(std::move(element));
  if (buffered_bytes_ >= options_.chunk_bytes)
    return commit();
  return Status::OK();
}

Status StreamWriter::finish() { return buffer_.empty() ? Status::OK() : commit(); }

Status StreamWriter::commit() {
  auto chunk =
    write_chunk(dir_, options_.stream, next_chunk_, buffer_, options_.compression, options_.sync);
  if (!chunk.ok())
    return chunk.status();
  ++next_chunk_;
  ++chunks_;
  elements_ += static_cast<int64_t>(buffer_.size());
  bytes_ += static_cast<int64_t>(buffered_bytes_);
  buffer_.clear();
  buffered_bytes_ = 0;
  return Status::OK();
}

} // namespace conveyor::snapshot
