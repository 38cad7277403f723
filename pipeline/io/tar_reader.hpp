// The entries of a tar archive (POSIX ustar, with GNU long names and pax `path` records), read
// in order from a stream: what WebDataset shards are. Every header's checksum is checked; a
// damaged header or a body shorter than its header says is data_loss naming the archive and the
// entry, never a short archive.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "pipeline/io/files.hpp"

namespace conveyor {

struct TarEntry {
  std::string name; // path inside the archive
  std::string data; // a regular file's bytes
};

class TarReader {
public:
  TarReader(std::unique_ptr<InputStream> stream, std::string name);
  // The next regular file (directories, links and other kinds are passed over); `end` after the
  // archive's end marker or at the end of the stream on a block boundary.
  Status next(TarEntry& out, bool& end);
  const std::string& name() const { return name_; }

private:
  Status read_exact(void* into, std::size_t n, const std::string& what);
  Status skip_padding(uint64_t size);
  std::unique_ptr<InputStream> stream_;
  std::string name_;
  int64_t offset_ = 0; // bytes read, for messages
};

} // namespace conveyor
