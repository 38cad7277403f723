// http(s):// objects as file names (pipeline/io/http.hpp) against test/support/http_test_server.py:
// ranged reads, retries after injected faults, truncated bodies as errors, credentials, redaction
// and --allow-url confinement.
#include <doctest/doctest.h>

#include "ops_test_util.hpp"
#include "pipeline/io/files.hpp"
#include "pipeline/io/http.hpp"
#include "pipeline/io/path_policy.hpp"
#include "conveyor/sharding.hpp"
#include "pipeline/io/tfrecord.hpp"
#include "pipeline/sharding/split_provider.hpp"
#include "test/support/http_server.hpp"
#include "test/support/text.hpp"

using namespace conveyor;
using conveyor::testing::contains;
using conveyor::testing::HttpTestServer;

namespace {

// Sets the process's HTTP options for one test (fast retries, small ranges), restores them after.
class ScopedHttpOptions {
public:
  explicit ScopedHttpOptions(std::size_t chunk_bytes = 7, int retries = 3)
    : saved_(http_options()) {
    HttpOptions o;
    o.chunk_bytes = chunk_bytes;
    o.max_retries = retries;
    o.retry_backoff = std::chrono::milliseconds{1};
    o.max_backoff = std::chrono::milliseconds{4};
    set_http_options(o);
  }
  ~ScopedHttpOptions() { set_http_options(saved_); }

private:
  HttpOptions saved_;
};

// The whole object (or the first error).
Expected<std::string> fetch(const std::string& url, int* retries = nullptr) {
  auto reader = HttpReader::open(url, "object");
  if (!reader.ok())
    return reader.status();
  std::string out;
  char buf[5];
  for (;;) {
    std::size_t got = 0;
    CONVEYOR_RETURN_IF_ERROR((*reader)->read(buf, sizeof buf, got));
    out.append(buf, got);
    if (got < sizeof buf)
      break;
  }
  if (retries)
    *retries = (*reader)->retries();
  return out;
}

const std::string kText = "alpha\nbeta\ngamma\ndelta\nepsilon\nzeta\neta\ntheta\n";

} // namespace

TEST_CASE("http: URL helpers redact secrets and normalise for prefix checks") {
  CHECK(is_url("http://h/x"));
  CHECK(is_url("HTTPS://h/x"));
  CHECK_FALSE(is_url("/data/http://x"));
  CHECK(redact_url("https://user:pw@h.example:8443/a/b?X-Amz-Signature=s3cr3t#frag") ==
        "https://h.example:8443/a/b?...");
  CHECK(redact_url("http://h/a") == "http://h/a");
  auto n = normalize_url("HTTP://Host.Example:80/a/./b/../c?q=1");
  REQUIRE(n.ok());
  CHECK(*n == "http://host.example/a/c?q=1");
  CHECK_FALSE(normalize_url("http://h/data/%2e%2e/secret").ok());
  CHECK_FALSE(normalize_url("ftp://h/x").ok());
  // A URL is never a glob pattern, even with `?` in its query.
  CHECK_FALSE(has_glob_chars("http://h/a?x=1"));
  auto expanded = expand_file_patterns("text_lines", {"http://h/a?x=[1]"});
  REQUIRE(expanded.ok());
  CHECK(*expanded == std::vector<std::string>{"http://h/a?x=[1]"});
  auto listed = glob_sorted("list_files", "http://h/*.txt");
  CHECK(contains(listed.status().message(), "HTTP has no directory listing"));
}

TEST_CASE("http: --allow-url prefixes confine URLs as --allow-path confines files") {
  auto policy = PathPolicy::make({"http://127.0.0.1:9/data/", "https://bucket.example/train"});
  REQUIRE_MESSAGE(policy.ok(), policy.status().to_string());
  const auto& p = **policy;
  const auto read = PathPolicy::Access::read;
  CHECK(p.check("http://127.0.0.1:9/data/a.txt", read, "text_lines").ok());
  CHECK(p.check("https://BUCKET.example:443/train/x?sig=1", read, "tfrecord").ok());
  CHECK(p.check("https://bucket.example/train", read, "tfrecord").ok());
  for (const char* outside :
       {"http://127.0.0.1:9/database", "http://127.0.0.1:9/data/../secret",
        "https://bucket.example/training/x", "https://bucket.example.evil/train/x",
        "https://bucket.example@evil.example/train/x", "http://127.0.0.1:10/data/a"}) {
    Status st = p.check(outside, read, "text_lines");
    CAPTURE(outside);
    CHECK(st.code() == ErrorCode::permission_denied);
    CHECK(contains(st.message(), "is outside the URLs this worker may read (allowed: "
                                 "--allow-url http://127.0.0.1:9/data/, --allow-url "
                                 "https://bucket.example/train)"));
  }
  CHECK(contains(p.check("http://127.0.0.1:9/data/x", PathPolicy::Access::write, "cache").message(),
                 "URLs are only read"));
  auto files_only = PathPolicy::make({});
  REQUIRE(files_only.ok());
  Status st = (*files_only)->check("http://h/x?token=s3cr3t", read, "csv");
  CHECK(contains(st.message(), "none: the worker was started without --allow-url"));
  CHECK_FALSE(contains(st.message(), "s3cr3t"));
}

