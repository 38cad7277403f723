// Glob expansion and (de)compressing file streams (files.hpp), on glob(3) and zlib.
#include "pipeline/io/files.hpp"
#include "pipeline/io/http.hpp"
#include "pipeline/io/path_policy.hpp"

#include <glob.h>
#include <sys/stat.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace conveyor {

namespace {

std::string os_error(const std::string& what, const std::string& path) {
  return what + " " + path + ": " + std::strerror(errno);
}

Expected<std::FILE*> open_file(const std::string& path, const char* mode, const std::string& what) {
  std::FILE* f = std::fopen(path.c_str(), mode);
  if (f == nullptr) {
    if (errno == ENOENT && mode[0] == 'r')
      return not_found(what + " " + path + " does not exist");
    return io_error(os_error("cannot open " + what, path));
  }
  return f;
}

constexpr std::size_t kBufferSize = std::size_t{1} << 16;
constexpr int kZlibWindowBits = 15;
constexpr int kGzipWindowBits = 16 + 15;

// --- reading

class FileSource final : public ByteSource {
public:
  FileSource(std::string path, std::FILE* f) : path_(std::move(path)), file_(f) {}
  ~FileSource() override { std::fclose(file_); }
  int fd() const override { return ::fileno(file_); }
  int64_t size() const override {
    struct stat st {};
    return ::fstat(fd(), &st) == 0 && S_ISREG(st.st_mode) ? static_cast<int64_t>(st.st_size) : -1;
  }

  Status read(void* into, std::size_t n, std::size_t& got) override {
    got = std::fread(into, 1, n, file_);
    if (got < n && std::ferror(file_))
      return io_error(os_error("cannot read", path_));
    return Status::OK();
  }

private:
  std::string path_;
  std::FILE* file_;
};

class HttpSource final : public ByteSource {
public:
  explicit HttpSource(std::unique_ptr<HttpReader> r) : reader_(std::move(r)) {}
  int fd() const override { return -1; }
  int64_t size() const override { return reader_->size(); }
  Status read(void* into, std::size_t n, std::size_t& got) override {
    return reader_->read(into, n, got);
  }

private:
  std::unique_ptr<HttpReader> reader_;
};

class PlainInput final : public InputStream {
public:
  PlainInput(std::string path, std::unique_ptr<ByteSource> source)
    : InputStream(std::move(path)), source_(std::move(source)) {}
  int fd() const override { return source_->fd(); }
  Status read(void* into, std::size_t n, std::size_t& got) override {
    return source_->read(into, n, got);
  }

private:
  std::unique_ptr<ByteSource> source_;
};

class InflatingInput final : public InputStream {
public:
  InflatingInput(std::string path, std::unique_ptr<ByteSource> source, FileCompression c)
    : InputStream(std::move(path)), source_(std::move(source)), compression_(c), in_(kBufferSize) {}
  ~InflatingInput() override {
    if (initialized_)
      inflateEnd(&zs_);
  }
  int fd() const override { return source_->fd(); }

  Status init() {
    zs_ = z_stream{};
    if (inflateInit2(&zs_, compression_ == FileCompression::gzip ? kGzipWindowBits
                                                                 : kZlibWindowBits) != Z_OK)
      return internal_error("zlib cannot start inflating " + path_);
    initialized_ = true;
    return Status::OK();
  }

  Status read(void* into, std::size_t n, std::size_t& got) override {
    got = 0;
    if (!error_.ok())
      return error_;
    auto* out = static_cast<unsigned char*>(into);
    while (got < n && !ended_) {
      if (zs_.avail_in == 0 && !file_eof_) {
        std::size_t r = 0;
        if (Status st = source_->read(in_.data(), in_.size(), r); !st.ok())
          return error_ = st;
        if (r < in_.size())
          file_eof_ = true;
        zs_.next_in = in_.data();
        zs_.avail_in = static_cast<uInt>(r);
      }
      if (zs_.avail_in == 0 && file_eof_) {
        if (in_member_)
          return error_ = data_loss(std::string(compression_name(compression_)) + " stream of " +
                                    path_ + " is truncated after " + std::to_string(produced_) +
                                    " decompressed bytes");
        ended_ = true; // a clean end between members (or an empty file)
        break;
      }
      const std::size_t want = std::min<std::size_t>(n - got, 1u << 30);
      zs_.next_out = out + got;
      zs_.avail_out = static_cast<uInt>(want);
      in_member_ = true;
      const int rc = inflate(&zs_, Z_NO_FLUSH);
      const std::size_t produced = want - zs_.avail_out;
      got += produced;
      produced_ += produced;
      if (rc == Z_STREAM_END) {
        // Another member may follow (gzip allows concatenation); inflate it after a reset.
        in_member_ = false;
        if (inflateReset(&zs_) != Z_OK)
          return error_ = internal_error("zlib cannot reset while inflating " + path_);
        continue;
      }
      if (rc != Z_OK && rc != Z_BUF_ERROR)
        return error_ = data_loss(
                 std::string(compression_name(compression_)) + " stream of " + path_ +
                 " is corrupt after " + std::to_string(produced_) + " decompressed bytes" +
                 (zs_.msg != nullptr ? std::string(": ") + zs_.msg : std::string()));
      if (rc == Z_BUF_ERROR && produced == 0 && zs_.avail_in != 0)
        return error_ = internal_error("zlib made no progress inflating " + path_);
    }
    return Status::OK();
  }

private:
  std::unique_ptr<ByteSource> source_;
  FileCompression compression_;
  std::vector<unsigned char> in_;
  z_stream zs_{};
  bool initialized_ = false;
  bool file_eof_ = false;
  bool in_member_ = false; // inside a compressed member that has not reached its end
  bool ended_ = false;
  uint64_t produced_ = 0;
  Status error_; // sticky: a broken stream stays broken
};

// --- writing

class PlainOutput final : public OutputStream {
public:
  PlainOutput(std::string path, std::FILE* f) : OutputStream(std::move(path)), file_(f) {}
  ~PlainOutput() override { (void)close(); }

