// DYNAMIC sharding of datasets with several splittable sources (zip, concatenate): one split
// provider per source in depth-first order, each source's iterator fed by its own provider.
#include <doctest/doctest.h>

#include <algorithm>
#include <map>
#include <vector>

#include "pipeline/functions/functions.hpp"
#include "pipeline/graph/dataset.hpp"
#include "pipeline/kernels/make_iterator.hpp"
#include "pipeline/runtime/iterator.hpp"
#include "pipeline/sharding/multi_source.hpp"
#include "test/unit/sharding/iterator_reads.hpp"
#include "test/unit/sharding/temp_dir.hpp"

using namespace conveyor;

namespace {

const FunctionRegistry& negate_functions() {
  static FunctionRegistry* registry = [] {
    auto* r = new FunctionRegistry;
    FunctionDef negate;
    negate.name = "negate";
    negate.kind = FunctionKind::map;
    negate.map = [](const Element& e, const Params&) -> Expected<Element> {
      return Element(Tensor::scalar(-e[0].as_int64()));
    };
    Status st = r->add(std::move(negate));
    REQUIRE_MESSAGE(st.ok(), st.to_string());
    return r;
  }();
  return *registry;
}

constexpr int kMaxElements = 10000; // bound on every drain loop

using Providers = std::vector<std::unique_ptr<SplitProvider>>;

Providers providers_for(const Dataset& ds, int64_t split_size) {
  SplitOptions options;
  options.range_split_size = split_size;
  auto made = make_split_providers(ds, options);
  REQUIRE_MESSAGE(made.ok(), made.status().to_string());
  return std::move(*made);
}

std::vector<SplitProvider*> raw(const Providers& providers) {
  std::vector<SplitProvider*> out;
  for (const auto& p : providers)
    out.push_back(p.get());
  return out;
}

Expected<std::unique_ptr<Iterator>> try_iterator(const Dataset& ds,
                                                 std::vector<SplitProvider*> providers) {
  IteratorContext ctx;
  ctx.functions = &negate_functions();
  if (providers.empty())
    return ds.make_iterator(ctx);
  return make_split_iterator(ds.node(), ctx, std::move(providers));
}

std::vector<std::string> drain(Iterator& it) {
  std::vector<std::string> out;
  for (const Element& e : testing::read_all(it, kMaxElements))
    out.push_back(e.to_string());
  return out;
}

std::vector<std::string> plain(const Dataset& ds) {
  auto it = try_iterator(ds, {});
  REQUIRE_MESSAGE(it.ok(), it.status().to_string());
  return drain(**it);
}

// `workers` iterators share the providers and are asked for an element in turn until all ended:
// the way tasks on several workers pull splits from one job.
std::vector<std::string> round_robin(const Dataset& ds, int workers, int64_t split_size) {
  Providers providers = providers_for(ds, split_size);
  std::vector<std::unique_ptr<Iterator>> its;
  for (int w = 0; w < workers; ++w) {
    auto it = try_iterator(ds, raw(providers));
    REQUIRE_MESSAGE(it.ok(), it.status().to_string());
    its.push_back(std::move(*it));
  }
  std::vector<std::string> out;
  for (const Element& e : testing::read_round_robin(its, kMaxElements))
    out.push_back(e.to_string());
  return out;
}

std::vector<std::string> sorted(std::vector<std::string> v) {
  std::sort(v.begin(), v.end());
  return v;
}

// Every split a provider hands out until its first end_of_splits, as "begin-end" or the file.
std::vector<std::string> epoch_of(SplitProvider& provider) {
  std::vector<std::string> out;
  for (int i = 0; i < kMaxElements; ++i) {
    Split split;
    bool end = false;
    Status st = provider.get_next(split, end);
    REQUIRE_MESSAGE(st.ok(), st.to_string());
    if (end)
      return out;
    out.push_back(split.file.empty() ? std::to_string(split.begin) + "-" + std::to_string(split.end)
                                     : split.file.substr(split.file.rfind('/') + 1));
  }
  FAIL("no end of splits after " << kMaxElements << " splits");
  return out;
}

} // namespace

TEST_CASE("multi-source providers: one per source, in depth-first order, first input first") {
  testing::TempDir dir;
  REQUIRE(dir.ok());
  dir.write("f1", {"x"});
  dir.write("f2", {"y"});
  // zip(range(4).map, concatenate(list_files, range(10, 13))): sources range(4), list_files,
  // range(10, 13), in that order.
  const Dataset ds = Dataset::zip(
    {Dataset::range(4).map("negate"),
     Dataset::list_files(dir.path() + "/*", false).concatenate(Dataset::range(10, 13))});
  CHECK(splittable_source_count(*ds.node()) == 3);
  Providers providers = providers_for(ds, 2);
  REQUIRE(providers.size() == 3);
  CHECK(epoch_of(*providers[0]) == std::vector<std::string>{"0-2", "2-4"});
  CHECK(epoch_of(*providers[1]) == std::vector<std::string>{"f1", "f2"});
  CHECK(epoch_of(*providers[2]) == std::vector<std::string>{"0-2", "2-3"}); // indices of range
  // Past their one epoch, every provider has nothing more.
  for (auto& p : providers)
    CHECK(epoch_of(*p).empty());
}

TEST_CASE("multi-source providers: a node read twice is two sources, and epochs per source") {
  const Dataset d = Dataset::range(5);
  const Dataset twice = Dataset::zip({d, d});
  CHECK(splittable_source_count(*twice.node()) == 2);
  CHECK(providers_for(twice, 2).size() == 2);

  const Dataset repeated = Dataset::zip({Dataset::range(3).repeat(2), Dataset::range(4)}).repeat(3);
  CHECK(num_epochs_per_source(repeated) == std::vector<int64_t>{6, 3});
  const Dataset forever = Dataset::range(3).repeat().concatenate(Dataset::range(2));
  CHECK(num_epochs_per_source(forever) == std::vector<int64_t>{kInfiniteCardinality, 1});
}

