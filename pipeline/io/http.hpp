// HTTP(S) objects as file names: every file source (text_lines, tfrecord, csv) accepts an
// `http://` or `https://` URL wherever it accepts a path. An object is read front to back in
// ranged GETs (`Range: bytes=a-b`, kHttpChunkBytes at a time), so a failed request resumes where
// the last one ended instead of starting over. A server that ignores Range (200 instead of 206)
// is read in one request, held in memory.
//
// Failures: 5xx, 408, 429, connection errors, stalls and short bodies are retried with
// exponential backoff (HttpOptions::max_retries times per request); when the retries run out the
// read fails with an error naming the URL and the last cause. A body shorter than its
// Content-Length or than the range asked for is never passed on as a short object: it is retried,
// then data_loss. 404/410 are not_found, 401/403 permission_denied, redirects are refused (they
// would lead outside --allow-url), all without retrying.
//
// Secrets: headers come from a file (HttpOptions::headers_file, `Name: value` lines) and are never
// shown; URLs in errors and logs go through redact_url(), which drops user:password and the query
// (presigned URLs carry their signature there). TLS peers are always verified.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "pipeline/runtime/status.hpp"

namespace conveyor {

inline constexpr std::size_t kHttpChunkBytes = std::size_t{4} << 20;

// "http://..." or "https://..." (the scheme in any case).
bool is_url(std::string_view name);
// The URL as errors and logs may show it: without user:password, query and fragment
// (a dropped query shows as `?...`).
std::string redact_url(std::string_view url);
// The URL as --allow-url prefixes are compared: scheme and host lower case, a default port
// dropped, `.`/`..` segments resolved, no user:password or fragment. invalid_argument when it is
// not an http(s) URL with a host, or when its path hides a dot or slash in percent-encoding
// (%2e, %2f, %5c), which a server may decode into a path outside the prefix.
Expected<std::string> normalize_url(const std::string& url);

struct HttpOptions {
  int max_retries = 5;                          // retries after the first attempt, per request
  std::chrono::milliseconds retry_backoff{200}; // the first wait; doubles on each retry
  std::chrono::milliseconds max_backoff{10000}; // the longest wait
  std::chrono::milliseconds connect_timeout{10000};
  std::chrono::seconds stall_timeout{30};    // no byte received for this long: a timeout
  std::size_t chunk_bytes = kHttpChunkBytes; // bytes per ranged GET
  std::string ca_file;                       // PEM CA bundle; "" = the system's
  std::string headers_file;                  // `Name: value` lines sent with every request
};

// The process's options. Until set_http_options() (`conveyor worker` calls it with its flags),
// they come from the environment: CONVEYOR_HTTP_HEADERS_FILE, CONVEYOR_HTTP_CA_FILE and
// CONVEYOR_HTTP_RETRIES (the library used in-process, e.g. from Python).
HttpOptions http_options();
void set_http_options(HttpOptions options);
// invalid_argument naming the flag for a negative retry count, a non-positive time, or a CA or
// headers file that cannot be read.
Status check_http_options(const HttpOptions& options);

// The headers of a headers file: `Name: value` per line, blank lines and `#` comments skipped.
// Errors name the file and the line number, never the line (it may hold a secret).
Expected<std::vector<std::string>> read_header_file(const std::string& path);

// One object, read in order. Errors name `what` ("TFRecord file") and the redacted URL.
class HttpReader {
public:
  // Fetches the first range: a missing object fails here, as a missing file fails to open.
  static Expected<std::unique_ptr<HttpReader>> open(const std::string& url,
                                                    const std::string& what = "file");
  ~HttpReader();
  HttpReader(const HttpReader&) = delete;
  HttpReader& operator=(const HttpReader&) = delete;

  // Reads up to n bytes; got < n only at the end of the object.
  Status read(void* into, std::size_t n, std::size_t& got);
  // The object's size in bytes, -1 when the server does not say.
  int64_t size() const { return size_; }
  // Requests that failed and were tried again, over this reader's life (for tests and logs).
  int retries() const { return retries_; }

  struct Response; // one response, as libcurl's callbacks fill it (http.cpp)

private:
  HttpReader(std::string url, std::string what, HttpOptions options);
  Status start();
  Status fetch();                           // the next range after what was read, with retries
  Status attempt(Response& r, bool& retry); // one request
  std::string url_;
  std::string shown_; // redacted
  std::string what_;
  HttpOptions options_;
  void* curl_ = nullptr;    // CURL*
  void* headers_ = nullptr; // curl_slist*
  std::string buffer_;      // fetched bytes not read yet, from pos_
  std::size_t pos_ = 0;
  uint64_t next_ = 0; // object offset of the first byte not fetched yet
  int64_t size_ = -1;
  std::string etag_;
  bool whole_ = false; // the server sent the whole object (no range support)
  bool ended_ = false;
  int retries_ = 0;
  Status error_; // sticky
};

} // namespace conveyor
