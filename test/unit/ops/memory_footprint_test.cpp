// The job memory budget counts what elements really hold (pipeline/runtime/memory_budget.hpp):
// element_heap_bytes against glibc's own count of the heap in use (mallinfo2), for every element
// shape; the buffering kernels and large allocations stay within their budget; a job budget's
// parent (the worker's --memory-limit) holds for all jobs together.
#include <doctest/doctest.h>

#include <malloc.h>

#include <functional>
#include <memory>

#include "ops_test_util.hpp"
#include "pipeline/graph/text_form.hpp"
#include "pipeline/runtime/memory_budget.hpp"

using namespace conveyor;

namespace {

int64_t heap_in_use() { return static_cast<int64_t>(mallinfo2().uordblks); }

// AddressSanitizer replaces malloc, so glibc's count (mallinfo2) stays at 0 there: the heap
// comparisons run in the normal build only (the budget's own checks run in both).
#if defined(__SANITIZE_ADDRESS__)
constexpr bool kHeapMeasurable = false;
#else
constexpr bool kHeapMeasurable = true;
#endif

// Heap that `count` fresh copies of what `make` builds hold (in a reserved vector, so that only
// the elements' own heap counts), and what element_heap_bytes says they hold.
std::pair<int64_t, int64_t> measured_and_counted(const std::function<Element(int)>& make,
                                                 int count) {
  std::vector<Element> held;
  held.reserve(static_cast<std::size_t>(count));
  const int64_t before = heap_in_use();
  for (int i = 0; i < count; ++i)
    held.push_back(make(i));
  const int64_t measured = heap_in_use() - before;
  int64_t counted = 0;
  for (const Element& e : held)
    counted += element_heap_bytes(e);
  return {measured, counted};
}

Element range_element(int i) { // what range yields: one int64 scalar
  return Element{Tensor::scalar(static_cast<int64_t>(i))};
}

} // namespace

TEST_CASE("memory footprint: element_heap_bytes matches the heap in use within 2x for every "
          "element shape") {
  struct Shape {
    const char* name;
    std::function<Element(int)> make;
    int count;
  };
  const std::vector<Shape> shapes = {
    {"int64 scalar", range_element, 100000},
    {"float vector [100]", [](int) { return Element{Tensor(DType::float32, {100})}; }, 20000},
    {"int32 [2, 3]",
     [](int) {
       return Element{Tensor(DType::int32, {2, 3})};
     },
     50000},
    {"short string", [](int) { return Element{Tensor::scalar("ab")}; }, 100000},
    {"1 KB string",
     [](int i) { return Element{Tensor::scalar(std::string(1000, char('a' + i % 26)))}; }, 5000},
    {"string vector [10] of 30 bytes",
     [](int) {
       return Element{*Tensor::from_values<std::string>(
         {10}, std::vector<std::string>(10, std::string(30, 'x')))};
     },
     10000},
    {"(int64, string, float64 [4]) tuple",
     [](int i) {
       return Element{std::vector<Tensor>{Tensor::scalar(int64_t{i}), Tensor::scalar("abc"),
                                          Tensor(DType::float64, {4})}};
     },
     50000},
    {"1 MB int64 vector", [](int) { return Element{Tensor(DType::int64, {131072})}; }, 20},
  };
  for (const Shape& s : shapes) {
    CAPTURE(s.name);
    auto [measured, counted] = measured_and_counted(s.make, s.count);
    CAPTURE(measured);
    CAPTURE(counted);
    if (!kHeapMeasurable)
      continue;
    CHECK(counted * 2 >= measured);
    CHECK(counted <= measured * 2);
  }
  if (!kHeapMeasurable)
    MESSAGE("heap comparisons skipped: AddressSanitizer's allocator is not counted by mallinfo2");
  // The old count (payload bytes) was ~20x short for scalars.
  CHECK(element_heap_bytes(range_element(1)) + int64_t{sizeof(Element)} > 8 * 10);
}

