#include "apps/snapshot_reads.hpp"

#include <fcntl.h>
#include <unistd.h>

namespace conveyor::apps {

Expected<int64_t> drain(Iterator& it) {
  int64_t n = 0;
  for (;;) {
    Element e;
    bool end = false;
    CONVEYOR_RETURN_IF_ERROR(it.get_next(e, end));
    if (end)
      return n;
    ++n;
  }
}

Expected<int64_t> drain(const Dataset& dataset) {
  auto it = dataset.make_iterator();
  if (!it.ok())
    return it.status();
  return drain(**it);
}

Expected<int64_t> read_chunk_files(const std::vector<snapshot::ChunkRef>& chunks) {
  std::vector<char> buffer(4 << 20);
  int64_t total = 0;
  for (const auto& c : chunks) {
    int fd = ::open(c.path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0)
      return io_error("cannot open " + c.path);
    for (;;) {
      ssize_t got = ::read(fd, buffer.data(), buffer.size());
      if (got < 0) {
        ::close(fd);
        return io_error("cannot read " + c.path);
      }
      if (got == 0)
        break;
      total += got;
    }
    ::close(fd);
  }
  return total;
}

} // namespace conveyor::apps
