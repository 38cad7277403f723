// Path confinement (pipeline/io/path_policy.hpp): the file ops read and write only under the
// allowed roots, after `..` and symbolic links are resolved; inner datasets are confined too.
#include <doctest/doctest.h>

#include <unistd.h>

#include <filesystem>

#include "ops_test_util.hpp"
#include "conveyor/sharding.hpp"
#include "pipeline/io/path_policy.hpp"
#include "pipeline/sharding/split_provider.hpp"

using namespace conveyor;

namespace {

// The first error of `ds` under `policy` (OK if it runs to the end); the elements in `out`.
Status run_confined(const Dataset& ds, const PathPolicy* policy,
                    std::vector<Element>* out = nullptr) {
  IteratorContext ctx;
  ctx.paths = policy;
  auto it = ds.make_iterator(ctx);
  if (!it.ok())
    return it.status();
  std::vector<Element> elements;
  Status st = test::drain(**it, elements);
  if (out)
    *out = std::move(elements);
  return st;
}

struct Dirs {
  test::TempDir allowed;
  test::TempDir other;
  std::shared_ptr<const PathPolicy> policy;
  Dirs() {
    test::write_file(allowed.file("a.txt"), "x\ny\n");
    test::write_file(other.file("secret.txt"), "top secret\n");
    auto p = PathPolicy::make({allowed.path()});
    REQUIRE(p.ok());
    policy = *p;
  }
};

} // namespace

TEST_CASE("path policy: files under a root are read, others refused with the path and the roots") {
  Dirs d;
  std::vector<Element> out;
  REQUIRE(run_confined(Dataset::text_lines({d.allowed.file("a.txt")}), d.policy.get(), &out).ok());
  CHECK(out.size() == 2);
  Status st = run_confined(Dataset::text_lines({d.other.file("secret.txt")}), d.policy.get(), &out);
  CHECK(st.code() == ErrorCode::permission_denied);
  CHECK(st.message().find("`text_lines`") != std::string::npos);
  CHECK(st.message().find(d.other.file("secret.txt")) != std::string::npos);
  CHECK(
    st.message().find("--allow-path " + std::filesystem::canonical(d.allowed.path()).string()) !=
    std::string::npos);
  CHECK(out.empty());
  st = run_confined(Dataset::text_lines({"/etc/passwd"}), d.policy.get());
  CHECK(st.code() == ErrorCode::permission_denied);
  st = run_confined(Dataset::tfrecord({"/etc/passwd"}), d.policy.get());
  CHECK(st.code() == ErrorCode::permission_denied);
  CHECK(st.message().find("`tfrecord`") != std::string::npos);
}

TEST_CASE("path policy: `..` and symbolic links are resolved before the check") {
  Dirs d;
  // ../ out of the root
  const std::string escape = d.allowed.path() + "/../" +
                             std::filesystem::path(d.other.path()).filename().string() +
                             "/secret.txt";
  Status st = run_confined(Dataset::text_lines({escape}), d.policy.get());
  CHECK(st.code() == ErrorCode::permission_denied);
  CHECK(st.message().find("resolved to") != std::string::npos);
  // a link inside the root pointing outside it
  REQUIRE(::symlink(d.other.file("secret.txt").c_str(), d.allowed.file("link.txt").c_str()) == 0);
  st = run_confined(Dataset::text_lines({d.allowed.file("link.txt")}), d.policy.get());
  CHECK(st.code() == ErrorCode::permission_denied);
  // a link to a directory outside, then a file below it
  REQUIRE(::symlink(d.other.path().c_str(), d.allowed.file("dir").c_str()) == 0);
  st = run_confined(Dataset::text_lines({d.allowed.file("dir/secret.txt")}), d.policy.get());
  CHECK(st.code() == ErrorCode::permission_denied);
  // `..` that stays inside is fine
  std::filesystem::create_directory(d.allowed.file("sub"));
  std::vector<Element> out;
  CHECK(
    run_confined(Dataset::text_lines({d.allowed.path() + "/./sub/../a.txt"}), d.policy.get(), &out)
      .ok());
  CHECK(out.size() == 2);
  // a root that is a prefix of another directory's name does not admit it
  auto prefix_only = PathPolicy::make({d.allowed.path()});
  REQUIRE(prefix_only.ok());
  CHECK(!(*prefix_only)->check(d.allowed.path() + "-x/f", PathPolicy::Access::read, "t").ok());
}