TEST_CASE("multi-source providers: the errors name what is wrong") {
  const Dataset none = Dataset::from_tensors(Element(Tensor::scalar(int64_t{1})));
  auto made = make_split_providers(none);
  REQUIRE_FALSE(made.ok());
  CHECK(made.status().code() == ErrorCode::invalid_argument);
  CHECK(made.status().message().find("found none") != std::string::npos);

  // A bad source says which one it is.
  const Dataset bad = Dataset::range(3).concatenate(Dataset::list_files("/nonexistent-dir/*"));
  auto bad_made = make_split_providers(bad);
  REQUIRE_FALSE(bad_made.ok());
  CHECK(bad_made.status().message().find("splittable source 1 (`list_files`)") !=
        std::string::npos);

  // The service's one-provider constructor still refuses several sources, naming the op.
  const Dataset zipped = Dataset::zip({Dataset::range(3), Dataset::range(3)});
  auto single = make_split_provider(zipped);
  REQUIRE_FALSE(single.ok());
  CHECK(single.status().message().find("`zip` reads several splittable sources") !=
        std::string::npos);

  // A provider per source, never a shared one.
  Providers two = providers_for(zipped, 2);
  auto one_for_two = try_iterator(zipped, {two[0].get()});
  REQUIRE_FALSE(one_for_two.ok());
  CHECK(one_for_two.status().message().find(
          "1 split provider(s) for a dataset with 2 splittable source(s)") != std::string::npos);
  auto with_null = try_iterator(zipped, {two[0].get(), nullptr});
  REQUIRE_FALSE(with_null.ok());
  CHECK(with_null.status().message().find("split provider 1 is null") != std::string::npos);
  IteratorContext lone;
  lone.split_provider = two[0].get();
  auto shared = zipped.make_iterator(lone);
  REQUIRE_FALSE(shared.ok());
  CHECK(shared.status().message().find("DYNAMIC sharding needs one per source") !=
        std::string::npos);
  auto both_set = make_split_iterator(zipped.node(), lone, raw(two));
  REQUIRE_FALSE(both_set.ok());
  CHECK(both_set.status().message().find("must be null") != std::string::npos);
}

TEST_CASE("multi-source, one worker: zip and concatenate through providers equal plain iteration") {
  const Dataset zipped =
    Dataset::zip({Dataset::range(10), Dataset::range(10).map("negate")}).batch(4);
  const std::vector<std::string> zip_expected = plain(zipped);
  REQUIRE(zip_expected.size() == 3);
  for (int64_t split_size : {1, 3, 64}) {
    Providers providers = providers_for(zipped, split_size);
    auto it = try_iterator(zipped, raw(providers));
    REQUIRE_MESSAGE(it.ok(), it.status().to_string());
    CHECK(drain(**it) == zip_expected);
  }

  const Dataset joined = Dataset::range(5).concatenate(Dataset::range(100, 103)).repeat(2);
  const std::vector<std::string> join_expected = plain(joined);
  REQUIRE(join_expected.size() == 16);
  Providers providers = providers_for(joined, 2);
  auto it = try_iterator(joined, raw(providers));
  REQUIRE_MESSAGE(it.ok(), it.status().to_string());
  CHECK(drain(**it) == join_expected);
}

TEST_CASE("multi-source, three workers: every element of every source exactly once") {
  // concatenate: the multiset equals the concatenation.
  const Dataset joined = Dataset::range(20).concatenate(Dataset::range(1000, 1013));
  CHECK(sorted(round_robin(joined, 3, 3)) == sorted(plain(joined)));
  // zip of equal-length sources with the same split size: a worker takes a split of each source
  // together, so the pairs are those of plain iteration.
  const Dataset zipped = Dataset::zip({Dataset::range(17), Dataset::range(17).map("negate")});
  CHECK(sorted(round_robin(zipped, 3, 2)) == sorted(plain(zipped)));
  // Nested: a zip inside a concatenate, three sources.
  const Dataset nested =
    Dataset::zip({Dataset::range(6), Dataset::range(6)})
      .concatenate(Dataset::zip({Dataset::range(50, 54), Dataset::range(60, 64)}));
  CHECK(sorted(round_robin(nested, 2, 1)) == sorted(plain(nested)));
}

TEST_CASE("multi-source zip of unequal lengths: each source's elements at most once") {
  // tf.data's semantics: each split is handed out once; zip ends with its shortest input, so a
  // longer input's surplus is not read, and nothing is read twice.
  const Dataset zipped = Dataset::zip({Dataset::range(30), Dataset::range(100, 112)});
  const std::vector<std::string> got = round_robin(zipped, 3, 2);
  CHECK(got.size() <= 12);
  CHECK(got.size() >= 6); // every worker pairs at least its first splits
  std::map<std::string, int> seen_a;
  std::map<std::string, int> seen_b;
  for (const std::string& pair : got) {
    // "(a, b)"
    const auto comma = pair.find(", ");
    REQUIRE(comma != std::string::npos);
    ++seen_a[pair.substr(1, comma - 1)];
    ++seen_b[pair.substr(comma + 2, pair.size() - comma - 3)];
  }
  for (const auto& [value, count] : seen_a)
    CHECK_MESSAGE(count == 1, "range(30) element " << value << " read " << count << " times");
  for (const auto& [value, count] : seen_b)
    CHECK_MESSAGE(count == 1, "range(100, 112) element " << value << " read " << count << " times");
}
