// Split providers: which splits each source yields, epochs, position/restore, errors.
#include <doctest/doctest.h>

#include <algorithm>
#include <vector>

#include "pipeline/graph/dataset.hpp"
#include "pipeline/sharding/split_provider.hpp"
#include "test/unit/sharding/temp_dir.hpp"

using namespace conveyor;

namespace {

std::unique_ptr<SplitProvider> provider_for(const Dataset& ds, int64_t split_size = 64,
                                            int64_t seed = kNoSeed) {
  SplitOptions options;
  options.range_split_size = split_size;
  options.seed = seed;
  auto made = make_split_provider(ds, options);
  REQUIRE_MESSAGE(made.ok(), made.status().to_string());
  return std::move(*made);
}

// One call's outcome, printable by doctest on mismatch.
struct Pull {
  bool end = false;
  Split split;
};

Pull pull(SplitProvider& provider) {
  Pull p;
  Status st = provider.get_next(p.split, p.end);
  REQUIRE_MESSAGE(st.ok(), st.to_string());
  return p;
}

// The splits up to (and consuming) the next end_of_splits; bounded so a bug cannot hang the test.
std::vector<Split> one_epoch(SplitProvider& provider, int max_splits = 1000) {
  std::vector<Split> splits;
  for (int i = 0; i < max_splits; ++i) {
    Pull p = pull(provider);
    if (p.end)
      return splits;
    splits.push_back(p.split);
  }
  FAIL("no end_of_splits after " << max_splits << " splits");
  return splits;
}

std::vector<std::pair<int64_t, int64_t>> ranges_of(const std::vector<Split>& splits) {
  std::vector<std::pair<int64_t, int64_t>> out;
  for (const auto& s : splits)
    out.emplace_back(s.begin, s.end);
  return out;
}

std::vector<std::string> files_of(const std::vector<Split>& splits) {
  std::vector<std::string> out;
  for (const auto& s : splits)
    out.push_back(s.file);
  return out;
}

using Ranges = std::vector<std::pair<int64_t, int64_t>>;

} // namespace

TEST_CASE("range(10) in splits of 3 yields index ranges, then end_of_splits for good") {
  auto provider = provider_for(Dataset::range(10), 3);
  std::vector<Split> splits = one_epoch(*provider);
  CHECK(ranges_of(splits) == Ranges{{0, 3}, {3, 6}, {6, 9}, {9, 10}});
  for (std::size_t i = 0; i < splits.size(); ++i) {
    CHECK(splits[i].epoch == 0);
    CHECK(splits[i].index == static_cast<int64_t>(i));
    CHECK(splits[i].file.empty());
  }
  // One epoch only: every later call ends too.
  for (int i = 0; i < 3; ++i)
    CHECK(pull(*provider).end);
  CHECK(provider->position() == SplitPosition{1, 0});
}

TEST_CASE("range splits hold element indices, not values") {
  // range(5, 25, 4) = 5, 9, 13, 17, 21: five elements, indices 0..4.
  auto provider = provider_for(Dataset::range(5, 25, 4), 2);
  CHECK(ranges_of(one_epoch(*provider)) == Ranges{{0, 2}, {2, 4}, {4, 5}});
  // range(10, 0, -3) = 10, 7, 4, 1.
  auto down = provider_for(Dataset::range(10, 0, -3), 3);
  CHECK(ranges_of(one_epoch(*down)) == Ranges{{0, 3}, {3, 4}});
  // An empty range has an epoch with no splits.
  auto empty = provider_for(Dataset::range(4, 4), 3);
  CHECK(one_epoch(*empty).empty());
}