TEST_CASE("path policy: list_files, cache and inner datasets are confined") {
  Dirs d;
  std::vector<Element> out;
  CHECK(run_confined(Dataset::list_files(d.allowed.path() + "/*.txt", false), d.policy.get(), &out)
          .ok());
  CHECK(out.size() == 1);
  Status st = run_confined(Dataset::list_files(d.other.path() + "/*.txt", false), d.policy.get());
  CHECK(st.code() == ErrorCode::permission_denied);
  CHECK(st.message().find("`list_files`") != std::string::npos);
  st = run_confined(Dataset::list_files("/etc/*", false), d.policy.get());
  CHECK(st.code() == ErrorCode::permission_denied);

  // cache files: inside is written, outside refused before anything is created
  CHECK(run_confined(Dataset::range(3).cache(d.allowed.file("c")), d.policy.get(), &out).ok());
  CHECK(std::filesystem::exists(d.allowed.file("c.cache")));
  st = run_confined(Dataset::range(3).cache(d.other.file("c")), d.policy.get());
  CHECK(st.code() == ErrorCode::permission_denied);
  CHECK(st.message().find("`cache`") != std::string::npos);
  CHECK(st.message().find("write") != std::string::npos);
  CHECK(!std::filesystem::exists(d.other.file("c.cache")));

  // a dataset a function returns (interleave over file names) is confined like its parent
  Element names = Element{Tensor::vector(std::vector<std::string>{d.other.file("secret.txt")})};
  st =
    run_confined(Dataset::from_tensor_slices(names).interleave("text_lines_fn", 1), d.policy.get());
  CHECK(st.code() == ErrorCode::permission_denied);
}

TEST_CASE(
  "path policy: a file pattern outside the roots is refused before its directory is listed") {
  Dirs d;
  std::vector<Element> out;
  CHECK(
    run_confined(Dataset::text_lines({d.allowed.path() + "/*.txt"}), d.policy.get(), &out).ok());
  CHECK(out.size() == 2);
  // The refusal names the directory, not what it holds: no match's name, and no "no files match".
  for (const std::string& pattern : {d.other.path() + "/*.txt", d.other.path() + "/nothing*"}) {
    CAPTURE(pattern);
    Status st = run_confined(Dataset::text_lines({pattern}), d.policy.get());
    CHECK(st.code() == ErrorCode::permission_denied);
    CHECK(st.message().find("`text_lines`") != std::string::npos);
    CHECK(st.message().find("secret") == std::string::npos);
    st = run_confined(Dataset::tfrecord({pattern}), d.policy.get());
    CHECK(st.code() == ErrorCode::permission_denied);
    // FILE sharding expands the patterns on the worker, under the same roots.
    auto sharded =
      apply_sharding(Dataset::text_lines({pattern}), ShardingPolicy::file, 1, 0, d.policy.get());
    REQUIRE_FALSE(sharded.ok());
    CHECK(sharded.status().code() == ErrorCode::permission_denied);
    CHECK(sharded.status().message().find("secret") == std::string::npos);
  }
  CHECK(apply_sharding(Dataset::text_lines({d.allowed.path() + "/*.txt"}), ShardingPolicy::file, 1,
                       0, d.policy.get())
          .ok());
}

TEST_CASE(
  "path policy: the dispatcher's DYNAMIC split providers list patterns only under its roots") {
  Dirs d;
  auto dispatcher = PathPolicy::make({d.allowed.path()}, "dispatcher");
  REQUIRE(dispatcher.ok());
  SplitOptions options;
  options.paths = dispatcher->get();
  CHECK(make_split_provider(Dataset::text_lines({d.allowed.path() + "/*.txt"}), options).ok());
  CHECK(make_split_provider(Dataset::list_files(d.allowed.path() + "/*.txt"), options).ok());
  for (const Dataset& ds : {Dataset::text_lines({d.other.path() + "/*.txt"}),
                            Dataset::tfrecord({d.other.path() + "/*"}),
                            Dataset::list_files(d.other.path() + "/*.txt")}) {
    auto made = make_split_provider(ds, options);
    REQUIRE_FALSE(made.ok());
    CHECK(made.status().code() == ErrorCode::permission_denied);
    CHECK(made.status().message().find("this dispatcher may list") != std::string::npos);
    CHECK(made.status().message().find("secret") == std::string::npos);
  }
  // No roots: nothing is listed, and the refusal says how to allow it.
  auto none = PathPolicy::make({}, "dispatcher");
  REQUIRE(none.ok());
  options.paths = none->get();
  auto made = make_split_provider(Dataset::text_lines({d.allowed.path() + "/*.txt"}), options);
  REQUIRE_FALSE(made.ok());
  CHECK(made.status().message().find("the dispatcher was started without --allow-path") !=
        std::string::npos);
}

