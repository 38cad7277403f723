// DYNAMIC sharding end to end: iterators fed by a split provider produce exactly the elements of
// the plain iteration, with one worker and with several sharing the provider.
#include <doctest/doctest.h>

#include <algorithm>
#include <vector>

#include "pipeline/graph/dataset.hpp"
#include "pipeline/functions/functions.hpp"
#include "pipeline/runtime/iterator.hpp"
#include "pipeline/sharding/split_provider.hpp"
#include "test/unit/sharding/iterator_reads.hpp"
#include "test/unit/sharding/temp_dir.hpp"

using namespace conveyor;

namespace {

// A registry of its own, so the test does not depend on the built-in function names.
const FunctionRegistry& test_functions() {
  static FunctionRegistry* registry = [] {
    auto* r = new FunctionRegistry;
    FunctionDef square;
    square.name = "square";
    square.kind = FunctionKind::map;
    square.map = [](const Element& e, const Params&) -> Expected<Element> {
      const int64_t v = e[0].as_int64();
      return Element(Tensor::scalar(v * v));
    };
    Status st = r->add(std::move(square));
    REQUIRE_MESSAGE(st.ok(), st.to_string());
    return r;
  }();
  return *registry;
}

constexpr int kMaxElements = 10000; // bound on every drain loop

std::unique_ptr<Iterator> iterator_for(const Dataset& ds, SplitProvider* provider) {
  IteratorContext ctx;
  ctx.functions = &test_functions();
  ctx.split_provider = provider;
  auto it = ds.make_iterator(ctx);
  REQUIRE_MESSAGE(it.ok(), it.status().to_string());
  return std::move(*it);
}

std::vector<Element> drain(Iterator& it) { return testing::read_all(it, kMaxElements); }

std::vector<std::string> texts(const std::vector<Element>& elements) {
  std::vector<std::string> out;
  for (const auto& e : elements)
    out.push_back(e.to_string());
  return out;
}

std::vector<Element> plain(const Dataset& ds) {
  auto it = iterator_for(ds, nullptr);
  return drain(*it);
}

std::vector<Element> through_provider(const Dataset& ds, int64_t split_size) {
  SplitOptions options;
  options.range_split_size = split_size;
  auto provider = make_split_provider(ds, options);
  REQUIRE_MESSAGE(provider.ok(), provider.status().to_string());
  auto it = iterator_for(ds, provider->get());
  return drain(*it);
}

// `workers` iterators share one provider and are asked for an element in turn (round robin)
// until all have ended — the way tasks on several workers pull splits from one job.
std::vector<Element> round_robin(const Dataset& ds, int workers, int64_t split_size) {
  SplitOptions options;
  options.range_split_size = split_size;
  auto provider = make_split_provider(ds, options);
  REQUIRE_MESSAGE(provider.ok(), provider.status().to_string());
  std::vector<std::unique_ptr<Iterator>> its;
  for (int w = 0; w < workers; ++w)
    its.push_back(iterator_for(ds, provider->get()));
  return testing::read_round_robin(its, kMaxElements);
}

std::vector<std::string> sorted_texts(const std::vector<Element>& elements) {
  std::vector<std::string> t = texts(elements);
  std::sort(t.begin(), t.end());
  return t;
}

} // namespace

TEST_CASE("one worker: range(10).map(square).batch(3) through a provider equals plain iteration") {
  const Dataset ds = Dataset::range(10).map("square").batch(3);
  const std::vector<Element> expected = plain(ds);
  CHECK(texts(expected) ==
        std::vector<std::string>{"[0, 1, 4]", "[9, 16, 25]", "[36, 49, 64]", "[81]"});
  // Splits of 4 do not line up with batches of 3: batches still span splits seamlessly.
  CHECK(through_provider(ds, 4) == expected);
  CHECK(through_provider(ds, 1) == expected);
  CHECK(through_provider(ds, 64) == expected);
}

TEST_CASE("one worker: range(7).repeat(2) takes the second epoch's splits") {
  const Dataset ds = Dataset::range(7).repeat(2);
  const std::vector<Element> expected = plain(ds);
  REQUIRE(expected.size() == 14);
  CHECK(through_provider(ds, 3) == expected);
}

TEST_CASE("one worker: range with a start and step, and from_tensor_slices") {
  const Dataset stepped = Dataset::range(3, 30, 4).map("square");
  CHECK(through_provider(stepped, 2) == plain(stepped));
  const Dataset slices =
    Dataset::from_tensor_slices(Element{{Tensor::vector<int64_t>({5, 6, 7, 8, 9}),
                                         Tensor::vector<std::string>({"a", "b", "c", "d", "e"})}});
  CHECK(texts(plain(slices)).front() == "(5, \"a\")");
  CHECK(through_provider(slices, 2) == plain(slices));
}

TEST_CASE("one worker: a text_lines file set through a provider equals plain iteration") {
  testing::TempDir dir;
  REQUIRE(dir.ok());
  const Dataset ds =
    Dataset::text_lines({dir.write("one.txt", {"a", "b"}), dir.write("two.txt", {"c"}),
                         dir.write("three.txt", {"d", "e", "f"})});
  const std::vector<Element> expected = plain(ds);
  CHECK(texts(expected) ==
        std::vector<std::string>{"\"a\"", "\"b\"", "\"c\"", "\"d\"", "\"e\"", "\"f\""});
  CHECK(through_provider(ds, 64) == expected);
}

TEST_CASE("one worker: list_files through a provider lists the same files in the same order") {
  testing::TempDir dir;
  REQUIRE(dir.ok());
  for (const char* name : {"c", "a", "b", "d"})
    dir.write(name, {"x"});
  const Dataset sorted = Dataset::list_files(dir.path() + "/*", /*shuffle=*/false);
  CHECK(through_provider(sorted, 64) == plain(sorted));
  // Seeded: the provider shuffles each epoch exactly as the list_files kernel shuffles each
  // iteration, so one worker sees the plain order.
  const Dataset shuffled =
    Dataset::list_files(dir.path() + "/*", /*shuffle=*/true, /*seed=*/3).repeat(2);
  const std::vector<Element> expected = plain(shuffled);
  REQUIRE(expected.size() == 8);
  CHECK(sorted_texts(expected) == sorted_texts(plain(sorted.repeat(2))));
  CHECK(through_provider(shuffled, 64) == expected);
}

TEST_CASE("three workers sharing one provider see each element exactly once overall") {
  const Dataset ds = Dataset::range(20).map("square");
  const std::vector<std::string> expected = sorted_texts(plain(ds));
  REQUIRE(expected.size() == 20);
  CHECK(sorted_texts(round_robin(ds, 3, 3)) == expected);
  CHECK(sorted_texts(round_robin(ds, 3, 1)) == expected);

  testing::TempDir dir;
  REQUIRE(dir.ok());
  std::vector<std::string> files;
  for (int f = 0; f < 5; ++f)
    files.push_back(
      dir.write("f" + std::to_string(f), {std::to_string(f) + "a", std::to_string(f) + "b"}));
  const Dataset lines = Dataset::text_lines(files);
  const std::vector<std::string> all_lines = sorted_texts(plain(lines));
  REQUIRE(all_lines.size() == 10);
  CHECK(sorted_texts(round_robin(lines, 3, 64)) == all_lines);
}
