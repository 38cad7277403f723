// Files under the file sources (text_lines, tfrecord, list_files): glob patterns and compressed
// byte streams.
//
// Glob patterns: an entry of a source's `files` that contains `*`, `?` or `[` is a POSIX glob
// (glob(3), no brace or tilde expansion); it expands to the matching paths sorted by byte order
// (deterministic, locale-independent), and a pattern that matches nothing is a not_found error
// naming it. Other entries are file names, used as they are (a missing one fails when it is
// opened). A backslash escapes a pattern character: escape_glob() gives the pattern that matches
// exactly one given name (used where expanded names are written back into a graph).
//
// URLs: an entry starting with http:// or https:// (http.hpp) is an object name, never a pattern,
// and is opened over HTTP; `?` in it is its query.
//
// FileCompression: "" (none), "ZLIB" (an RFC 1950 zlib stream) or "GZIP" (RFC 1952; concatenated
// members are read one after the other), exactly as TensorFlow's TFRecordOptions and
// TextLineDataset name them. The whole file is one compressed stream.
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "pipeline/runtime/status.hpp"

namespace conveyor {

class PathPolicy; // pipeline/io/path_policy.hpp

bool has_glob_chars(std::string_view entry);
std::string escape_glob(std::string_view name);

// The paths matching one glob pattern, sorted; not_found (naming `op` and the pattern) when none.
// With a policy (a worker's --allow-path roots), the directory the pattern starts in must be one
// it may list before anything is listed: permission_denied otherwise (each match is checked
// again when it is opened).
Expected<std::vector<std::string>> glob_sorted(const std::string& op, const std::string& pattern,
                                               const PathPolicy* paths = nullptr);
// Every entry expanded in order: patterns to their sorted matches, file names unchanged.
Expected<std::vector<std::string>> expand_file_patterns(const std::string& op,
                                                        const std::vector<std::string>& entries,
                                                        const PathPolicy* paths = nullptr);

enum class FileCompression : unsigned char { none, zlib, gzip };
// "" / "ZLIB" / "GZIP"; invalid_argument naming `what` (e.g. "`tfrecord` argument `compression_type`").
Expected<FileCompression> compression_from_name(std::string_view name, const std::string& what);
const char* compression_name(FileCompression c); // "", "ZLIB", "GZIP"

// The raw bytes of a local file or of an HTTP(S) object (http.hpp), before decompression.
class ByteSource {
public:
  // `what` names the file in errors: "<what> <path> does not exist".
  static Expected<std::unique_ptr<ByteSource>> open(const std::string& name,
                                                    const std::string& what = "file");
  virtual ~ByteSource() = default;
  // Reads up to n bytes into `into`; `got` < n only at the end.
  virtual Status read(void* into, std::size_t n, std::size_t& got) = 0;
  virtual int64_t size() const = 0; // bytes; -1 when unknown
  virtual int fd() const = 0;       // -1 when it is not a local file
};

// Reads a file's or an object's (decompressed) bytes. Errors name the path; a corrupt compressed stream is
// data_loss naming the offset in the decompressed stream where it broke.
class InputStream {
public:
  // `what` names the file in errors: "<what> <path> does not exist".
  static Expected<std::unique_ptr<InputStream>>
  open(const std::string& path, FileCompression compression, const std::string& what = "file");
  virtual ~InputStream() = default;
  // Reads up to n bytes into `into`; `got` < n only at the end of the stream.
  virtual Status read(void* into, std::size_t n, std::size_t& got) = 0;
  // The opened file's descriptor, for checks on what was really opened (path confinement);
  // -1 for a URL.
  virtual int fd() const = 0;
  const std::string& path() const { return path_; }

protected:
  explicit InputStream(std::string path) : path_(std::move(path)) {}
  std::string path_;
};

// Writes a file, compressing when asked. close() finishes the stream; the destructor closes too.
class OutputStream {
public:
  static Expected<std::unique_ptr<OutputStream>>
  open(const std::string& path, FileCompression compression, const std::string& what = "file");
  virtual ~OutputStream() = default;
  virtual Status write(const void* data, std::size_t n) = 0;
  virtual Status close() = 0;
  const std::string& path() const { return path_; }

protected:
  explicit OutputStream(std::string path) : path_(std::move(path)) {}
  std::string path_;
};

} // namespace conveyor