namespace {

// Runs `text` under `budget` until its first error; returns it together with the heap the still
// alive pipeline holds then (what it buffered before it failed), beyond the heap before it.
std::pair<Status, int64_t> fail_and_measure(const std::string& text, MemoryBudget& budget) {
  test::register_test_functions();
  auto ds = parse_dataset(text);
  REQUIRE_MESSAGE(ds.ok(), ds.status().to_string());
  malloc_trim(0);
  const int64_t before = heap_in_use();
  IteratorContext ctx;
  ctx.memory = &budget;
  auto it = ds->make_iterator(ctx);
  REQUIRE_MESSAGE(it.ok(), it.status().to_string());
  Status st;
  for (int i = 0; i < 10'000'000 && st.ok(); ++i) { // a cache fails only once it holds its budget
    Element e;
    bool end = false;
    st = (*it)->get_next(e, end);
    if (end)
      break;
  }
  return {st, heap_in_use() - before};
}

} // namespace

TEST_CASE("memory budget: shuffle, batch, cache, padded_batch and bytes() fail before holding "
          "twice their budget") {
  constexpr int64_t kLimit = 20'000'000;
  const std::vector<std::pair<std::string, const char*>> cases = {
    {"range(1000000000).shuffle(1000000000)", "`shuffle`"},
    {"range(1000000000).batch(1000000000)", "`batch`"},
    {"range(1000000000).cache().repeat(2)", "`cache`"},
    {"range(1000000000).map(bytes(size=100)).shuffle(1000000000)", "`shuffle`"},
    // Padded to 50 M entries: 400 MB per element, checked before the batch is allocated.
    {"from_tensors([1, 2]).repeat(4).padded_batch(4, padded_shapes=[50000000])", "`padded_batch`"},
    // One element larger than the whole budget: refused before it is built.
    {"range(2).map(bytes(size=600000000))", "`bytes`"},
  };
  for (const auto& [text, op] : cases) {
    CAPTURE(text);
    MemoryBudget budget(kLimit);
    auto [st, held] = fail_and_measure(text, budget);
    CAPTURE(st.to_string());
    CAPTURE(held);
    CHECK(st.code() == ErrorCode::resource_exhausted);
    CHECK(st.message().find(op) != std::string::npos);
    if (kHeapMeasurable)
      CHECK(held < 2 * kLimit);
  }
}

TEST_CASE("memory budget: a parent budget (--memory-limit) holds for its jobs together") {
  MemoryBudget worker(1000, nullptr, "--memory-limit", "the worker's (all jobs together)");
  MemoryBudget a(800, &worker);
  MemoryBudget b(800, &worker);
  CHECK(a.charge(600, "shuffle").ok());
  CHECK(worker.used() == 600);
  Status st = b.charge(600, "batch"); // fits its own 800, not the worker's 1000
  CHECK(st.code() == ErrorCode::resource_exhausted);
  CHECK(st.message().find("--memory-limit") != std::string::npos);
  CHECK(st.message().find("`batch`") != std::string::npos);
  CHECK(b.used() == 0); // refused: nothing stays charged
  CHECK(worker.used() == 600);
  CHECK(b.check(400, "bytes").ok());
  CHECK(b.check(401, "bytes").code() == ErrorCode::resource_exhausted);
  st = a.charge(300, "shuffle"); // its own limit
  CHECK(st.message().find("--job-memory-limit") != std::string::npos);
  a.release(600);
  CHECK(worker.used() == 0);
  MemoryBudget unbounded_job(0, &worker); // only the worker's limit
  CHECK(unbounded_job.charge(1000, "cache").ok());
  CHECK(!unbounded_job.charge(1, "cache").ok());
}

TEST_CASE(
  "memory budget: check_allocation asks the budget of the pipeline running on this thread") {
  CHECK(check_allocation(int64_t{1} << 40, "bytes").ok()); // no pipeline: unbounded
  MemoryBudget budget(1000);
  {
    FunctionMemoryScope scope(&budget);
    CHECK(check_allocation(1000, "bytes").ok());
    Status st = check_allocation(1001, "bytes");
    CHECK(st.code() == ErrorCode::resource_exhausted);
    CHECK(st.message().find("`bytes`") != std::string::npos);
    {
      FunctionMemoryScope inner(nullptr);
      CHECK(check_allocation(1001, "bytes").ok());
    }
    CHECK(!check_allocation(1001, "bytes").ok());
  }
  CHECK(check_allocation(1001, "bytes").ok());
}
