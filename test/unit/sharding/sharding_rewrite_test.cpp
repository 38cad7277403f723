// Static sharding policies as graph rewrites: the resulting graph and text form of each.
#include <doctest/doctest.h>

#include "pipeline/graph/dataset.hpp"
#include "pipeline/sharding/sharding.hpp"
#include "pipeline/graph/text_form.hpp"

using namespace conveyor;

namespace {

Dataset sharded(const Dataset& ds, ShardingPolicy policy, int64_t n, int64_t i) {
  auto result = apply_sharding(ds, policy, n, i);
  REQUIRE_MESSAGE(result.ok(), result.status().to_string());
  return *result;
}

Status sharding_error(const Dataset& ds, ShardingPolicy policy, int64_t n, int64_t i) {
  auto result = apply_sharding(ds, policy, n, i);
  REQUIRE_FALSE(result.ok());
  return result.status();
}

// Whether the rewrite handed back the very node (no copy).
bool same_node(const NodePtr& a, const NodePtr& b) { return a == b; }

const Dataset kFiveFiles = Dataset::text_lines({"a", "b", "c", "d", "e"}).map("parse").batch(2);

} // namespace

TEST_CASE("policy names round-trip and parse case-insensitively") {
  for (ShardingPolicy p :
       {ShardingPolicy::off, ShardingPolicy::dynamic, ShardingPolicy::file, ShardingPolicy::data,
        ShardingPolicy::file_or_data, ShardingPolicy::hint})
    CHECK(sharding_policy_from_string(to_string(p)) == p);
  CHECK(std::string(to_string(ShardingPolicy::file_or_data)) == "FILE_OR_DATA");
  CHECK(sharding_policy_from_string("off") == ShardingPolicy::off);
  CHECK(sharding_policy_from_string("Dynamic") == ShardingPolicy::dynamic);
  CHECK(sharding_policy_from_string("file_or_data") == ShardingPolicy::file_or_data);
  CHECK_FALSE(sharding_policy_from_string("FILES").has_value());
  CHECK_FALSE(sharding_policy_from_string("").has_value());
}

TEST_CASE("OFF and DYNAMIC leave the dataset as it is") {
  for (ShardingPolicy p : {ShardingPolicy::off, ShardingPolicy::dynamic}) {
    Dataset out = sharded(kFiveFiles, p, 3, 1);
    CHECK(same_node(out.node(), kFiveFiles.node()));
  }
}

TEST_CASE("FILE keeps files i, i+n, ... of text_lines and tfrecord") {
  Dataset worker1 = sharded(kFiveFiles, ShardingPolicy::file, 2, 1);
  CHECK(worker1 == Dataset::text_lines({"b", "d"}).map("parse").batch(2));
  CHECK(to_text(worker1) == R"(text_lines(["b", "d"]).map(parse).batch(2))");
  CHECK(sharded(kFiveFiles, ShardingPolicy::file, 2, 0) ==
        Dataset::text_lines({"a", "c", "e"}).map("parse").batch(2));
  CHECK(sharded(Dataset::tfrecord({"r0", "r1", "r2"}), ShardingPolicy::file, 3, 2) ==
        Dataset::tfrecord({"r2"}));
  // The input graph is untouched.
  CHECK(to_text(kFiveFiles) == R"(text_lines(["a", "b", "c", "d", "e"]).map(parse).batch(2))");
}