TEST_CASE("path policy: no roots allows nothing - bad roots are refused - no policy allows all") {
  test::TempDir dir;
  test::write_file(dir.file("a.txt"), "x\n");
  auto none = PathPolicy::make({});
  REQUIRE(none.ok());
  Status st = run_confined(Dataset::text_lines({dir.file("a.txt")}), none->get());
  CHECK(st.code() == ErrorCode::permission_denied);
  CHECK(st.message().find("without --allow-path") != std::string::npos);
  CHECK(run_confined(Dataset::text_lines({dir.file("a.txt")}), nullptr).ok());
  CHECK(PathPolicy::make({dir.file("missing")}).status().code() == ErrorCode::invalid_argument);
  CHECK(PathPolicy::make({dir.file("a.txt")}).status().message().find("not a directory") !=
        std::string::npos);
}

// --- the job memory budget (pipeline/runtime/memory_budget.hpp)
#include "pipeline/runtime/memory_budget.hpp"

namespace {
Status run_budgeted(const Dataset& ds, MemoryBudget& budget, std::vector<Element>* out = nullptr) {
  IteratorContext ctx;
  ctx.memory = &budget;
  std::vector<Element> elements;
  Status st;
  {
    auto it = ds.make_iterator(ctx);
    if (!it.ok())
      return it.status();
    st = test::drain(**it, elements);
  } // the iterators (and what they charged) are gone here
  if (out)
    *out = std::move(elements);
  return st;
}
} // namespace

TEST_CASE("memory budget: shuffle, batch, padded_batch, prefetch and cache charge it - passing it "
          "fails with resource_exhausted") {
  MemoryBudget small(64 << 10); // 64 KiB: 8192 int64 scalars at most
  Status st = run_budgeted(Dataset::range(100000).shuffle(100000, 1), small);
  CHECK(st.code() == ErrorCode::resource_exhausted);
  CHECK(st.message().find("`shuffle`") != std::string::npos);
  CHECK(st.message().find("--job-memory-limit") != std::string::npos);
  CHECK(small.used() == 0); // returned when the pipeline went away
  st = run_budgeted(Dataset::range(100000).batch(50000), small);
  CHECK(st.code() == ErrorCode::resource_exhausted);
  CHECK(st.message().find("`batch`") != std::string::npos);
  st = run_budgeted(Dataset::range(100000).padded_batch(50000), small);
  CHECK(st.code() == ErrorCode::resource_exhausted);
  CHECK(st.message().find("`padded_batch`") != std::string::npos);
  st = run_budgeted(Dataset::range(100000).cache().repeat(2), small);
  CHECK(st.code() == ErrorCode::resource_exhausted);
  CHECK(st.message().find("`cache`") != std::string::npos);
  CHECK(small.used() == 0);

  MemoryBudget tiny(4); // less than one int64 scalar: the first prefetched element passes it
  st = run_budgeted(Dataset::range(10).prefetch(4), tiny);
  CHECK(st.code() == ErrorCode::resource_exhausted);
  CHECK(st.message().find("`prefetch`") != std::string::npos);
  CHECK(tiny.used() == 0);

  MemoryBudget enough(8 << 20);
  std::vector<Element> out;
  CHECK(
    run_budgeted(Dataset::range(1000).shuffle(1000, 1).batch(10).cache().repeat(2), enough, &out)
      .ok());
  CHECK(out.size() == 200);
  CHECK(run_budgeted(Dataset::range(1000).prefetch(16).batch(10).prefetch(2), enough, &out).ok());
  CHECK(out.size() == 100);
  CHECK(enough.peak() > 0);
  CHECK(enough.used() == 0);
}
