#include "pipeline/io/tar_reader.hpp"

#include <algorithm>
#include <cstring>

namespace conveyor {

namespace {

constexpr std::size_t kBlock = 512;
// A hostile header must not make the reader allocate without bound (the entry is held whole).
constexpr uint64_t kMaxEntryBytes = uint64_t{1} << 30;

// A numeric header field: octal text (spaces/NULs around it), or base-256 when the first byte
// has its high bit set (GNU, for sizes of 8 GiB and more).
bool parse_number(const char* field, std::size_t n, uint64_t& out) {
  out = 0;
  if (static_cast<unsigned char>(field[0]) & 0x80) {
    for (std::size_t i = 1; i < n; ++i)
      out = (out << 8) | static_cast<unsigned char>(field[i]);
    return true;
  }
  std::size_t i = 0;
  while (i < n && (field[i] == ' ' || field[i] == '\0'))
    ++i;
  bool any = false;
  for (; i < n && field[i] >= '0' && field[i] <= '7'; ++i) {
    out = out * 8 + static_cast<uint64_t>(field[i] - '0');
    any = true;
  }
  for (; i < n; ++i)
    if (field[i] != ' ' && field[i] != '\0')
      return false;
  return any;
}

std::string field_text(const char* field, std::size_t n) {
  return std::string(field, strnlen(field, n));
}

// The `path` record of a pax extended header ("LEN path=VALUE\n" records), if any.
std::string pax_path(const std::string& body) {
  std::size_t pos = 0;
  std::string path;
  while (pos < body.size()) {
    const std::size_t space = body.find(' ', pos);
    if (space == std::string::npos)
      break;
    const std::size_t len = std::strtoull(body.c_str() + pos, nullptr, 10);
    if (len == 0 || pos + len > body.size())
      break;
    const std::string record = body.substr(space + 1, pos + len - space - 2); // without '\n'
    if (record.rfind("path=", 0) == 0)
      path = record.substr(5);
    pos += len;
  }
  return path;
}

} // namespace

TarReader::TarReader(std::unique_ptr<InputStream> stream, std::string name)
  : stream_(std::move(stream)), name_(std::move(name)) {}

Status TarReader::read_exact(void* into, std::size_t n, const std::string& what) {
  std::size_t got = 0;
  CONVEYOR_RETURN_IF_ERROR(stream_->read(into, n, got));
  offset_ += static_cast<int64_t>(got);
  if (got != n)
    return Status{ErrorCode::data_loss, "tar archive " + name_ + " is truncated: " + what +
                                          " ends at byte " + std::to_string(offset_)};
  return Status::OK();
}

Status TarReader::skip_padding(uint64_t size) {
  char pad[kBlock];
  const std::size_t rest = static_cast<std::size_t>((kBlock - size % kBlock) % kBlock);
  return rest == 0 ? Status::OK() : read_exact(pad, rest, "padding");
}

Status TarReader::next(TarEntry& out, bool& end) {
  end = false;
  std::string long_name; // from a GNU 'L' or a pax 'x' record: the next entry's name
  for (;;) {
    char header[kBlock];
    std::size_t got = 0;
    CONVEYOR_RETURN_IF_ERROR(stream_->read(header, kBlock, got));
    offset_ += static_cast<int64_t>(got);
    if (got == 0) { // a stream that ends on a block boundary without the end marker
      end = true;
      return Status::OK();
    }
    if (got != kBlock)
      return Status{ErrorCode::data_loss, "tar archive " + name_ +
                                            " is truncated: a header ends at byte " +
                                            std::to_string(offset_)};
    if (std::all_of(header, header + kBlock, [](char c) { return c == '\0'; })) {
      end = true; // the end marker (two zero blocks; the second is not read)
      return Status::OK();
    }
    uint64_t checksum = 0, size = 0;
    if (!parse_number(header + 148, 8, checksum))
      return Status{ErrorCode::data_loss, "tar archive " + name_ + ": the header at byte " +
                                            std::to_string(offset_ - kBlock) +
                                            " is not a tar header (no checksum)"};
    uint64_t sum = 0;
    for (std::size_t i = 0; i < kBlock; ++i)
      sum += (i >= 148 && i < 156) ? ' ' : static_cast<unsigned char>(header[i]);
    std::string name = field_text(header, 100);
    if (sum != checksum)
      return Status{ErrorCode::data_loss, "tar archive " + name_ + ": the header of `" + name +
                                            "` at byte " + std::to_string(offset_ - kBlock) +
                                            " fails its checksum"};
    if (!parse_number(header + 124, 12, size))
      return Status{ErrorCode::data_loss,
                    "tar archive " + name_ + ": `" + name + "` has no valid size"};
    if (std::memcmp(header + 257, "ustar", 5) == 0) {
      const std::string prefix = field_text(header + 345, 155);
      if (!prefix.empty())
        name = prefix + "/" + name;
    }
    if (!long_name.empty())
      name = std::move(long_name);
    const char type = header[156];
    const bool regular = type == '0' || type == '\0' || type == '7';
    const bool named_next = type == 'L' || type == 'x';
    if (!regular && !named_next) { // directories, links, devices, global pax: passed over
      char skip[kBlock];
      for (uint64_t left = size; left > 0;) {
        const auto n = static_cast<std::size_t>(std::min<uint64_t>(left, kBlock));
        CONVEYOR_RETURN_IF_ERROR(read_exact(skip, n, "`" + name + "`"));
        left -= n;
      }
      CONVEYOR_RETURN_IF_ERROR(skip_padding(size));
      continue;
    }
    if (size > kMaxEntryBytes)
      return Status{ErrorCode::resource_exhausted,
                    "tar archive " + name_ + ": `" + name + "` has " + std::to_string(size) +
                      " bytes, more than the 1 GiB an entry may have here"};
    std::string data(static_cast<std::size_t>(size), '\0');
    if (size > 0)
      CONVEYOR_RETURN_IF_ERROR(read_exact(data.data(), data.size(), "`" + name + "`"));
    CONVEYOR_RETURN_IF_ERROR(skip_padding(size));
    if (type == 'L') {
      long_name = field_text(data.data(), data.size());
      continue;
    }
    if (type == 'x') {
      long_name = pax_path(data);
      continue;
    }
    out.name = std::move(name);
    out.data = std::move(data);
    return Status::OK();
  }
}

} // namespace conveyor
