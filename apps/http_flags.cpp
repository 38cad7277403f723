#include "apps/http_flags.hpp"

#include "pipeline/io/http.hpp"

namespace conveyor::apps {

void add_allow_url_option(po::options_description& options, const char* who) {
  // clang-format off
  options.add_options()(
    "allow-url", po::value<std::vector<std::string>>()->composing()->value_name("PREFIX"),
    (std::string("http(s) URL prefix ") + who +
     " (repeatable; e.g. https://data.example.com/train/; `..` resolved). Without it URLs are "
     "refused")
      .c_str());
  // clang-format on
}

Status apply_allow_url_option(const po::variables_map& vm, std::vector<std::string>& allowed) {
  if (!vm.count("allow-url"))
    return Status::OK();
  for (const std::string& prefix : vm["allow-url"].as<std::vector<std::string>>()) {
    if (!is_url(prefix))
      return invalid_argument("`--allow-url` must be an http:// or https:// URL prefix, got `" +
                              redact_url(prefix) + "`");
    auto normal = normalize_url(prefix);
    if (!normal.ok())
      return invalid_argument("`--allow-url` " + normal.status().message());
    allowed.push_back(prefix);
  }
  return Status::OK();
}

void add_http_client_options(po::options_description& options) {
  const HttpOptions d;
  // clang-format off
  options.add_options()
      ("http-headers-file", po::value<std::string>()->value_name("FILE"),
       "`Name: value` lines sent with every HTTP(S) request of a dataset, e.g. an Authorization "
       "header (default: $CONVEYOR_HTTP_HEADERS_FILE); never logged")
      ("http-ca-file", po::value<std::string>()->value_name("FILE"),
       "PEM CA bundle that HTTPS servers are verified against (default: $CONVEYOR_HTTP_CA_FILE, "
       "else the system's); verification is always on")
      ("http-retries", po::value<int64_t>()->value_name("N"),
       ("retries of a failed HTTP request (5xx, 408, 429, reset, timeout, truncated body) before "
        "the read fails (default: $CONVEYOR_HTTP_RETRIES, else " + std::to_string(d.max_retries) +
        ")").c_str())
      ("http-retry-backoff", po::value<int64_t>()->value_name("MS"),
       ("the wait before the first HTTP retry; it doubles on each one, up to " +
        std::to_string(d.max_backoff.count()) + " ms (default: " +
        std::to_string(d.retry_backoff.count()) + ")").c_str());
  // clang-format on
}

Status apply_http_client_options(const po::variables_map& vm) {
  HttpOptions o = http_options();
  if (vm.count("http-headers-file"))
    o.headers_file = vm["http-headers-file"].as<std::string>();
  if (vm.count("http-ca-file"))
    o.ca_file = vm["http-ca-file"].as<std::string>();
  if (vm.count("http-retries")) {
    const int64_t n = vm["http-retries"].as<int64_t>();
    if (n < 0 || n > 100)
      return invalid_argument("`--http-retries` must be between 0 and 100, got " +
                              std::to_string(n));
    o.max_retries = static_cast<int>(n);
  }
  if (vm.count("http-retry-backoff")) {
    auto ms = check_millis("--http-retry-backoff", vm["http-retry-backoff"].as<int64_t>());
    if (!ms.ok())
      return ms.status();
    o.retry_backoff = *ms;
    o.max_backoff = std::max(o.max_backoff, o.retry_backoff);
  }
  CONVEYOR_RETURN_IF_ERROR(check_http_options(o));
  set_http_options(std::move(o));
  return Status::OK();
}

} // namespace conveyor::apps
