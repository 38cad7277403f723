// TFRecord files (layout in tfrecord.hpp) and the CRC-32C (Castagnoli) checksum they use,
// computed in software with slicing-by-8 tables built at compile time.
#include "pipeline/tfrecord.hpp"

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>

#include <sys/types.h>

namespace conveyor {
namespace {

constexpr uint32_t kCastagnoliReversed = 0x82f63b78;
constexpr uint32_t kMaskDelta = 0xa282ead8;

using Crc32cTables = std::array<std::array<uint32_t, 256>, 8>;

// tables[k][b] is the CRC of byte b followed by k zero bytes, which lets the loop below fold
// eight input bytes per step.
constexpr Crc32cTables make_crc32c_tables() {
  Crc32cTables t{};
  for (uint32_t b = 0; b < 256; ++b) {
    uint32_t crc = b;
    for (int bit = 0; bit < 8; ++bit)
      crc = (crc >> 1) ^ ((crc & 1) ? kCastagnoliReversed : 0);
    t[0][b] = crc;
  }
  for (uint32_t b = 0; b < 256; ++b)
    for (std::size_t k = 1; k < 8; ++k)
      t[k][b] = (t[k - 1][b] >> 8) ^ t[0][t[k - 1][b] & 0xff];
  return t;
}

constexpr Crc32cTables kTables = make_crc32c_tables();

uint32_t load_le32(const unsigned char* p) {
  return uint32_t{p[0]} | uint32_t{p[1]} << 8 | uint32_t{p[2]} << 16 | uint32_t{p[3]} << 24;
}

void store_le32(unsigned char* p, uint32_t v) {
  for (int i = 0; i < 4; ++i)
    p[i] = static_cast<unsigned char>(v >> (8 * i));
}

void store_le64(unsigned char* p, uint64_t v) {
  for (int i = 0; i < 8; ++i)
    p[i] = static_cast<unsigned char>(v >> (8 * i));
}

uint64_t load_le64(const unsigned char* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i)
    v |= uint64_t{p[i]} << (8 * i);
  return v;
}

std::string os_error(const std::string& what, const std::string& path) {
  return what + " " + path + ": " + std::strerror(errno);
}

// Reads up to n bytes; returns how many were read (fewer only at end of file or on an error,
// which the caller tells apart with std::ferror).
std::size_t read_up_to(std::FILE* f, void* into, std::size_t n) { return std::fread(into, 1, n, f); }

} // namespace

uint32_t crc32c(const void* data, std::size_t n, uint32_t crc) {
  const auto* p = static_cast<const unsigned char*>(data);
  uint32_t c = ~crc;
  for (; n >= 8; n -= 8, p += 8) {
    const uint32_t lo = load_le32(p) ^ c;
    const uint32_t hi = load_le32(p + 4);
    c = kTables[7][lo & 0xff] ^ kTables[6][(lo >> 8) & 0xff] ^ kTables[5][(lo >> 16) & 0xff] ^
        kTables[4][lo >> 24] ^ kTables[3][hi & 0xff] ^ kTables[2][(hi >> 8) & 0xff] ^
        kTables[1][(hi >> 16) & 0xff] ^ kTables[0][hi >> 24];
  }
  for (; n > 0; --n, ++p)
    c = (c >> 8) ^ kTables[0][(c ^ *p) & 0xff];
  return ~c;
}

uint32_t mask_crc32c(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + kMaskDelta; }

uint32_t unmask_crc32c(uint32_t masked) {
  const uint32_t rot = masked - kMaskDelta;
  return (rot >> 17) | (rot << 15);
}

// --- writer

Expected<std::unique_ptr<TFRecordWriter>> TFRecordWriter::open(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "wbe");
  if (f == nullptr)
    return io_error(os_error("cannot open TFRecord file for writing", path));
  return std::unique_ptr<TFRecordWriter>(new TFRecordWriter(path, f));
}

TFRecordWriter::~TFRecordWriter() { (void)close(); }

