#include "pipeline/kernels/cache_file.hpp"

#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>

#include "pipeline/tensor/codec.hpp"

namespace conveyor::kernels {

namespace {

// Version 2 may hold the dtypes of element codec codes 6..15 (int8..uint64, float16, bfloat16,
// complex): an older build says the file is of a newer version instead of failing on an element.
// Version 1 files hold a subset of version 2 and are still read.
constexpr char kMagic[8] = {'C', 'V', 'Y', 'C', 'A', 'C', 'H', '2'};
constexpr char kMagicV1[8] = {'C', 'V', 'Y', 'C', 'A', 'C', 'H', '1'};
constexpr uint64_t kTrailerMarker = ~uint64_t{0};

void put_u64(std::string& out, uint64_t v) {
  for (int i = 0; i < 8; ++i)
    out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

uint64_t get_u64(const unsigned char* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i)
    v = (v << 8) | p[i];
  return v;
}

std::string errno_text() { return std::strerror(errno); }

} // namespace

std::string cache_file_path(const std::string& prefix) { return prefix + ".cache"; }

Expected<std::unique_ptr<CacheFileWriter>> CacheFileWriter::create(const std::string& prefix) {
  static std::atomic<uint64_t> next_id{0};
  const std::string final_path = cache_file_path(prefix);
  const std::string temp_path =
    final_path + ".tmp-" + std::to_string(::getpid()) + "-" + std::to_string(next_id++);
  std::FILE* file = std::fopen(temp_path.c_str(), "wb");
  if (file == nullptr)
    return io_error("`cache`: cannot create the file `" + temp_path + "`: " + errno_text());
  std::unique_ptr<CacheFileWriter> writer(new CacheFileWriter(temp_path, final_path, file));
  CONVEYOR_RETURN_IF_ERROR(writer->write(kMagic, sizeof kMagic));
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
  CONVEYOR_RETURN_IF_ERROR(write(header.data(), header.size()));
  CONVEYOR_RETURN_IF_ERROR(write(buffer_.data(), buffer_.size()));
  ++count_;
  return Status::OK();
}

Status CacheFileWriter::commit() {
  std::string trailer;
  put_u64(trailer, kTrailerMarker);
  put_u64(trailer, count_);
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

Expected<std::unique_ptr<CacheFileReader>> CacheFileReader::open(const std::string& prefix) {
  const std::string path = cache_file_path(prefix);
  std::FILE* file = std::fopen(path.c_str(), "rb");
  if (file == nullptr) {
    if (errno == ENOENT)
      return not_found("`cache`: no cache file `" + path + "`");
    return io_error("`cache`: cannot open the file `" + path + "`: " + errno_text());
  }
  std::unique_ptr<CacheFileReader> reader(new CacheFileReader(path, file));
  if (std::fseek(file, 0, SEEK_END) != 0 || (reader->size_ = std::ftell(file)) < 0 ||
      std::fseek(file, 0, SEEK_SET) != 0)
    return io_error("`cache`: cannot find the size of the file `" + path + "`: " + errno_text());
  char magic[sizeof kMagic];
  CONVEYOR_RETURN_IF_ERROR(reader->read_exact(magic, sizeof magic, "header"));
  if (std::memcmp(magic, kMagic, sizeof kMagic) == 0 ||
      std::memcmp(magic, kMagicV1, sizeof kMagicV1) == 0)
    return reader;
  if (std::memcmp(magic, kMagic, sizeof kMagic - 1) == 0)
    return Status{ErrorCode::version_mismatch,
                  "`cache`: the file `" + path + "` is a conveyor cache file of format version " +
                    std::string(1, magic[7]) + ", this build reads versions 1 and 2"};
  return data_loss("`cache`: the file `" + path + "` is not a conveyor cache file (bad magic)");
}

CacheFileReader::~CacheFileReader() { std::fclose(file_); }

Status CacheFileReader::read_exact(void* data, std::size_t n, const char* what) {
  if (n != 0 && std::fread(data, 1, n, file_) != n)
    return data_loss("`cache`: the file `" + path_ + "` is truncated: no complete " + what +
                     " at byte offset " + std::to_string(offset_));
  offset_ += n;
  return Status::OK();
}

Status CacheFileReader::read_length(uint64_t& length) {
  unsigned char header[8];
  CONVEYOR_RETURN_IF_ERROR(read_exact(header, sizeof header, "record length"));
  length = get_u64(header);
  if (length == kTrailerMarker) {
    CONVEYOR_RETURN_IF_ERROR(read_exact(header, sizeof header, "trailer"));
    if (get_u64(header) != count_)
      return data_loss("`cache`: the file `" + path_ + "` says it holds " +
                       std::to_string(get_u64(header)) + " elements but has " +
                       std::to_string(count_));
    ended_ = true;
    return Status::OK();
  }
  if (length > static_cast<uint64_t>(size_) - offset_) // checked before allocating or seeking
    return data_loss("`cache`: the file `" + path_ +
                     "` has a corrupt record length at byte offset " +
                     std::to_string(offset_ - sizeof header));
  return Status::OK();
}

Status CacheFileReader::read(Element& element, bool& end) {
  end = ended_;
  if (ended_)
    return Status::OK();
  uint64_t length = 0;
  CONVEYOR_RETURN_IF_ERROR(read_length(length));
  if (ended_) {
    end = true;
    return Status::OK();
  }
  const uint64_t record_offset = offset_;
  buffer_.resize(length);
  CONVEYOR_RETURN_IF_ERROR(read_exact(buffer_.data(), buffer_.size(), "record"));
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
    if (!ended_)
      CONVEYOR_RETURN_IF_ERROR(read_length(length));
    if (ended_)
      return data_loss("`cache`: the file `" + path_ + "` holds " + std::to_string(count_) +
                       " elements, fewer than the " + std::to_string(target) +
                       " a checkpoint had read from it (it changed since)");
    if (std::fseek(file_, static_cast<long>(length), SEEK_CUR) != 0)
      return io_error("`cache`: cannot seek in the file `" + path_ + "`: " + errno_text());
    offset_ += length;
    ++count_;
  }
  return Status::OK();
}

} // namespace conveyor::kernels
