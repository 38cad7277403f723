// TFRecord files: each record is
//   uint64 length | uint32 masked_crc32c(length) | data[length] | uint32 masked_crc32c(data)
// (little-endian), as TensorFlow writes them. A corrupt or truncated record is a data_loss error
// naming the file and the byte offset of the record.
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <string_view>

#include "pipeline/status.hpp"

namespace conveyor {

uint32_t crc32c(const void* data, std::size_t n, uint32_t crc = 0);
uint32_t mask_crc32c(uint32_t crc);   // ((crc >> 15) | (crc << 17)) + 0xa282ead8
uint32_t unmask_crc32c(uint32_t masked);

class TFRecordWriter {
public:
  static Expected<std::unique_ptr<TFRecordWriter>> open(const std::string& path);
  ~TFRecordWriter();
  Status write(std::string_view record);
  Status close(); // flushes; also done by the destructor (errors then ignored)

private:
  TFRecordWriter(std::string path, std::FILE* f) : path_(std::move(path)), file_(f) {}
  std::string path_;
  std::FILE* file_;
};

class TFRecordReader {
public:
  static Expected<std::unique_ptr<TFRecordReader>> open(const std::string& path);
  ~TFRecordReader();
  // Reads the next record into `record`, or sets end_of_file at a clean end.
  Status read(std::string& record, bool& end_of_file);
  uint64_t offset() const { return offset_; } // byte offset of the next record
  int fd() const { return ::fileno(file_); }   // for checks on the opened file

private:
  TFRecordReader(std::string path, std::FILE* f) : path_(std::move(path)), file_(f) {}
  std::string path_;
  std::FILE* file_;
  uint64_t offset_ = 0;
};

} // namespace conveyor
