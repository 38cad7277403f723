// TFRecord files (layout in tfrecord.hpp); their CRC-32C is in crc32c.cpp.
#include "pipeline/io/tfrecord.hpp"

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>

#include <sys/types.h>

namespace conveyor {
namespace {

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