  Status write(const void* data, std::size_t n) override {
    if (file_ == nullptr)
      return failed_precondition("file " + path_ + " is closed");
    if (std::fwrite(data, 1, n, file_) != n)
      return io_error(os_error("cannot write to", path_));
    return Status::OK();
  }

  Status close() override {
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

private:
  std::FILE* file_;
};

class DeflatingOutput final : public OutputStream {
public:
  DeflatingOutput(std::string path, std::unique_ptr<OutputStream> file)
    : OutputStream(std::move(path)), file_(std::move(file)), out_(kBufferSize) {}
  ~DeflatingOutput() override {
    (void)close();
    if (initialized_)
      deflateEnd(&zs_);
  }

  Status init(FileCompression c) {
    zs_ = z_stream{};
    const int bits = c == FileCompression::gzip ? kGzipWindowBits : kZlibWindowBits;
    if (deflateInit2(&zs_, Z_DEFAULT_COMPRESSION, Z_DEFLATED, bits, 8, Z_DEFAULT_STRATEGY) != Z_OK)
      return internal_error("zlib cannot start deflating " + path_);
    initialized_ = true;
    return Status::OK();
  }

  Status write(const void* data, std::size_t n) override {
    if (closed_)
      return failed_precondition("file " + path_ + " is closed");
    const auto* p = static_cast<const unsigned char*>(data);
    while (n > 0) {
      const std::size_t chunk = std::min<std::size_t>(n, 1u << 30);
      zs_.next_in = const_cast<unsigned char*>(p); // zlib's API is not const-correct
      zs_.avail_in = static_cast<uInt>(chunk);
      CONVEYOR_RETURN_IF_ERROR(pump(Z_NO_FLUSH));
      p += chunk;
      n -= chunk;
    }
    return Status::OK();
  }

  Status close() override {
    if (closed_)
      return Status::OK();
    closed_ = true;
    zs_.next_in = nullptr;
    zs_.avail_in = 0;
    Status finished = pump(Z_FINISH);
    Status closed = file_->close();
    return finished.ok() ? closed : finished;
  }

private:
  Status pump(int flush) {
    for (;;) {
      zs_.next_out = out_.data();
      zs_.avail_out = static_cast<uInt>(out_.size());
      const int rc = deflate(&zs_, flush);
      if (rc == Z_STREAM_ERROR)
        return internal_error("zlib failed deflating " + path_);
      const std::size_t produced = out_.size() - zs_.avail_out;
      if (produced > 0)
        CONVEYOR_RETURN_IF_ERROR(file_->write(out_.data(), produced));
      if (flush == Z_FINISH ? rc == Z_STREAM_END : (zs_.avail_in == 0 && zs_.avail_out != 0))
        return Status::OK();
    }
  }