Status TFRecordWriter::write(std::string_view record) {
  if (file_ == nullptr)
    return failed_precondition("TFRecord writer for " + path_ + " is closed");
  unsigned char header[12];
  store_le64(header, record.size());
  store_le32(header + 8, mask_crc32c(crc32c(header, 8)));
  unsigned char footer[4];
  store_le32(footer, mask_crc32c(crc32c(record.data(), record.size())));
  if (std::fwrite(header, 1, sizeof header, file_) != sizeof header ||
      std::fwrite(record.data(), 1, record.size(), file_) != record.size() ||
      std::fwrite(footer, 1, sizeof footer, file_) != sizeof footer)
    return io_error(os_error("cannot write a record to", path_));
  return Status::OK();
}

Status TFRecordWriter::close() {
  if (file_ == nullptr)
    return Status::OK();
  const bool flushed = std::fflush(file_) == 0;
  const int flush_errno = errno;
  const bool closed = std::fclose(file_) == 0;
  file_ = nullptr;
  if (!flushed) {
    errno = flush_errno;
    return io_error(os_error("cannot flush", path_));
  }
  if (!closed)
    return io_error(os_error("cannot close", path_));
  return Status::OK();
}

// --- reader

Expected<std::unique_ptr<TFRecordReader>> TFRecordReader::open(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rbe");
  if (f == nullptr) {
    if (errno == ENOENT)
      return not_found("TFRecord file " + path + " does not exist");
    return io_error(os_error("cannot open TFRecord file", path));
  }
  return std::unique_ptr<TFRecordReader>(new TFRecordReader(path, f));
}

TFRecordReader::~TFRecordReader() {
  if (file_ != nullptr)
    std::fclose(file_);
}

Status TFRecordReader::read(std::string& record, bool& end_of_file) {
  end_of_file = false;
  const uint64_t start = offset_;
  const std::string where = " at byte offset " + std::to_string(start) + " in " + path_;
  // Leaves the file positioned at the bad record, so that reading again gives the same error.
  auto fail = [&](Status st) {
    if (fseeko(file_, static_cast<off_t>(start), SEEK_SET) != 0)
      return io_error(os_error("cannot seek back in", path_));
    return st;
  };
  auto short_read = [&](const char* field, std::size_t got, std::size_t want) {
    if (std::ferror(file_))
      return fail(io_error(os_error("cannot read", path_)));
    return fail(data_loss("truncated record" + where + ": " + field + " has " + std::to_string(got) + " of " +
                          std::to_string(want) + " bytes"));
  };

  unsigned char header[12];
  std::size_t got = read_up_to(file_, header, 8);
  if (got == 0 && !std::ferror(file_)) {
    end_of_file = true;
    return Status::OK();
  }
  if (got < 8)
    return short_read("length", got, 8);
  got = read_up_to(file_, header + 8, 4);
  if (got < 4)
    return short_read("length crc", got, 4);
  if (unmask_crc32c(load_le32(header + 8)) != crc32c(header, 8))
    return fail(data_loss("corrupt record" + where + ": length crc mismatch"));
  const uint64_t length = load_le64(header);

  // Grows the record chunk by chunk, so that a length beyond the end of a truncated file never
  // allocates more than the file holds.
  constexpr std::size_t kChunk = std::size_t{1} << 20;
  record.clear();
  while (record.size() < length) {
    const std::size_t want = static_cast<std::size_t>(std::min<uint64_t>(length - record.size(), kChunk));
    const std::size_t before = record.size();
    record.resize(before + want);
    got = read_up_to(file_, record.data() + before, want);
    if (got < want) {
      record.clear();
      if (std::ferror(file_))
        return fail(io_error(os_error("cannot read", path_)));
      return fail(data_loss("truncated record" + where + ": payload has " + std::to_string(before + got) +
                            " of " + std::to_string(length) + " bytes"));
    }
  }
  unsigned char footer[4];
  got = read_up_to(file_, footer, 4);
  if (got < 4)
    return short_read("payload crc", got, 4);
  if (unmask_crc32c(load_le32(footer)) != crc32c(record.data(), record.size()))
    return fail(data_loss("corrupt record" + where + ": data crc mismatch"));
  offset_ = start + 12 + length + 4;
  return Status::OK();
}

} // namespace conveyor
