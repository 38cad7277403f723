// HTTP(S) objects on libcurl (http.hpp): ranged GETs with retries, URL redaction and
// normalisation, and the process's HTTP options.
#include "pipeline/io/http.hpp"

#include <curl/curl.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>
#include <thread>

namespace conveyor {

namespace {

std::string lower(std::string s) {
  for (char& c : s)
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

bool starts_with_ci(std::string_view s, std::string_view prefix) {
  if (s.size() < prefix.size())
    return false;
  for (std::size_t i = 0; i < prefix.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(s[i])) != prefix[i])
      return false;
  return true;
}

void global_init() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

std::mutex options_mu;
bool options_set = false;
HttpOptions options_value;

HttpOptions options_from_environment() {
  HttpOptions o;
  if (const char* v = std::getenv("CONVEYOR_HTTP_HEADERS_FILE"))
    o.headers_file = v;
  if (const char* v = std::getenv("CONVEYOR_HTTP_CA_FILE"))
    o.ca_file = v;
  if (const char* v = std::getenv("CONVEYOR_HTTP_RETRIES")) {
    char* end = nullptr;
    const long n = std::strtol(v, &end, 10);
    if (end != v && *end == '\0' && n >= 0 && n <= 100)
      o.max_retries = static_cast<int>(n);
  }
  return o;
}

std::string trim(std::string_view s) {
  std::size_t b = 0, e = s.size();
  while (b < e && (s[b] == ' ' || s[b] == '\t' || s[b] == '\r' || s[b] == '\n'))
    ++b;
  while (e > b && (s[e - 1] == ' ' || s[e - 1] == '\t' || s[e - 1] == '\r' || s[e - 1] == '\n'))
    --e;
  return std::string(s.substr(b, e - b));
}

// "bytes a-b/total" (total may be "*"); "bytes */total" on a 416.
struct ContentRange {
  bool valid = false;
  int64_t first = -1, last = -1, total = -1;
};

ContentRange parse_content_range(const std::string& v) {
  ContentRange r;
  std::string s = lower(trim(v));
  if (s.rfind("bytes ", 0) != 0)
    return r;
  s = s.substr(6);
  const auto slash = s.find('/');
  if (slash == std::string::npos)
    return r;
  const std::string range = s.substr(0, slash), total = s.substr(slash + 1);
  if (total != "*")
    r.total = std::strtoll(total.c_str(), nullptr, 10);
  if (range != "*") {
    const auto dash = range.find('-');
    if (dash == std::string::npos)
      return r;
    r.first = std::strtoll(range.substr(0, dash).c_str(), nullptr, 10);
    r.last = std::strtoll(range.substr(dash + 1).c_str(), nullptr, 10);
  }
  r.valid = true;
  return r;
}

} // namespace

// --- URLs

bool is_url(std::string_view name) {
  return starts_with_ci(name, "http://") || starts_with_ci(name, "https://");
}

std::string redact_url(std::string_view url) {
  const auto scheme_end = url.find("://");
  if (scheme_end == std::string_view::npos)
    return std::string(url.substr(0, url.find_first_of("?#")));
  const std::size_t host_begin = scheme_end + 3;
  std::size_t authority_end = url.find_first_of("/?#", host_begin);
  if (authority_end == std::string_view::npos)
    authority_end = url.size();
  std::string_view authority = url.substr(host_begin, authority_end - host_begin);
  if (const auto at = authority.rfind('@'); at != std::string_view::npos)
    authority = authority.substr(at + 1);
  std::string out(url.substr(0, host_begin));
  out += authority;
  std::string_view rest = url.substr(authority_end);
  const auto cut = rest.find_first_of("?#");
  out += rest.substr(0, cut);
  if (cut != std::string_view::npos && rest[cut] == '?')
    out += "?...";
  return out;
}

Expected<std::string> normalize_url(const std::string& url) {
  const std::string shown = redact_url(url);
  if (!is_url(url))
    return invalid_argument("`" + shown + "` is not an http:// or https:// URL");
  CURLU* h = curl_url();
  if (h == nullptr)
    return internal_error("libcurl cannot allocate a URL handle");
  auto part = [&](CURLUPart which, unsigned flags, std::string& out) {
    char* p = nullptr;
    const CURLUcode rc = curl_url_get(h, which, &p, flags);
    if (rc == CURLUE_OK && p != nullptr)
      out = p;
    curl_free(p);
    return rc;
  };
  std::string scheme, host, port, path, query;
  const CURLUcode rc = curl_url_set(h, CURLUPART_URL, url.c_str(), 0);
  if (rc == CURLUE_OK) {
    part(CURLUPART_SCHEME, 0, scheme);
    part(CURLUPART_HOST, 0, host);
    part(CURLUPART_PORT, CURLU_NO_DEFAULT_PORT, port);
    part(CURLUPART_PATH, 0, path);
    part(CURLUPART_QUERY, 0, query);
  }
  curl_url_cleanup(h);
  if (rc != CURLUE_OK)
    return invalid_argument("`" + shown + "` is not a valid URL: " + curl_url_strerror(rc));
  if (host.empty())
    return invalid_argument("`" + shown + "` has no host");
  const std::string lpath = lower(path);
  for (const char* hidden : {"%2e", "%2f", "%5c"})
    if (lpath.find(hidden) != std::string::npos)
      return invalid_argument("`" + shown + "` hides a `.`, `/` or `\\` in percent-encoding (" +
                              hidden + ") in its path; write it out");
  std::string out = lower(scheme) + "://" + lower(host);
  if (!port.empty())
    out += ":" + port;
  out += path.empty() ? "/" : path;
  if (!query.empty())
    out += "?" + query;
  return out;
}

// --- options

HttpOptions http_options() {
  std::lock_guard<std::mutex> lock(options_mu);
  if (!options_set) {
    options_value = options_from_environment();
    options_set = true;
  }
  return options_value;
}

void set_http_options(HttpOptions options) {
  std::lock_guard<std::mutex> lock(options_mu);
  options_value = std::move(options);
  options_set = true;
}

Status check_http_options(const HttpOptions& o) {
  if (o.max_retries < 0)
    return invalid_argument("`--http-retries` must be >= 0, got " + std::to_string(o.max_retries));
  if (o.retry_backoff.count() <= 0)
    return invalid_argument("`--http-retry-backoff` must be positive, got " +
                            std::to_string(o.retry_backoff.count()) + " ms");
  if (o.max_backoff < o.retry_backoff)
    return invalid_argument("the longest HTTP retry wait must not be shorter than the first");
  if (o.connect_timeout.count() <= 0 || o.stall_timeout.count() <= 0)
    return invalid_argument("HTTP timeouts must be positive");
  if (o.chunk_bytes == 0)
    return invalid_argument("the HTTP range size must be positive");
  if (!o.ca_file.empty() && !std::ifstream(o.ca_file))
    return invalid_argument("`--http-ca-file` " + o.ca_file + " cannot be read");
  if (!o.headers_file.empty()) {
    auto headers = read_header_file(o.headers_file);
    if (!headers.ok())
      return headers.status();
  }
  return Status::OK();
}

Expected<std::vector<std::string>> read_header_file(const std::string& path) {
  std::ifstream in(path);
  if (!in)
    return invalid_argument("the HTTP headers file " + path +
                            " (--http-headers-file / CONVEYOR_HTTP_HEADERS_FILE) cannot be read: " +
                            std::strerror(errno));
  std::vector<std::string> headers;
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    const std::string t = trim(line);
    if (t.empty() || t[0] == '#')
      continue;
    const auto colon = t.find(':');
    bool name_ok = colon != std::string::npos && colon > 0;
    for (std::size_t i = 0; name_ok && i < colon; ++i)
      name_ok = std::isalnum(static_cast<unsigned char>(t[i])) || t[i] == '-' || t[i] == '_';
    if (!name_ok)
      return invalid_argument("the HTTP headers file " + path + " line " + std::to_string(number) +
                              " is not `Name: value`");
    headers.push_back(t.substr(0, colon) + ": " + trim(std::string_view(t).substr(colon + 1)));
  }
  return headers;
}