TEST_CASE("repeat(2) above the source gives a second epoch after the first end_of_splits") {
  auto provider = provider_for(Dataset::range(10).repeat(2), 3);
  std::vector<Split> first = one_epoch(*provider);
  std::vector<Split> second = one_epoch(*provider);
  CHECK(ranges_of(first) == Ranges{{0, 3}, {3, 6}, {6, 9}, {9, 10}});
  CHECK(ranges_of(second) == ranges_of(first));
  CHECK(std::all_of(second.begin(), second.end(), [](const Split& s) { return s.epoch == 1; }));
  CHECK(second.front().index == 0);
  CHECK(pull(*provider).end);
  CHECK(pull(*provider).end);
}

TEST_CASE("repeat(0) above the source: no splits at all") {
  auto provider = provider_for(Dataset::range(10).repeat(0), 3);
  for (int i = 0; i < 3; ++i)
    CHECK(pull(*provider).end);
}

TEST_CASE("repeat() forever keeps starting epochs") {
  auto provider = provider_for(Dataset::range(4).repeat(), 4);
  for (int64_t epoch = 0; epoch < 5; ++epoch) {
    std::vector<Split> splits = one_epoch(*provider);
    REQUIRE(splits.size() == 1);
    CHECK(splits[0].epoch == epoch);
  }
}

TEST_CASE("num_epochs multiplies the repeat counts between the root and the source") {
  CHECK(num_epochs(Dataset::range(10)) == 1);
  CHECK(num_epochs(Dataset::range(10).repeat(3).batch(2)) == 3);
  CHECK(num_epochs(Dataset::range(10).repeat(2).map("f").repeat(3)) == 6);
  CHECK(num_epochs(Dataset::range(10).repeat()) == kInfiniteCardinality);
  CHECK(num_epochs(Dataset::range(10).repeat(0)) == 0);
  CHECK(num_epochs(Dataset::range(10).repeat().repeat(0)) == 0);
  CHECK(num_epochs(Dataset::range(10).repeat(0).repeat()) == 0);
  // A repeat on another branch of a zip does not repeat the source.
  Dataset zipped = Dataset::zip(
    {Dataset::range(3).repeat(2), Dataset::from_tensors(Tensor::scalar(int64_t{1})).repeat(5)});
  CHECK(num_epochs(zipped.repeat(3)) == 6);
}

TEST_CASE("restore from a mid-epoch position gives the same remaining splits") {
  const Dataset ds = Dataset::range(20).repeat(2);
  auto original = provider_for(ds, 3);
  pull(*original);
  pull(*original);
  const SplitPosition saved = original->position();
  CHECK(saved == SplitPosition{0, 2});
  std::vector<Split> rest_of_original = one_epoch(*original);
  std::vector<Split> next_of_original = one_epoch(*original);

  auto restored = provider_for(ds, 3);
  REQUIRE(restored->restore(saved).ok());
  CHECK(restored->position() == saved);
  CHECK(one_epoch(*restored) == rest_of_original);
  CHECK(one_epoch(*restored) == next_of_original);
  CHECK(pull(*restored).end);
}

TEST_CASE("restore at an epoch boundary and at the very end") {
  const Dataset ds = Dataset::range(6).repeat(2);
  auto provider = provider_for(ds, 3);
  REQUIRE(provider->restore({1, 0}).ok());
  std::vector<Split> second = one_epoch(*provider);
  REQUIRE(second.size() == 2);
  CHECK(second[0].epoch == 1);
  // (epoch 0, next_index 2) = all splits of epoch 0 handed out, its end_of_splits not yet.
  REQUIRE(provider->restore({0, 2}).ok());
  CHECK(pull(*provider).end);
  CHECK(provider->position() == SplitPosition{1, 0});
  REQUIRE(provider->restore({2, 0}).ok());
  CHECK(pull(*provider).end);
}