  std::unique_ptr<OutputStream> file_;
  std::vector<unsigned char> out_;
  z_stream zs_{};
  bool initialized_ = false;
  bool closed_ = false;
};

} // namespace

bool has_glob_chars(std::string_view entry) {
  return !is_url(entry) && entry.find_first_of("*?[") != std::string_view::npos;
}

std::string escape_glob(std::string_view name) {
  if (is_url(name)) // never expanded: escaping would change the URL
    return std::string(name);
  std::string out;
  for (char c : name) {
    if (c == '*' || c == '?' || c == '[' || c == ']' || c == '\\')
      out += '\\';
    out += c;
  }
  return out;
}

Expected<std::vector<std::string>> glob_sorted(const std::string& op, const std::string& pattern,
                                               const PathPolicy* paths) {
  if (is_url(pattern))
    return invalid_argument("`" + op + "`: `" + redact_url(pattern) +
                            "` is a URL, and HTTP has no directory listing: pass URLs to the file "
                            "source itself (text_lines, tfrecord, csv), or read a list of them "
                            "with text_lines");
  if (paths != nullptr) { // the directory the wildcards start in, before it is listed
    const auto wildcard = pattern.find_first_of("*?[");
    const auto slash =
      pattern.rfind('/', wildcard == std::string::npos ? std::string::npos : wildcard);
    const std::string dir =
      slash == std::string::npos ? "." : pattern.substr(0, slash == 0 ? 1 : slash);
    CONVEYOR_RETURN_IF_ERROR(paths->check(dir, PathPolicy::Access::list, op));
  }
  glob_t matches{};
  const int rc = ::glob(pattern.c_str(), GLOB_NOSORT, nullptr, &matches);
  std::vector<std::string> files;
  if (rc == 0)
    files.assign(matches.gl_pathv, matches.gl_pathv + matches.gl_pathc);
  ::globfree(&matches);
  if (rc == GLOB_NOMATCH)
    return not_found("`" + op + "`: no files match the pattern `" + pattern + "`");
  if (rc != 0)
    return io_error("`" + op + "`: cannot read the directories of the pattern `" + pattern +
                    "` (glob error " + std::to_string(rc) + ")");
  std::sort(files.begin(), files.end()); // byte order, independent of the locale
  return files;
}

Expected<std::vector<std::string>> expand_file_patterns(const std::string& op,
                                                        const std::vector<std::string>& entries,
                                                        const PathPolicy* paths) {
  std::vector<std::string> out;
  out.reserve(entries.size());
  for (const std::string& entry : entries) {
    if (!has_glob_chars(entry)) {
      // A URL is checked here already, so that a job reading outside --allow-url is refused
      // where it is made (the dispatcher, for DYNAMIC sharding), not only when it is read.
      if (paths != nullptr && is_url(entry))
        CONVEYOR_RETURN_IF_ERROR(paths->check(entry, PathPolicy::Access::read, op));
      out.push_back(entry);
      continue;
    }
    auto matches = glob_sorted(op, entry, paths);
    if (!matches.ok())
      return matches.status();
    out.insert(out.end(), matches->begin(), matches->end());
  }
  return out;
}

Expected<FileCompression> compression_from_name(std::string_view name, const std::string& what) {
  if (name.empty())
    return FileCompression::none;
  if (name == "ZLIB")
    return FileCompression::zlib;
  if (name == "GZIP")
    return FileCompression::gzip;
  return invalid_argument(what + " must be \"\", \"ZLIB\" or \"GZIP\", got \"" + std::string(name) +
                          "\"");
}

const char* compression_name(FileCompression c) {
  switch (c) {
    case FileCompression::none: return "";
    case FileCompression::zlib: return "ZLIB";
    case FileCompression::gzip: return "GZIP";
  }
  return "?";
}

Expected<std::unique_ptr<ByteSource>> ByteSource::open(const std::string& name,
                                                       const std::string& what) {
  if (is_url(name)) {
    auto reader = HttpReader::open(name, what);
    if (!reader.ok())
      return reader.status();
    return std::unique_ptr<ByteSource>(new HttpSource(std::move(*reader)));
  }
  auto f = open_file(name, "rbe", what);
  if (!f.ok())
    return f.status();
  return std::unique_ptr<ByteSource>(new FileSource(name, *f));
}

Expected<std::unique_ptr<InputStream>>
InputStream::open(const std::string& path, FileCompression compression, const std::string& what) {
  auto source = ByteSource::open(path, what);
  if (!source.ok())
    return source.status();
  const std::string shown = is_url(path) ? redact_url(path) : path;
  if (compression == FileCompression::none)
    return std::unique_ptr<InputStream>(new PlainInput(shown, std::move(*source)));
  auto stream = std::make_unique<InflatingInput>(shown, std::move(*source), compression);
  CONVEYOR_RETURN_IF_ERROR(stream->init());
  return std::unique_ptr<InputStream>(std::move(stream));
}

Expected<std::unique_ptr<OutputStream>>
OutputStream::open(const std::string& path, FileCompression compression, const std::string& what) {
  auto f = open_file(path, "wbe", what + " for writing");
  if (!f.ok())
    return f.status();
  std::unique_ptr<OutputStream> plain(new PlainOutput(path, *f));
  if (compression == FileCompression::none)
    return plain;
  auto stream = std::make_unique<DeflatingOutput>(path, std::move(plain));
  CONVEYOR_RETURN_IF_ERROR(stream->init(compression));
  return std::unique_ptr<OutputStream>(std::move(stream));
}

} // namespace conveyor
