#include "pipeline/kernels/chunk_elements.hpp"

#include <algorithm>
#include <utility>

namespace conveyor::kernels {

void ChunkElements::decode_ahead(const std::atomic<bool>& stop) {
  const auto n = static_cast<std::size_t>(
    std::min<uint64_t>(reader_.count() - reader_.read(), kMaxDecodedAhead));
  if (n == 0 || stop.load(std::memory_order_relaxed))
    return; // (the reader came first: no vector)
  decoded_.reserve(n);
  while (decoded_.size() < n && !stop.load(std::memory_order_relaxed))
    if (Status s = reader_.next(decoded_.emplace_back()); !s.ok()) {
      decoded_.pop_back();
      error_ = std::move(s);
      return;
    }
}

Status ChunkElements::next(Element& out) {
  if (next_ < decoded_.size()) {
    out = std::move(decoded_[next_++]);
    return Status::OK();
  }
  if (!error_.ok())
    return error_;
  return reader_.next(out);
}

} // namespace conveyor::kernels