TEST_CASE("restore rejects positions the dataset cannot have") {
  auto provider = provider_for(Dataset::range(6).repeat(2), 3);
  Status negative = provider->restore({-1, 0});
  CHECK(negative.code() == ErrorCode::invalid_argument);
  CHECK(negative.message().find("epoch -1") != std::string::npos);
  CHECK(provider->restore({0, -2}).code() == ErrorCode::invalid_argument);
  Status past_epochs = provider->restore({3, 0});
  CHECK(past_epochs.code() == ErrorCode::data_loss);
  CHECK(past_epochs.message().find("2 epoch(s)") != std::string::npos);
  CHECK(provider->restore({2, 1}).code() == ErrorCode::data_loss);
  Status past_splits = provider->restore({0, 3});
  CHECK(past_splits.code() == ErrorCode::data_loss);
  CHECK(past_splits.message().find("next_index 3") != std::string::npos);
  // A failed restore leaves the position alone.
  CHECK(provider->position() == SplitPosition{0, 0});
}

TEST_CASE("from_tensor_slices splits index ranges of dimension 0") {
  Element element{{Tensor::vector<int64_t>({1, 2, 3, 4, 5}),
                   Tensor::vector<std::string>({"a", "b", "c", "d", "e"})}};
  auto provider = provider_for(Dataset::from_tensor_slices(element).map("f"), 2);
  CHECK(ranges_of(one_epoch(*provider)) == Ranges{{0, 2}, {2, 4}, {4, 5}});
}

TEST_CASE("text_lines and tfrecord: one split per file, in the listed order, every epoch") {
  auto provider = provider_for(Dataset::text_lines({"c.txt", "a.txt", "b.txt"}).repeat(2));
  std::vector<Split> first = one_epoch(*provider);
  CHECK(files_of(first) == std::vector<std::string>{"c.txt", "a.txt", "b.txt"});
  CHECK(first[2].index == 2);
  CHECK(files_of(one_epoch(*provider)) == files_of(first));
  auto records = provider_for(Dataset::tfrecord({"x.tfrecord", "y.tfrecord"}).batch(4));
  CHECK(files_of(one_epoch(*records)) == std::vector<std::string>{"x.tfrecord", "y.tfrecord"});
}

TEST_CASE("list_files: the matching files, sorted, one split each") {
  testing::TempDir dir;
  REQUIRE(dir.ok());
  const std::string b = dir.write("b.txt", {"1"});
  const std::string a = dir.write("a.txt", {"2"});
  const std::string c = dir.write("c.txt", {"3"});
  dir.write("skip.csv", {"4"});
  auto provider = provider_for(Dataset::list_files(dir.path() + "/*.txt", /*shuffle=*/false));
  CHECK(files_of(one_epoch(*provider)) == std::vector<std::string>{a, b, c});
  CHECK(pull(*provider).end);
}

TEST_CASE("list_files(shuffle=true, seed) reorders every epoch, the same way for the same seed") {
  testing::TempDir dir;
  REQUIRE(dir.ok());
  std::vector<std::string> sorted;
  for (char name = 'a'; name <= 'h'; ++name)
    sorted.push_back(dir.write(std::string(1, name) + ".txt", {"x"}));
  const Dataset ds =
    Dataset::list_files(dir.path() + "/*.txt", /*shuffle=*/true, /*seed=*/42).repeat(3);

  auto first = provider_for(ds);
  auto second = provider_for(ds);
  std::vector<std::vector<std::string>> epochs;
  for (int e = 0; e < 3; ++e) {
    epochs.push_back(files_of(one_epoch(*first)));
    CHECK(files_of(one_epoch(*second)) == epochs.back());
    std::vector<std::string> as_set = epochs.back();
    std::sort(as_set.begin(), as_set.end());
    CHECK(as_set == sorted);
  }
  // 8 files: a reshuffle that repeats the previous order or keeps the sorted one would be a bug
  // for this fixed seed (a 1-in-40320 coincidence at most).
  CHECK(epochs[0] != epochs[1]);
  CHECK(epochs[1] != epochs[2]);
  CHECK(epochs[0] != sorted);

  // Restoring mid-epoch 1 replays that epoch's order.
  auto restored = provider_for(ds);
  REQUIRE(restored->restore({1, 5}).ok());
  std::vector<std::string> tail(epochs[1].begin() + 5, epochs[1].end());
  CHECK(files_of(one_epoch(*restored)) == tail);

  // Unseeded: SplitOptions::seed decides, so a job that journals it gets the same order back.
  const Dataset unseeded = Dataset::list_files(dir.path() + "/*.txt");
  auto u1 = provider_for(unseeded, 64, /*seed=*/7);
  auto u2 = provider_for(unseeded, 64, /*seed=*/7);
  CHECK(files_of(one_epoch(*u1)) == files_of(one_epoch(*u2)));
}