// --- the reader

struct HttpReader::Response {
  std::string body;
  std::size_t limit = 0; // the most body bytes a 206 may carry (the range asked for)
  bool overflow = false; // the server sent more than asked
  std::string content_range;
  std::string etag;
  long status = 0;
};

namespace {

std::size_t on_body(char* data, std::size_t size, std::size_t count, void* user) {
  auto* r = static_cast<HttpReader::Response*>(user);
  const std::size_t n = size * count;
  if (r->status == 0 || r->status == 206) {
    if (r->body.size() + n > r->limit) {
      r->overflow = true;
      return 0; // aborts the transfer
    }
  }
  r->body.append(data, n);
  return n;
}

std::size_t on_header(char* data, std::size_t size, std::size_t count, void* user) {
  auto* r = static_cast<HttpReader::Response*>(user);
  const std::size_t n = size * count;
  std::string_view line(data, n);
  if (starts_with_ci(line, "http/")) { // a new response (after a 100 Continue): start over
    r->content_range.clear();
    r->etag.clear();
    const auto sp = line.find(' ');
    r->status = sp == std::string_view::npos ? 0 : std::strtol(data + sp + 1, nullptr, 10);
    return n;
  }
  const auto colon = line.find(':');
  if (colon == std::string_view::npos)
    return n;
  const std::string name = lower(std::string(line.substr(0, colon)));
  if (name == "content-range")
    r->content_range = trim(line.substr(colon + 1));
  else if (name == "etag")
    r->etag = trim(line.substr(colon + 1));
  return n;
}

bool retryable_curl(CURLcode rc) {
  switch (rc) {
    case CURLE_COULDNT_CONNECT:
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_OPERATION_TIMEDOUT:
    case CURLE_PARTIAL_FILE:
    case CURLE_RECV_ERROR:
    case CURLE_SEND_ERROR:
    case CURLE_GOT_NOTHING:
    case CURLE_HTTP2:
    case CURLE_HTTP2_STREAM:
    case CURLE_SSL_CONNECT_ERROR: return true;
    default: return false;
  }
}

} // namespace