TEST_CASE("FILE puts shard(n, i) directly above list_files") {
  Dataset ds = Dataset::list_files("/data/*.txt", /*shuffle=*/false).map("read").prefetch(2);
  Dataset out = sharded(ds, ShardingPolicy::file, 4, 3);
  CHECK(out == Dataset::list_files("/data/*.txt", false).shard(4, 3).map("read").prefetch(2));
  CHECK(
    to_text(out) ==
    R"(list_files("/data/*.txt", shuffle=false).shard(4, 3).map(read).prefetch(buffer_size=2))");
}

TEST_CASE("FILE pins the seed of an unseeded shuffled list_files so that shards are disjoint") {
  Dataset ds = Dataset::list_files("/data/*.txt").map("read");
  Dataset w0 = sharded(ds, ShardingPolicy::file, 2, 0);
  Dataset w1 = sharded(ds, ShardingPolicy::file, 2, 1);
  const Node& list0 = *w0.node()->inputs.at(0)->inputs.at(0);
  const Node& list1 = *w1.node()->inputs.at(0)->inputs.at(0);
  REQUIRE(list0.op == "list_files");
  CHECK(list0.int_attr("seed") != kNoSeed);
  CHECK(list0.int_attr("seed") == list1.int_attr("seed"));
  CHECK(list0.bool_attr("shuffle"));
  CHECK(w0.node()->inputs.at(0)->op == "shard");
  // A seed the user gave is kept.
  Dataset seeded = sharded(Dataset::list_files("/data/*.txt", true, 9), ShardingPolicy::file, 2, 1);
  CHECK(seeded == Dataset::list_files("/data/*.txt", true, 9).shard(2, 1));
  // The original list_files node still has no seed.
  CHECK(ds.node()->inputs.at(0)->int_attr("seed") == kNoSeed);
}

TEST_CASE("FILE without a file source fails as tf.data does") {
  Status st = sharding_error(Dataset::range(10).map("square"), ShardingPolicy::file, 2, 0);
  CHECK(st.code() == ErrorCode::invalid_argument);
  CHECK(st.message() == "FILE sharding policy requires a file-based dataset source (list_files, "
                        "text_lines, tfrecord, csv, webdataset or load); "
                        "this dataset has none");
}

TEST_CASE("FILE with fewer files than workers fails - FILE_OR_DATA falls back to DATA") {
  Dataset two_files = Dataset::text_lines({"a", "b"});
  Status st = sharding_error(two_files, ShardingPolicy::file, 3, 0);
  CHECK(st.code() == ErrorCode::invalid_argument);
  CHECK(st.message() ==
        "FILE sharding needs at least as many files as workers: `text_lines` has 2 file(s), "
        "num_workers is 3");
  CHECK(sharded(two_files, ShardingPolicy::file_or_data, 3, 2) == two_files.shard(3, 2));
}

TEST_CASE("DATA shards at the output") {
  Dataset ds = Dataset::range(10).map("square");
  Dataset out = sharded(ds, ShardingPolicy::data, 3, 1);
  CHECK(out == Dataset::range(10).map("square").shard(3, 1));
  CHECK(to_text(out) == "range(10).map(square).shard(3, 1)");
  CHECK(
    same_node(out.node()->inputs.at(0), ds.node())); // the original pipeline is shared, not copied
}

TEST_CASE("FILE_OR_DATA is FILE with a file source and DATA without one") {
  CHECK(sharded(kFiveFiles, ShardingPolicy::file_or_data, 2, 1) ==
        Dataset::text_lines({"b", "d"}).map("parse").batch(2));
  CHECK(sharded(Dataset::range(10), ShardingPolicy::file_or_data, 2, 1) ==
        Dataset::range(10).shard(2, 1));
}

TEST_CASE("HINT fills every shard(SHARD_HINT, SHARD_HINT) placeholder") {
  Dataset ds = Dataset::range(10).shard(kShardHint, kShardHint).map("square");
  CHECK(to_text(ds) == "range(10).shard(SHARD_HINT, SHARD_HINT).map(square)");
  Dataset out = sharded(ds, ShardingPolicy::hint, 3, 2);
  CHECK(out == Dataset::range(10).shard(3, 2).map("square"));
  CHECK(to_text(out) == "range(10).shard(3, 2).map(square)");
  // Placeholders on both sides of a zip, one nested under the other's input.
  Dataset zipped =
    Dataset::zip({Dataset::range(4).shard(kShardHint, kShardHint),
                  Dataset::range(8).shard(kShardHint, kShardHint).shard(kShardHint, kShardHint)});
  CHECK(sharded(zipped, ShardingPolicy::hint, 2, 1) ==
        Dataset::zip({Dataset::range(4).shard(2, 1), Dataset::range(8).shard(2, 1).shard(2, 1)}));
  // Without a placeholder, nothing changes (tf.data does the same).
  Dataset plain = Dataset::range(10).shard(5, 0);
  CHECK(same_node(sharded(plain, ShardingPolicy::hint, 3, 2).node(), plain.node()));
}

TEST_CASE("bad num_workers / worker_index are rejected by name") {
  Status zero = sharding_error(kFiveFiles, ShardingPolicy::data, 0, 0);
  CHECK(zero.code() == ErrorCode::invalid_argument);
  CHECK(zero.message() == "`num_workers` must be positive, got 0");
  Status past = sharding_error(kFiveFiles, ShardingPolicy::off, 3, 3);
  CHECK(past.code() == ErrorCode::invalid_argument);
  CHECK(past.message() == "`worker_index` must be in [0, num_workers=3), got 3");
  CHECK(sharding_error(kFiveFiles, ShardingPolicy::hint, 3, -1).message() ==
        "`worker_index` must be in [0, num_workers=3), got -1");
}