TEST_CASE("http: objects are read in ranges, and text_lines, tfrecord and GZIP over URLs") {
  test::TempDir dir;
  test::write_file(dir.file("a.txt"), kText);
  test::write_file(dir.file("empty.txt"), "");
  {
    auto w = TFRecordWriter::open(dir.file("r.tfrecord"));
    REQUIRE(w.ok());
    for (int i = 0; i < 20; ++i)
      REQUIRE((*w)->write("record-" + std::to_string(i)).ok());
  }
  {
    auto w = OutputStream::open(dir.file("a.txt.gz"), FileCompression::gzip);
    REQUIRE(w.ok());
    REQUIRE((*w)->write(kText.data(), kText.size()).ok());
    REQUIRE((*w)->close().ok());
  }
  HttpTestServer server(dir.path());
  REQUIRE_MESSAGE(server.ok(), server.error());
  ScopedHttpOptions small_ranges(7);

  auto whole = fetch(server.url("/a.txt"));
  REQUIRE_MESSAGE(whole.ok(), whole.status().to_string());
  CHECK(*whole == kText);
  auto empty = fetch(server.url("/empty.txt"));
  REQUIRE_MESSAGE(empty.ok(), empty.status().to_string());
  CHECK(empty->empty());

  CHECK(test::show(Dataset::text_lines({server.url("/a.txt")})) ==
        test::show(Dataset::text_lines({dir.file("a.txt")})));
  CHECK(test::show(Dataset::text_lines({server.url("/a.txt.gz")}, "GZIP")) ==
        test::show(Dataset::text_lines({dir.file("a.txt")})));
  CHECK(test::show(Dataset::tfrecord({server.url("/r.tfrecord")})) ==
        test::show(Dataset::tfrecord({dir.file("r.tfrecord")})));
  // DYNAMIC: the splits name the URLs, each read by whoever gets it.
  auto ds = Dataset::text_lines({server.url("/a.txt"), server.url("/empty.txt")});
  auto provider = make_split_provider(ds);
  REQUIRE_MESSAGE(provider.ok(), provider.status().to_string());
  IteratorContext ctx;
  ctx.split_provider = provider->get();
  auto it = ds.make_iterator(ctx);
  REQUIRE(it.ok());
  std::vector<Element> out;
  REQUIRE(test::drain(**it, out).ok());
  CHECK(out.size() == 8);
}

TEST_CASE("http: CSV over a URL") {
  test::TempDir dir;
  test::write_file(dir.file("t.csv"), "id,label\n1,\"a, b\"\n2,c\n");
  HttpTestServer server(dir.path());
  REQUIRE_MESSAGE(server.ok(), server.error());
  ScopedHttpOptions small_ranges(5);
  CHECK(test::show(Dataset::csv({server.url("/t.csv")}, {"int64", "string"}, true)) ==
        "[(1, \"a, b\"), (2, \"c\")]");
}

TEST_CASE("http: 503s, resets and truncations are retried, a body that stays short is an error "
          "naming the URL") {
  test::TempDir dir;
  test::write_file(dir.file("a.txt"), kText);
  test::write_file(dir.file("b.txt"), kText);
  test::write_file(dir.file("c.txt"), kText);
  test::write_file(dir.file("t.txt"), kText);
  test::write_file(dir.file("s.txt"), kText);
  test::write_file(dir.file("u.txt"), kText);
  test::write_file(dir.file("m.txt"), kText);
  HttpTestServer server(dir.path(), {"--fault", "/a.txt:503:2", "--fault", "/b.txt:reset:2",
                                     "--fault", "/c.txt:truncate:1", "--fault",
                                     "/t.txt:truncate:-1", "--fault", "/s.txt:short:-1", "--fault",
                                     "/u.txt:503:-1", "--fault", "/m.txt:truncate:-1:1"});
  REQUIRE_MESSAGE(server.ok(), server.error());
  ScopedHttpOptions options(kText.size() + 10, 3); // one range per object

  for (const char* path : {"/a.txt", "/b.txt", "/c.txt"}) {
    int retries = -1;
    auto got = fetch(server.url(path), &retries);
    CAPTURE(path);
    REQUIRE_MESSAGE(got.ok(), got.status().to_string());
    CHECK(*got == kText);
    CHECK(retries == (std::string(path) == "/c.txt" ? 1 : 2));
  }
  auto truncated = fetch(server.url("/t.txt?X-Amz-Signature=s3cr3t"));
  CHECK(truncated.status().code() == ErrorCode::data_loss);
  CHECK(contains(truncated.status().message(), server.url("/t.txt?...")));
  CHECK(contains(truncated.status().message(), "after 3 retries"));
  CHECK_FALSE(contains(truncated.status().message(), "s3cr3t"));
  auto short_range = fetch(server.url("/s.txt"));
  CHECK(short_range.status().code() == ErrorCode::data_loss);
  CHECK(contains(short_range.status().message(), "truncated body"));
  auto failing = fetch(server.url("/u.txt"));
  CHECK(contains(failing.status().message(), "the server failed (HTTP 503)"));
  // Through a source: the error ends the file, never a short epoch that looks complete.
  Status st = test::first_error(Dataset::text_lines({server.url("/t.txt")}));
  CHECK(st.code() == ErrorCode::data_loss);
  CHECK(contains(st.message(), server.url("/t.txt")));

  // Truncated after the first range: the read ends with the error, never with a short object
  // whose last line is cut ("be" of "beta").
  std::vector<Element> lines;
  {
    ScopedHttpOptions small_ranges(8, 2);
    IteratorContext ctx;
    auto it = Dataset::text_lines({server.url("/m.txt")}).make_iterator(ctx);
    REQUIRE(it.ok());
    st = test::drain(**it, lines);
  }
  CHECK(st.code() == ErrorCode::data_loss);
  CHECK(contains(st.message(), server.url("/m.txt")));
  for (const Element& e : lines)
    CHECK(e[0].string_at(0) == "alpha");

  auto missing = fetch(server.url("/nope.txt"));
  CHECK(missing.status().code() == ErrorCode::not_found);
  CHECK(contains(missing.status().message(), server.url("/nope.txt") + " does not exist"));
}

