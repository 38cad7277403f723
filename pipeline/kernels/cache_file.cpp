#include "pipeline/kernels/cache_file.hpp"

#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "pipeline/io/crc32c.hpp"
#include "pipeline/io/temp_files.hpp"
#include "pipeline/tensor/codec.hpp"

namespace conveyor::kernels {

namespace {

// Version 3 added the fingerprint and the checksums; version 2 the dtypes of element codec codes
// 6..15. Versions 1 and 2 are refused: without a checksum a replaced file cannot be told apart.
constexpr char kMagic[8] = {'C', 'V', 'Y', 'C', 'A', 'C', 'H', '3'};
constexpr uint64_t kTrailerMarker = ~uint64_t{0};
constexpr std::size_t kFingerprintBytes = 16;
constexpr std::size_t kHeaderBytes = sizeof kMagic + kFingerprintBytes;
constexpr std::size_t kRecordHeaderBytes = 8 + 4;
constexpr std::size_t kTrailerBytes = 8 + 8 + 4;

void put_u64(std::string& out, uint64_t v) {
  for (int i = 0; i < 8; ++i)
    out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

void put_u32(std::string& out, uint32_t v) {
  for (int i = 0; i < 4; ++i)
    out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

uint64_t get_le(const unsigned char* p, int bytes) {
  uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; --i)
    v = (v << 8) | p[i];
  return v;
}

std::string errno_text() { return std::strerror(errno); }

std::string hex32(uint32_t v) {
  char hex[9];
  std::snprintf(hex, sizeof hex, "%08x", v);
  return hex;
}

} // namespace

std::string cache_file_path(const std::string& prefix) { return prefix + ".cache"; }

Expected<std::unique_ptr<CacheFileWriter>> CacheFileWriter::create(const std::string& prefix,
                                                                   const std::string& fingerprint) {
  static std::atomic<uint64_t> next_id{0};
  if (fingerprint.size() != kFingerprintBytes)
    return invalid_argument("`cache`: a fingerprint of 16 hex digits expected, got `" +
                            fingerprint + "`");
  const std::string final_path = cache_file_path(prefix);
  const std::string temp_prefix = final_path + ".tmp-";
  const std::string temp_path = temp_prefix + temp_writer_tag() + "-" + std::to_string(next_id++);
  std::FILE* file = std::fopen(temp_path.c_str(), "wb");
  if (file == nullptr)
    return io_error("`cache`: cannot create the file `" + temp_path + "`: " + errno_text());
  std::unique_ptr<CacheFileWriter> writer(new CacheFileWriter(temp_path, final_path, file));
  // The temporary files a crashed filler of this cache file left (its own is alive: kept).
  const std::filesystem::path final_fs(final_path);
  auto swept = remove_dead_writers_files(final_fs.parent_path().string(),
                                         final_fs.filename().string() + ".tmp-");
  if (!swept.ok())
    return swept.status().with_context("`cache`");
  CONVEYOR_RETURN_IF_ERROR(writer->write(kMagic, sizeof kMagic));
  CONVEYOR_RETURN_IF_ERROR(writer->write(fingerprint.data(), fingerprint.size()));
  return writer;
}

CacheFileWriter::~CacheFileWriter() {
  if (file_ != nullptr) {
    std::fclose(file_);
    std::remove(temp_path_.c_str());
  }
}

Status CacheFileWriter::write(const void* data, std::size_t n) {
  if (file_ == nullptr)
    return failed_precondition("`cache`: the file `" + temp_path_ + "` is already closed");
  if (n != 0 && std::fwrite(data, 1, n, file_) != n)
    return io_error("`cache`: cannot write the file `" + temp_path_ + "`: " + errno_text());
  return Status::OK();
}

Status CacheFileWriter::append(const Element& element) {
  buffer_.clear();
  encode_element(element, buffer_);
  std::string header;
  put_u64(header, buffer_.size());
  put_u32(header, mask_crc32c(crc32c(buffer_.data(), buffer_.size())));
  checksum_ = crc32c(header.data(), header.size(), checksum_);
  checksum_ = crc32c(buffer_.data(), buffer_.size(), checksum_);
  CONVEYOR_RETURN_IF_ERROR(write(header.data(), header.size()));
  CONVEYOR_RETURN_IF_ERROR(write(buffer_.data(), buffer_.size()));
  ++count_;
  return Status::OK();
}

Status CacheFileWriter::commit() {
  std::string trailer;
  put_u64(trailer, kTrailerMarker);
  put_u64(trailer, count_);
  put_u32(trailer, mask_crc32c(checksum_));
  CONVEYOR_RETURN_IF_ERROR(write(trailer.data(), trailer.size()));
  const bool flushed = std::fflush(file_) == 0 && ::fsync(::fileno(file_)) == 0;
  const bool closed = std::fclose(file_) == 0;
  file_ = nullptr;
  if (!flushed || !closed || std::rename(temp_path_.c_str(), final_path_.c_str()) != 0) {
    Status failed =
      io_error("`cache`: cannot commit the file `" + final_path_ + "`: " + errno_text());
    std::remove(temp_path_.c_str());
    return failed;
  }
  return Status::OK();
}

Expected<std::unique_ptr<CacheFileReader>> CacheFileReader::open(const std::string& prefix,
                                                                 const std::string& fingerprint) {
  const std::string path = cache_file_path(prefix);
  std::FILE* file = std::fopen(path.c_str(), "rb");
  if (file == nullptr) {
    if (errno == ENOENT)
      return not_found("`cache`: no cache file `" + path + "`");
    return io_error("`cache`: cannot open the file `" + path + "`: " + errno_text());
  }
  std::unique_ptr<CacheFileReader> reader(new CacheFileReader(path, file));
  CONVEYOR_RETURN_IF_ERROR(reader->read_frame(fingerprint));
  return reader;
}

Status CacheFileReader::read_frame(const std::string& fingerprint) {
  if (std::fseek(file_, 0, SEEK_END) != 0 || (size_ = std::ftell(file_)) < 0 ||
      std::fseek(file_, 0, SEEK_SET) != 0)
    return io_error("`cache`: cannot find the size of the file `" + path_ + "`: " + errno_text());
  char magic[sizeof kMagic];
  CONVEYOR_RETURN_IF_ERROR(read_exact(magic, sizeof magic, "header"));
  if (std::memcmp(magic, kMagic, sizeof kMagic - 1) == 0 && magic[7] != kMagic[7])
    return Status{ErrorCode::version_mismatch,
                  "`cache`: the file `" + path_ + "` is a conveyor cache file of format version " +
                    std::string(1, magic[7]) +
                    ", this build reads version 3 only (remove the file: the next complete "
                    "pass writes it again)"};
  if (std::memcmp(magic, kMagic, sizeof kMagic) != 0)
    return data_loss("`cache`: the file `" + path_ + "` is not a conveyor cache file (bad magic)");
  if (static_cast<uint64_t>(size_) < kHeaderBytes + kTrailerBytes)
    return data_loss("`cache`: the file `" + path_ + "` is truncated: " + std::to_string(size_) +
                     " bytes, too short for a header and a trailer");
  std::string written_by(kFingerprintBytes, '\0');
  CONVEYOR_RETURN_IF_ERROR(read_exact(written_by.data(), written_by.size(), "header"));
  if (written_by != fingerprint)
    return data_loss("`cache`: the file `" + path_ + "` was written by another pipeline (input " +
                     "fingerprint " + written_by + ", this one's " + fingerprint +
                     "): it does not hold this input's elements; remove it to cache this one");
  records_end_ = static_cast<uint64_t>(size_) - kTrailerBytes;
  unsigned char trailer[kTrailerBytes];
  if (std::fseek(file_, static_cast<long>(records_end_), SEEK_SET) != 0 ||
      std::fread(trailer, 1, sizeof trailer, file_) != sizeof trailer ||
      std::fseek(file_, static_cast<long>(kHeaderBytes), SEEK_SET) != 0)
    return io_error("`cache`: cannot read the trailer of the file `" + path_ +
                    "`: " + errno_text());
  if (get_le(trailer, 8) != kTrailerMarker)
    return data_loss("`cache`: the file `" + path_ +
                     "` is truncated or damaged: no trailer at its end");
  total_ = get_le(trailer + 8, 8);
  checksum_ = unmask_crc32c(static_cast<uint32_t>(get_le(trailer + 16, 4)));
  return Status::OK();
}

CacheFileReader::~CacheFileReader() { std::fclose(file_); }

Status CacheFileReader::read_exact(void* data, std::size_t n, const char* what) {
  if (n != 0 && std::fread(data, 1, n, file_) != n)
    return data_loss("`cache`: the file `" + path_ + "` is truncated: no complete " + what +
                     " at byte offset " + std::to_string(offset_));
  offset_ += n;
  return Status::OK();
}

Status CacheFileReader::read_record_header(uint64_t& length, uint32_t& crc, bool& end) {
  end = offset_ == records_end_;
  if (end) {
    if (count_ != total_)
      return data_loss("`cache`: the file `" + path_ + "` says it holds " + std::to_string(total_) +
                       " elements but has " + std::to_string(count_));
    if (!skipped_ && running_ != checksum_)
      return data_loss("`cache`: the file `" + path_ + "` is damaged: its records' checksum is " +
                       hex32(running_) + ", its trailer says " + hex32(checksum_));
    return Status::OK();
  }
  const uint64_t at = offset_;
  unsigned char header[kRecordHeaderBytes];
  if (records_end_ - offset_ < sizeof header)
    return data_loss("`cache`: the file `" + path_ + "` has a corrupt record at byte offset " +
                     std::to_string(at) + " (it runs into the trailer)");
  CONVEYOR_RETURN_IF_ERROR(read_exact(header, sizeof header, "record header"));
  running_ = crc32c(header, sizeof header, running_);
  length = get_le(header, 8);
  crc = unmask_crc32c(static_cast<uint32_t>(get_le(header + 8, 4)));
  if (length > records_end_ - offset_) // checked before allocating or seeking
    return data_loss("`cache`: the file `" + path_ +
                     "` has a corrupt record length at byte offset " + std::to_string(at));
  return Status::OK();
}

Status CacheFileReader::read(Element& element, bool& end) {
  uint64_t length = 0;
  uint32_t crc = 0;
  CONVEYOR_RETURN_IF_ERROR(read_record_header(length, crc, end));
  if (end)
    return Status::OK();
  const uint64_t record_offset = offset_;
  buffer_.resize(length);
  CONVEYOR_RETURN_IF_ERROR(read_exact(buffer_.data(), buffer_.size(), "record"));
  if (crc32c(buffer_.data(), buffer_.size()) != crc)
    return data_loss("`cache`: the record at byte offset " + std::to_string(record_offset) +
                     " of the file `" + path_ + "` is damaged (checksum mismatch)");
  running_ = crc32c(buffer_.data(), buffer_.size(), running_);
  auto decoded = decode_element(buffer_);
  if (!decoded.ok())
    return decoded.status().with_context("`cache`: record at byte offset " +
                                         std::to_string(record_offset) + " of the file `" + path_ +
                                         "`");
  element = std::move(*decoded);
  ++count_;
  return Status::OK();
}

Status CacheFileReader::skip(uint64_t n) {
  const uint64_t target = count_ + n;
  while (count_ < target) {
    uint64_t length = 0;
    uint32_t crc = 0;
    bool end = false;
    CONVEYOR_RETURN_IF_ERROR(read_record_header(length, crc, end));
    if (end)
      return data_loss("`cache`: the file `" + path_ + "` holds " + std::to_string(count_) +
                       " elements, fewer than the " + std::to_string(target) +
                       " a checkpoint had read from it (it changed since)");
    if (std::fseek(file_, static_cast<long>(length), SEEK_CUR) != 0)
      return io_error("`cache`: cannot seek in the file `" + path_ + "`: " + errno_text());
    offset_ += length;
    skipped_ = true;
    ++count_;
  }
  return Status::OK();
}

} // namespace conveyor::kernels