HttpReader::HttpReader(std::string url, std::string what, HttpOptions options)
  : url_(std::move(url)), shown_(redact_url(url_)), what_(std::move(what)),
    options_(std::move(options)) {}

HttpReader::~HttpReader() {
  if (curl_ != nullptr)
    curl_easy_cleanup(static_cast<CURL*>(curl_));
  if (headers_ != nullptr)
    curl_slist_free_all(static_cast<curl_slist*>(headers_));
}

Expected<std::unique_ptr<HttpReader>> HttpReader::open(const std::string& url,
                                                       const std::string& what) {
  std::unique_ptr<HttpReader> reader(new HttpReader(url, what, http_options()));
  CONVEYOR_RETURN_IF_ERROR(reader->start());
  return reader;
}

Status HttpReader::start() {
  global_init();
  CURL* c = curl_easy_init();
  if (c == nullptr)
    return internal_error("libcurl cannot start a request for " + shown_);
  curl_ = c;
  curl_slist* list = nullptr;
  if (!options_.headers_file.empty()) {
    auto headers = read_header_file(options_.headers_file);
    if (!headers.ok())
      return headers.status();
    for (const std::string& h : *headers)
      list = curl_slist_append(list, h.c_str());
  }
  headers_ = list;
  curl_easy_setopt(c, CURLOPT_URL, url_.c_str());
#if LIBCURL_VERSION_NUM >= 0x075500
  curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
#else
  curl_easy_setopt(c, CURLOPT_PROTOCOLS, long{CURLPROTO_HTTP | CURLPROTO_HTTPS});
#endif
  curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L); // a redirect could leave --allow-url
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);       // worker threads: no SIGALRM for timeouts
  curl_easy_setopt(c, CURLOPT_SSL_VERIFYPEER, 1L);
  curl_easy_setopt(c, CURLOPT_SSL_VERIFYHOST, 2L);
  if (!options_.ca_file.empty())
    curl_easy_setopt(c, CURLOPT_CAINFO, options_.ca_file.c_str());
  curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS,
                   static_cast<long>(options_.connect_timeout.count()));
  curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1L);
  curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, static_cast<long>(options_.stall_timeout.count()));
  curl_easy_setopt(c, CURLOPT_USERAGENT, "conveyor");
  if (list != nullptr)
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, list);
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, &on_body);
  curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, &on_header);
  return error_ = fetch();
}

