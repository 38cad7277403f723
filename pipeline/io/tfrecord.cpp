// TFRecord files (layout in tfrecord.hpp) and the CRC-32C (Castagnoli) checksum they use,
// computed in software with slicing-by-8 tables built at compile time.
#include "pipeline/io/tfrecord.hpp"

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

} // namespace

namespace {

uint32_t crc32c_tables(const void* data, std::size_t n, uint32_t crc) {
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

#if defined(__x86_64__)
// SSE4.2's crc32 instruction computes CRC-32C (the Castagnoli polynomial) 8 bytes at a time:
// several times the tables' speed, which is what reading checksummed chunks is bound by.
__attribute__((target("sse4.2"))) uint32_t crc32c_sse42(const void* data, std::size_t n,
                                                        uint32_t crc) {
  const auto* p = static_cast<const unsigned char*>(data);
  uint64_t c = ~crc;
  for (; n >= 8; n -= 8, p += 8) {
    uint64_t v;
    std::memcpy(&v, p, 8);
    c = __builtin_ia32_crc32di(c, v);
  }
  auto c32 = static_cast<uint32_t>(c);
  for (; n > 0; --n, ++p)
    c32 = __builtin_ia32_crc32qi(c32, *p);
  return ~c32;
}
#endif

using Crc32cFn = uint32_t (*)(const void*, std::size_t, uint32_t);

Crc32cFn pick_crc32c() {
#if defined(__x86_64__)
  __builtin_cpu_init(); // this runs as a static initializer, maybe before libgcc's own
  if (__builtin_cpu_supports("sse4.2"))
    return crc32c_sse42;
#endif
  return crc32c_tables;
}

const Crc32cFn kCrc32c = pick_crc32c();

} // namespace

uint32_t crc32c(const void* data, std::size_t n, uint32_t crc) { return kCrc32c(data, n, crc); }

uint32_t crc32c_portable(const void* data, std::size_t n, uint32_t crc) {
  return crc32c_tables(data, n, crc);
}

uint32_t mask_crc32c(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + kMaskDelta; }

uint32_t unmask_crc32c(uint32_t masked) {
  const uint32_t rot = masked - kMaskDelta;
  return (rot >> 17) | (rot << 15);
}

// --- writer

Expected<std::unique_ptr<TFRecordWriter>> TFRecordWriter::open(const std::string& path,
                                                               FileCompression compression) {
  auto out = OutputStream::open(path, compression, "TFRecord file");
  if (!out.ok())
    return out.status();
  return std::unique_ptr<TFRecordWriter>(new TFRecordWriter(path, std::move(*out)));
}

TFRecordWriter::~TFRecordWriter() { (void)close(); }

Status TFRecordWriter::write(std::string_view record) {
  if (closed_)
    return failed_precondition("TFRecord writer for " + path_ + " is closed");
  unsigned char header[12];
  store_le64(header, record.size());
  store_le32(header + 8, mask_crc32c(crc32c(header, 8)));
  unsigned char footer[4];
  store_le32(footer, mask_crc32c(crc32c(record.data(), record.size())));
  CONVEYOR_RETURN_IF_ERROR(out_->write(header, sizeof header));
  CONVEYOR_RETURN_IF_ERROR(out_->write(record.data(), record.size()));
  return out_->write(footer, sizeof footer);
}

Status TFRecordWriter::close() {
  if (closed_)
    return Status::OK();
  closed_ = true;
  return out_->close();
}

// --- reader

Expected<std::unique_ptr<TFRecordReader>> TFRecordReader::open(const std::string& path,
                                                               FileCompression compression) {
  auto in = InputStream::open(path, compression, "TFRecord file");
  if (!in.ok())
    return in.status();
  std::string shown = (*in)->path(); // the name errors may show: a URL without its query
  return std::unique_ptr<TFRecordReader>(new TFRecordReader(std::move(shown), std::move(*in)));
}

Status TFRecordReader::read(std::string& record, bool& end_of_file) {
  end_of_file = false;
  if (!error_.ok())
    return error_;
  Status st = read_record(record, end_of_file);
  if (!st.ok()) {
    record.clear();
    error_ = st;
  }
  return st;
}

Status TFRecordReader::read_record(std::string& record, bool& end_of_file) {
  const uint64_t start = offset_;
  const std::string where = " at byte offset " + std::to_string(start) + " in " + path_;
  auto short_read = [&](const char* field, std::size_t got, std::size_t want) {
    return data_loss("truncated record" + where + ": " + field + " has " + std::to_string(got) +
                     " of " + std::to_string(want) + " bytes");
  };

  unsigned char header[12];
  std::size_t got = 0;
  CONVEYOR_RETURN_IF_ERROR(in_->read(header, 8, got));
  if (got == 0) {
    end_of_file = true;
    return Status::OK();
  }
  if (got < 8)
    return short_read("length", got, 8);
  CONVEYOR_RETURN_IF_ERROR(in_->read(header + 8, 4, got));
  if (got < 4)
    return short_read("length crc", got, 4);
  if (unmask_crc32c(load_le32(header + 8)) != crc32c(header, 8))
    return data_loss("corrupt record" + where + ": length crc mismatch");
  const uint64_t length = load_le64(header);

  // Grows the record chunk by chunk, so that a length beyond the end of a truncated file never
  // allocates more than the file holds.
  constexpr std::size_t kChunk = std::size_t{1} << 20;
  record.clear();
  while (record.size() < length) {
    const std::size_t want =
      static_cast<std::size_t>(std::min<uint64_t>(length - record.size(), kChunk));
    const std::size_t before = record.size();
    record.resize(before + want);
    CONVEYOR_RETURN_IF_ERROR(in_->read(record.data() + before, want, got));
    if (got < want)
      return data_loss("truncated record" + where + ": payload has " +
                       std::to_string(before + got) + " of " + std::to_string(length) + " bytes");
  }
  unsigned char footer[4];
  CONVEYOR_RETURN_IF_ERROR(in_->read(footer, 4, got));
  if (got < 4)
    return short_read("payload crc", got, 4);
  if (unmask_crc32c(load_le32(footer)) != crc32c(record.data(), record.size()))
    return data_loss("corrupt record" + where + ": data crc mismatch");
  offset_ = start + 12 + length + 4;
  return Status::OK();
}

} // namespace conveyor
