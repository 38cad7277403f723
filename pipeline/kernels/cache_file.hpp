// The on-disk form of `cache(filename)`: one file `<filename>.cache` holding the elements of one
// complete pass (format version 3):
//
//   "CVYCACH3" | the writing pipeline's input fingerprint (16 hex digits)
//   records:   uint64 length | uint32 masked CRC32C of the bytes | encode_element bytes
//   trailer:   uint64 all-ones | uint64 element count | uint32 masked CRC32C of all the records
//
// (integers little-endian). The trailer proves the file whole, and its checksum of the records is
// the file's identity: a checkpoint that was reading the file saves it, and a restore that finds
// another one (the file replaced, even by one of the same size) is data_loss naming the file. A
// file written by another pipeline (another fingerprint) is data_loss when opened: it would stand
// in for an input it does not hold. Versions 1 and 2 (no fingerprint, no checksums) are refused
// (version_mismatch naming the file: remove it, and the next complete pass writes it again).
//
// A writer fills a temporary file next to it, `<filename>.cache.tmp-TAG-N` (TAG names the writer,
// pipeline/io/temp_files.hpp), and renames it into place only on commit(), so a reader (in this or
// a later process) never sees a partial pass. Before it starts, it removes the temporary files of
// the same cache file whose writers are dead (a crashed process's); never a live writer's.
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>

#include "pipeline/tensor/element.hpp"
#include "pipeline/runtime/status.hpp"

namespace conveyor::kernels {

// The committed cache file for a cache() filename prefix.
std::string cache_file_path(const std::string& prefix);

class CacheFileWriter {
public:
  // `fingerprint`: of the pipeline whose elements the file records (16 hex digits).
  static Expected<std::unique_ptr<CacheFileWriter>> create(const std::string& prefix,
                                                           const std::string& fingerprint);
  ~CacheFileWriter(); // without commit(): removes the temporary file
  Status append(const Element& element);
  // Writes the trailer and renames the file into place.
  Status commit();
  const std::string& temp_path() const { return temp_path_; }

private:
  CacheFileWriter(std::string temp_path, std::string final_path, std::FILE* file)
    : temp_path_(std::move(temp_path)), final_path_(std::move(final_path)), file_(file) {}
  Status write(const void* data, std::size_t n);

  std::string temp_path_;
  std::string final_path_;
  std::FILE* file_;
  uint64_t count_ = 0;
  uint32_t checksum_ = 0; // of the records so far
  std::string buffer_;
};

class CacheFileReader {
public:
  // not_found when no committed cache file exists; data_loss naming the file when it is not
  // whole, not a cache file or was written by a pipeline of another `fingerprint`;
  // version_mismatch for another format version.
  static Expected<std::unique_ptr<CacheFileReader>> open(const std::string& prefix,
                                                         const std::string& fingerprint);
  ~CacheFileReader();
  // data_loss (naming the file and offset) for a truncated or corrupt file.
  Status read(Element& element, bool& end);
  // Passes over the next `n` elements without decoding them (a restored iterator's position);
  // data_loss naming the file when it holds fewer.
  Status skip(uint64_t n);
  const std::string& path() const { return path_; }
  int64_t size() const { return size_; }
  // The trailer's checksum of the records: what tells this file from another.
  uint32_t checksum() const { return checksum_; }
  uint64_t elements_read() const { return count_; }

private:
  CacheFileReader(std::string path, std::FILE* file) : path_(std::move(path)), file_(file) {}
  Status read_exact(void* data, std::size_t n, const char* what);
  // Reads the trailer and header; leaves the file at the first record.
  Status read_frame(const std::string& fingerprint);
  // The next record's length and checksum; end at the trailer; data_loss for a corrupt one.
  Status read_record_header(uint64_t& length, uint32_t& crc, bool& end);

  std::string path_;
  std::FILE* file_;
  long size_ = 0;            // of the whole file
  uint64_t records_end_ = 0; // the trailer's offset
  uint64_t total_ = 0;       // elements, as the trailer says
  uint32_t checksum_ = 0;    // of the records, as the trailer says
  uint64_t offset_ = 0;
  uint64_t count_ = 0;
  uint32_t running_ = 0; // the checksum of the records read so far
  bool skipped_ = false; // running_ does not cover every record read
  std::string buffer_;
};

} // namespace conveyor::kernels
