// The on-disk form of `cache(filename)`: one file `<filename>.cache` holding the elements of one
// complete pass, each as (uint64 little-endian length, encode_element bytes), after an 8-byte magic
// and before a trailer (uint64 all-ones, uint64 element count) that proves the file is whole. A
// writer fills a temporary file next to it and renames it into place only on commit(), so a reader
// (in this or a later process) never sees a partial pass.
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
  static Expected<std::unique_ptr<CacheFileWriter>> create(const std::string& prefix);
  ~CacheFileWriter(); // without commit(): removes the temporary file
  Status append(const Element& element);
  // Writes the trailer and renames the file into place.
  Status commit();

private:
  CacheFileWriter(std::string temp_path, std::string final_path, std::FILE* file)
    : temp_path_(std::move(temp_path)), final_path_(std::move(final_path)), file_(file) {}
  Status write(const void* data, std::size_t n);

  std::string temp_path_;
  std::string final_path_;
  std::FILE* file_;
  uint64_t count_ = 0;
  std::string buffer_;
};

class CacheFileReader {
public:
  // not_found when no committed cache file exists.
  static Expected<std::unique_ptr<CacheFileReader>> open(const std::string& prefix);
  ~CacheFileReader();
  // data_loss (naming the file and offset) for a truncated or corrupt file.
  Status read(Element& element, bool& end);
  // Passes over the next `n` elements without decoding them (a restored iterator's position);
  // data_loss naming the file when it holds fewer.
  Status skip(uint64_t n);
  const std::string& path() const { return path_; }
  int64_t size() const { return size_; }
  uint64_t elements_read() const { return count_; }

private:
  CacheFileReader(std::string path, std::FILE* file) : path_(std::move(path)), file_(file) {}
  Status read_exact(void* data, std::size_t n, const char* what);
  // The next record's length, or kTrailer (checked) at the end; data_loss for a corrupt one.
  Status read_length(uint64_t& length);

  std::string path_;
  std::FILE* file_;
  long size_ = 0; // of the whole file
  uint64_t offset_ = 0;
  uint64_t count_ = 0;
  bool ended_ = false;
  std::string buffer_;
};

} // namespace conveyor::kernels