TEST_CASE("list_files with no match is not_found naming the pattern") {
  testing::TempDir dir;
  REQUIRE(dir.ok());
  auto made = make_split_provider(Dataset::list_files(dir.path() + "/*.none"));
  REQUIRE_FALSE(made.ok());
  CHECK(made.status().code() == ErrorCode::not_found);
  CHECK(made.status().message().find(dir.path() + "/*.none") != std::string::npos);
}

TEST_CASE("exactly one splittable source is required") {
  auto none = make_split_provider(Dataset::from_tensors(Tensor::scalar(int64_t{1})).map("f"));
  REQUIRE_FALSE(none.ok());
  CHECK(none.status().code() == ErrorCode::invalid_argument);
  CHECK(
    none.status().message() ==
    "DYNAMIC sharding needs exactly one splittable source (range, from_tensor_slices, list_files, "
    "text_lines, tfrecord, csv, webdataset, load); found none in from_tensors(1).map(f)");

  auto two = make_split_provider(Dataset::zip({Dataset::range(3), Dataset::range(4)}));
  REQUIRE_FALSE(two.ok());
  CHECK(two.status().code() == ErrorCode::invalid_argument);
  CHECK(
    two.status().message() ==
    "DYNAMIC sharding needs exactly one splittable source (range, from_tensor_slices, list_files, "
    "text_lines, tfrecord, csv, webdataset, load); found 2 in zip(range(3), range(4)): `zip` reads "
    "several "
    "splittable sources, and this reads the dataset through one split provider (a DYNAMIC job "
    "gives each source its own; a distributed_save does not); use one source");

  // concatenate is named the same way, also below other ops.
  auto joined =
    make_split_provider(Dataset::range(50).concatenate(Dataset::range(50, 100)).map("f").batch(2));
  REQUIRE_FALSE(joined.ok());
  CHECK(joined.status().code() == ErrorCode::invalid_argument);
  CHECK(joined.status().message().find("found 2 in range(50).concatenate(range(50, 100))") !=
        std::string::npos);
  CHECK(joined.status().message().find("`concatenate` reads several splittable sources") !=
        std::string::npos);
  // One splittable source beside a non-splittable one is fine, as for zip.
  CHECK(make_split_provider(Dataset::range(5).concatenate(Dataset::random(1).take(3))).ok());
  CHECK_FALSE(make_split_provider(Dataset::random(1)).ok());

  // The same source node zipped with itself is iterated twice, so it is two sources.
  const Dataset r = Dataset::range(3);
  CHECK_FALSE(make_split_provider(Dataset::zip({r, r})).ok());
  CHECK_FALSE(make_split_provider(Dataset::source("gen")).ok());
  // A non-splittable source beside the splittable one is fine; it is produced whole.
  CHECK(
    make_split_provider(Dataset::zip({r, Dataset::from_tensors(Tensor::scalar(int64_t{1}))})).ok());
  // The datasets flat_map's function builds are not part of the graph.
  CHECK(make_split_provider(r.flat_map("to_range").shuffle(4)).ok());
}

TEST_CASE("range_split_size must be positive") {
  SplitOptions options;
  options.range_split_size = 0;
  auto made = make_split_provider(Dataset::range(3), options);
  REQUIRE_FALSE(made.ok());
  CHECK(made.status().code() == ErrorCode::invalid_argument);
  CHECK(made.status().message() == "`range_split_size` must be positive, got 0");
}
