// Bytes to be written as one stream but held in pieces: the encoder's own bytes (headers, small
// tensors) with views of large tensors' storage placed between them. A bulk connection writes
// the pieces with gather writes (sendmsg), so a large tensor goes from the storage the pipeline
// produced it in to the kernel with no user-space copy (net/bulk_writer.hpp). The views keep
// that storage alive (it is immutable once produced: a writer copies on write, see Tensor).
#pragma once

#include <algorithm>
#include <cstddef>
#include <vector>

#include "conveyor/tensor.hpp"

namespace conveyor {

struct GatherBuffer {
  // `size` bytes at `data`, kept alive by `keep`, inserted before own[at].
  struct View {
    std::size_t at = 0;
    StorageOwner keep;
    const char* data = nullptr;
    std::size_t size = 0;
  };

  std::vector<char> own;   // the encoder's bytes
  std::vector<View> views; // in stream order (non-decreasing `at`)

  std::size_t size() const { return own.size() + view_bytes_; }
  bool empty() const { return size() == 0; }
  void add_view(StorageOwner keep, const char* data, std::size_t size) {
    views.push_back(View{own.size(), std::move(keep), data, size});
    view_bytes_ += size;
  }
  void clear() { reset(0); }
  // Keeps the first `own_bytes` own bytes and no view.
  void reset(std::size_t own_bytes) {
    own.resize(own_bytes);
    views.clear();
    view_bytes_ = 0;
  }

  // Calls f(const char* data, std::size_t size) for each non-empty piece, in stream order.
  template <class F>
  void for_each_piece(F&& f) const {
    std::size_t from = 0;
    for (const View& v : views) {
      if (v.at > from)
        f(own.data() + from, v.at - from);
      if (v.size > 0)
        f(v.data, v.size);
      from = v.at;
    }
    if (own.size() > from)
      f(own.data() + from, own.size() - from);
  }

  // The same for the stream from byte `from` on: what comes before it is left out.
  template <class F>
  void for_each_piece_from(std::size_t from, F&& f) const {
    for_each_piece([&](const char* p, std::size_t n) {
      const std::size_t skip = std::min(from, n);
      from -= skip;
      if (n > skip)
        f(p + skip, n - skip);
    });
  }

  // The stream from byte `from` on as one buffer (a copy of every view's bytes), for the paths
  // that need one.
  std::vector<char> flatten(std::size_t from = 0) const {
    std::vector<char> out;
    out.reserve(size() > from ? size() - from : 0);
    for_each_piece_from(from,
                        [&](const char* p, std::size_t n) { out.insert(out.end(), p, p + n); });
    return out;
  }

private:
  std::size_t view_bytes_ = 0;
};

} // namespace conveyor