Status HttpReader::attempt(Response& r, bool& retry) {
  retry = false;
  CURL* c = static_cast<CURL*>(curl_);
  const uint64_t last = next_ + options_.chunk_bytes - 1;
  const std::string range = std::to_string(next_) + "-" + std::to_string(last);
  r.limit = options_.chunk_bytes;
  curl_easy_setopt(c, CURLOPT_RANGE, range.c_str());
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &r);
  curl_easy_setopt(c, CURLOPT_HEADERDATA, &r);
  char message[CURL_ERROR_SIZE] = {0};
  curl_easy_setopt(c, CURLOPT_ERRORBUFFER, message);
  const CURLcode rc = curl_easy_perform(c);
  curl_easy_setopt(c, CURLOPT_ERRORBUFFER, nullptr);
  const std::string where = what_ + " " + shown_ + " (bytes " + range + ")";
  if (r.overflow)
    return data_loss(where + ": the server sent more bytes than the range asked for");
  if (rc != CURLE_OK) {
    retry = retryable_curl(rc);
    std::string cause = message[0] != '\0' ? message : curl_easy_strerror(rc);
    while (!cause.empty() && cause.back() == '\n')
      cause.pop_back();
    if (rc == CURLE_PARTIAL_FILE)
      return data_loss(where + ": truncated body: " + cause);
    if (rc == CURLE_PEER_FAILED_VERIFICATION || rc == CURLE_SSL_CACERT_BADFILE)
      return permission_denied(where + ": TLS verification failed: " + cause +
                               " (a private CA goes in --http-ca-file / CONVEYOR_HTTP_CA_FILE)");
    return io_error(where + ": " + cause);
  }
  long status = 0;
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
  const std::string http = " (HTTP " + std::to_string(status) + ")";
  if (status == 404 || status == 410)
    return not_found(what_ + " " + shown_ + " does not exist" + http);
  if (status == 401 || status == 403)
    return permission_denied(what_ + " " + shown_ + ": the server refused access" + http +
                             "; credentials are sent from --http-headers-file / "
                             "CONVEYOR_HTTP_HEADERS_FILE");
  if (status >= 300 && status < 400)
    return failed_precondition(what_ + " " + shown_ + " redirects elsewhere" + http +
                               "; redirects are not followed (they could leave --allow-url): "
                               "use the final URL");
  if (status == 408 || status == 429 || status >= 500) {
    retry = true;
    return io_error(where + ": the server failed" + http);
  }
  if (status != 200 && status != 206 && status != 416)
    return io_error(where + ": unexpected response" + http);
  return Status::OK();
}