TEST_CASE("http: a reset mid-object resumes from the last byte read") {
  test::TempDir dir;
  std::string big;
  for (int i = 0; i < 200; ++i)
    big += "line " + std::to_string(i) + "\n";
  test::write_file(dir.file("big.txt"), big);
  // Requests 4 and 5 (the fourth 64-byte range, twice) are reset half way: the reader asks for
  // that range again and goes on from there.
  HttpTestServer server(dir.path(), {"--fault", "/big.txt:reset:2:3"});
  REQUIRE_MESSAGE(server.ok(), server.error());
  ScopedHttpOptions options(64, 5);
  int retries = 0;
  auto got = fetch(server.url("/big.txt"), &retries);
  REQUIRE_MESSAGE(got.ok(), got.status().to_string());
  CHECK(*got == big);
  CHECK(retries == 2);
}

TEST_CASE("http: credentials from a headers file, never shown, and servers without ranges") {
  test::TempDir dir;
  test::write_file(dir.file("a.txt"), kText);
  HttpTestServer server(dir.path(), {"--require-header", "Authorization: Bearer t0ken-s3cr3t"});
  REQUIRE_MESSAGE(server.ok(), server.error());
  ScopedHttpOptions options;
  auto refused = fetch(server.url("/a.txt"));
  CHECK(refused.status().code() == ErrorCode::permission_denied);
  CHECK(contains(refused.status().message(), "HTTP 401"));

  test::write_file(dir.file("headers"), "# the token\n\nAuthorization: Bearer t0ken-s3cr3t\n");
  HttpOptions o = http_options();
  o.headers_file = dir.file("headers");
  set_http_options(o);
  auto got = fetch(server.url("/a.txt"));
  REQUIRE_MESSAGE(got.ok(), got.status().to_string());
  CHECK(*got == kText);

  test::write_file(dir.file("bad-headers"), "Authorization Bearer t0ken-s3cr3t\n");
  o.headers_file = dir.file("bad-headers");
  set_http_options(o);
  auto bad = fetch(server.url("/a.txt"));
  CHECK(contains(bad.status().message(), "line 1 is not `Name: value`"));
  CHECK_FALSE(contains(bad.status().message(), "s3cr3t"));
  CHECK_FALSE(check_http_options(o).ok());

  HttpTestServer plain(dir.path(), {"--no-ranges"});
  REQUIRE_MESSAGE(plain.ok(), plain.error());
  o.headers_file.clear();
  set_http_options(o);
  auto whole = fetch(plain.url("/a.txt"));
  REQUIRE_MESSAGE(whole.ok(), whole.status().to_string());
  CHECK(*whole == kText);
}

TEST_CASE("http: FILE sharding hands out URLs as it hands out files, never as patterns") {
  const std::vector<std::string> urls{"http://h/a?sig=1", "http://h/b?sig=[2]", "http://h/c"};
  auto w0 = apply_sharding(Dataset::tfrecord(urls), ShardingPolicy::file, 2, 0);
  auto w1 = apply_sharding(Dataset::csv(urls, {"string"}), ShardingPolicy::file, 2, 1);
  REQUIRE(w0.ok());
  REQUIRE(w1.ok());
  CHECK(*w0 == Dataset::tfrecord({"http://h/a?sig=1", "http://h/c"}));
  CHECK(*w1 == Dataset::csv({"http://h/b?sig=[2]"}, {"string"}));
  // With a policy (the dispatcher's), URLs outside its prefixes fail the job up front.
  auto policy = PathPolicy::make({"http://h/a"});
  REQUIRE(policy.ok());
  auto refused = apply_sharding(Dataset::tfrecord(urls), ShardingPolicy::file, 2, 0, policy->get());
  CHECK(refused.status().code() == ErrorCode::permission_denied);
  CHECK(contains(refused.status().message(), "the URL `http://h/b?...` is outside the URLs"));
}
