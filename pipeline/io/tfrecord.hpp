// TFRecord files: each record is
//   uint64 length | uint32 masked_crc32c(length) | data[length] | uint32 masked_crc32c(data)
// (little-endian), as TensorFlow writes them. A corrupt or truncated record is a data_loss error
// naming the file and the byte offset of the record. With compression (files.hpp: "ZLIB" or
// "GZIP", TensorFlow's TFRecordOptions.compression_type) the whole framed stream is compressed;
// offsets then count bytes of the decompressed stream.
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <string_view>

#include "pipeline/io/crc32c.hpp"
#include "pipeline/io/files.hpp"
#include "pipeline/runtime/status.hpp"

namespace conveyor {

class TFRecordWriter {
public:
  static Expected<std::unique_ptr<TFRecordWriter>>
  open(const std::string& path, FileCompression compression = FileCompression::none);
  ~TFRecordWriter();
  Status write(std::string_view record);
  Status close(); // flushes (and finishes the compressed stream); also done by the destructor

private:
  TFRecordWriter(std::string path, std::unique_ptr<OutputStream> out)
    : path_(std::move(path)), out_(std::move(out)) {}
  std::string path_;
  std::unique_ptr<OutputStream> out_;
  bool closed_ = false;
};

class TFRecordReader {
public:
  static Expected<std::unique_ptr<TFRecordReader>>
  open(const std::string& path, FileCompression compression = FileCompression::none);
  // Reads the next record into `record`, or sets end_of_file at a clean end. After an error
  // every further call returns the same error (the reader stays at the bad record).
  Status read(std::string& record, bool& end_of_file);
  uint64_t offset() const { return offset_; } // byte offset of the next record
  int fd() const { return in_->fd(); }        // for checks on the opened file

private:
  TFRecordReader(std::string path, std::unique_ptr<InputStream> in)
    : path_(std::move(path)), in_(std::move(in)) {}
  Status read_record(std::string& record, bool& end_of_file);
  std::string path_;
  std::unique_ptr<InputStream> in_;
  uint64_t offset_ = 0;
  Status error_;
};

} // namespace conveyor