Status HttpReader::fetch() {
  Status last;
  int tries = 0;
  for (;; ++tries) {
    Response r;
    bool retry = false;
    Status st = attempt(r, retry);
    if (st.ok()) {
      CURL* c = static_cast<CURL*>(curl_);
      long status = 0;
      curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
      const ContentRange cr = parse_content_range(r.content_range);
      if (!etag_.empty() && !r.etag.empty() && r.etag != etag_)
        return data_loss(what_ + " " + shown_ + " changed while it was being read (ETag " + etag_ +
                         " became " + r.etag + ")");
      if (etag_.empty())
        etag_ = r.etag;
      if (status == 416) { // nothing at or after next_: the end, if the sizes agree
        if (cr.valid && cr.total >= 0)
          size_ = cr.total;
        if (size_ < 0 || static_cast<uint64_t>(size_) <= next_) {
          ended_ = true;
          return Status::OK();
        }
        st = io_error(what_ + " " + shown_ + ": the server refused the range from byte " +
                      std::to_string(next_) + " of " + std::to_string(size_) + " (HTTP 416)");
      } else if (status == 200) {
        // No range support: this is the whole object; skip what was read already.
        curl_off_t length = -1;
        curl_easy_getinfo(c, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &length);
        if (length >= 0 && static_cast<uint64_t>(length) != r.body.size())
          st =
            data_loss(what_ + " " + shown_ + ": truncated body: " + std::to_string(r.body.size()) +
                      " of " + std::to_string(length) + " bytes");
        else if (r.body.size() < next_)
          st = data_loss(what_ + " " + shown_ + " is now " + std::to_string(r.body.size()) +
                         " bytes, but " + std::to_string(next_) + " were read already");
        else {
          size_ = static_cast<int64_t>(r.body.size());
          buffer_.assign(r.body, next_, std::string::npos);
          pos_ = 0;
          next_ = r.body.size();
          whole_ = true;
          return Status::OK();
        }
        retry = true;
      } else { // 206
        const int64_t total = cr.total;
        if (!cr.valid || cr.first != static_cast<int64_t>(next_) || cr.last < cr.first)
          st = io_error(what_ + " " + shown_ + ": the server answered the range from byte " +
                        std::to_string(next_) + " with Content-Range `" + r.content_range + "`");
        else if (size_ >= 0 && total >= 0 && total != size_)
          return data_loss(what_ + " " + shown_ + " changed while it was being read (" +
                           std::to_string(size_) + " bytes, then " + std::to_string(total) + ")");
        else if (static_cast<int64_t>(r.body.size()) != cr.last - cr.first + 1) {
          st =
            data_loss(what_ + " " + shown_ + ": truncated body: " + std::to_string(r.body.size()) +
                      " of the " + std::to_string(cr.last - cr.first + 1) + " bytes from byte " +
                      std::to_string(next_));
          retry = true;
        } else if (total >= 0 && cr.last + 1 < total &&
                   r.body.size() < options_.chunk_bytes) { // a short range before the end
          st = data_loss(what_ + " " + shown_ + ": truncated body: the server sent bytes " +
                         std::to_string(cr.first) + "-" + std::to_string(cr.last) + " of " +
                         std::to_string(total) + " when asked for " + std::to_string(next_) + "-" +
                         std::to_string(next_ + options_.chunk_bytes - 1));
          retry = true;
        } else {
          if (total >= 0)
            size_ = total;
          buffer_ = std::move(r.body);
          pos_ = 0;
          next_ += buffer_.size();
          if (size_ < 0 && buffer_.size() < options_.chunk_bytes)
            ended_ = true; // size unknown: a short range is the end
          return Status::OK();
        }
      }
    }
    last = st;
    if (!retry || tries >= options_.max_retries)
      break;
    ++retries_;
    auto wait = options_.retry_backoff * (int64_t{1} << std::min(tries, 20));
    std::this_thread::sleep_for(std::min<std::chrono::milliseconds>(wait, options_.max_backoff));
  }
  if (tries == 0)
    return last;
  return Status(last.code(), last.message() + " (after " + std::to_string(tries) + " retr" +
                               (tries == 1 ? "y" : "ies") + ")");
}

Status HttpReader::read(void* into, std::size_t n, std::size_t& got) {
  got = 0;
  if (!error_.ok())
    return error_;
  auto* out = static_cast<char*>(into);
  while (got < n) {
    if (pos_ == buffer_.size()) {
      buffer_.clear();
      pos_ = 0;
      if (ended_ || whole_ || (size_ >= 0 && next_ >= static_cast<uint64_t>(size_)))
        break;
      if (Status st = fetch(); !st.ok())
        return error_ = st;
      if (buffer_.empty()) // 416 at the end
        break;
    }
    const std::size_t take = std::min(n - got, buffer_.size() - pos_);
    std::memcpy(out + got, buffer_.data() + pos_, take);
    pos_ += take;
    got += take;
  }
  return Status::OK();
}

} // namespace conveyor
