// The embedded interpreter that runs Python functions on a worker (pipeline/functions/python/):
// functions named by "module:function" (the stdlib's, so no pickling is needed here), through the
// registry entries `python`, `python_filter`, `python_flat_map` and real pipelines.
#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <mutex>
#include <csignal>
#include <string>
#include <thread>
#include <vector>

#include "pipeline/functions/functions.hpp"
#include "pipeline/functions/python/embedded_python.hpp"
#include "pipeline/functions/python/process_pool.hpp"
#include "pipeline/functions/python_functions.hpp"
#include "pipeline/graph/dataset.hpp"
#include "pipeline/runtime/result_blocks.hpp"
#include "pipeline/runtime/warnings.hpp"
#include "pipeline/tensor/shared_arena.hpp"
#include "pipeline/tensor/tensor_internals.hpp"

using namespace conveyor;

namespace {

FunctionRef py(const char* registered, const char* import) {
  python::install_embedded_python();
  return FunctionRef{registered, {{"import", std::string{import}}}};
}

std::vector<int64_t> ints(const Dataset& d) {
  auto elements = d.collect();
  REQUIRE_MESSAGE(elements.ok(), elements.status().to_string());
  std::vector<int64_t> out;
  for (const Element& e : *elements)
    out.push_back(e[0].as_int64());
  return out;
}

} // namespace

TEST_CASE("a Python map, filter and flat_map run in the embedded interpreter") {
  CHECK(ints(Dataset::range(4).map(py("python", "operator:neg"))) ==
        std::vector<int64_t>{0, -1, -2, -3});
  CHECK(ints(Dataset::range(4).filter(py("python_filter", "operator:truth"))) ==
        std::vector<int64_t>{1, 2, 3});
  // numpy.arange(x) returns rows: 0..x-1 for every x
  CHECK(ints(Dataset::range(4).flat_map(py("python_flat_map", "numpy:arange"))) ==
        std::vector<int64_t>{0, 0, 1, 0, 1, 2});
  // several parallel calls share the interpreter (each takes the GIL on its own thread)
  CHECK(ints(Dataset::range(50).map(py("python", "operator:neg"), 4)).size() == 50);
}

TEST_CASE("arguments are read-only numpy views, and results of any dtype and strings come back") {
  auto bytes = Dataset::from_tensors(Element{Tensor::scalar(std::string{"abc"})})
                 .map(py("python", "builtins:len"))
                 .collect();
  REQUIRE(bytes.ok());
  CHECK((*bytes)[0][0].as_int64() == 3); // a string scalar arrives as bytes
  auto floats = Dataset::range(3).map(py("python", "math:sqrt")).collect();
  REQUIRE(floats.ok());
  CHECK((*floats)[2][0].dtype() == DType::float64);
  CHECK((*floats)[1][0].as_double() == 1.0);
  auto names = Dataset::range(2).map(py("python", "builtins:str")).collect();
  REQUIRE(names.ok());
  CHECK((*names)[1][0].string_at(0) == "1");
  // Writing into an argument would change storage other elements share.
  Tensor shared = Tensor::vector<int64_t>({1, 2, 3});
  auto write = Dataset::from_tensors(Element{shared})
                 .map(py("python", "numpy:negative"))
                 .map(py("python", "numpy.random:shuffle"))
                 .collect();
  REQUIRE_FALSE(write.ok());
  CHECK(write.status().message().find("read-only") != std::string::npos);
}

TEST_CASE("an exception names the function, the element index and carries the traceback") {
  auto failed = Dataset::range(3).map(py("python", "math:log")).collect();
  REQUIRE_FALSE(failed.ok());
  CHECK(failed.status().code() == ErrorCode::invalid_argument);
  const std::string m = failed.status().message();
  CAPTURE(m);
  // math.log is C code: its traceback is the exception line alone (a Python function's has frames,
  // python/tests/test_python_functions.py)
  CHECK(m == "map function `python` on element 0: Python function `math:log` raised "
             "ValueError: math domain error\nValueError: math domain error");
  // ignore_errors skips it, and the rest arrive
  CHECK(ints(Dataset::range(3)
               .map(py("python", "math:log"))
               .ignore_errors()
               .map(py("python", "math:ceil"))) == std::vector<int64_t>{0, 1});
}

TEST_CASE("a module the worker cannot import is named, with the worker") {
  python::set_python_worker_name("worker 127.0.0.1:1234");
  auto failed = Dataset::range(1).map(py("python", "no_such_module_for_conveyor:f")).collect();
  python::set_python_worker_name("");
  REQUIRE_FALSE(failed.ok());
  CHECK(failed.status().code() == ErrorCode::not_found);
  CHECK(failed.status().message().find(
          "cannot import module `no_such_module_for_conveyor` on worker 127.0.0.1:1234") !=
        std::string::npos);
  CHECK(failed.status().message().find("--python-path") != std::string::npos);

  auto bad = Dataset::range(1).map(py("python", "no-colon")).collect();
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().message().find("expected \"package.module:function\"") != std::string::npos);
  auto negative =
    Dataset::range(1)
      .map(FunctionRef{"python",
                       {{"import", std::string{"operator:neg"}}, {"processes", int64_t{-2}}}})
      .collect();
  REQUIRE_FALSE(negative.ok());
  CHECK(negative.status().message().find("`processes` must be 0 or 1") != std::string::npos);
  auto neither = Dataset::range(1).map(FunctionRef{"python"}).collect();
  REQUIRE_FALSE(neither.ok());
  CHECK(neither.status().message().find("needs exactly one of the parameters `pickle` and "
                                        "`import`") != std::string::npos);
}

TEST_CASE("--python-path entries must be directories") {
  Status st = python::add_python_path("/nonexistent/conveyor-python-path");
  CHECK(st.code() == ErrorCode::invalid_argument);
  CHECK(st.message() == "--python-path `/nonexistent/conveyor-python-path` is not a directory");
  CHECK(python::add_python_path(CONVEYOR_SOURCE_DIR "/python/tests").ok());
}

TEST_CASE("an argument returned unchanged is the same tensor, not a copy") {
  REQUIRE(python::add_python_path(CONVEYOR_SOURCE_DIR "/test/unit/python").ok());
  std::vector<int64_t> values(100);
  Tensor big = Tensor::vector<int64_t>(values);
  auto same =
    Dataset::from_tensors(Element{big}).map(py("python", "conveyor_test_functions:same")).collect();
  REQUIRE(same.ok());
  CHECK((*same)[0][0].data<unsigned char>() == big.data<unsigned char>());
  auto swapped = Dataset::from_tensors(Element{{big, Tensor::scalar(std::string{"label"})}})
                   .map(py("python", "conveyor_test_functions:swap"))
                   .collect();
  REQUIRE(swapped.ok());
  CHECK((*swapped)[0][0].string_at(0) == "label");
  CHECK((*swapped)[0][1].data<unsigned char>() == big.data<unsigned char>());
}

TEST_CASE("processes > 1 runs the function in a pool of interpreter processes") {
  // (before the pool starts: its processes take the worker's sys.path as it is then)
  REQUIRE(python::add_python_path(CONVEYOR_SOURCE_DIR "/test/unit/python").ok());
  FunctionRef neg{"python", {{"import", std::string{"operator:neg"}}, {"processes", int64_t{2}}}};
  python::install_embedded_python();
  std::vector<int64_t> expected;
  for (int64_t i = 0; i < 40; ++i)
    expected.push_back(-i);
  CHECK(ints(Dataset::range(40).map(neg, 2)) == expected);
  // strings and several components travel through the shared memory too
  auto swapped =
    Dataset::from_tensors(Element{{Tensor::vector<int64_t>({1, 2, 3}), Tensor::scalar("x")}})
      .map(FunctionRef{
        "python",
        {{"import", std::string{"conveyor_test_functions:swap"}}, {"processes", int64_t{2}}}})
      .collect();
  REQUIRE_MESSAGE(swapped.ok(), swapped.status().to_string());
  CHECK((*swapped)[0][0].string_at(0) == "x");
  CHECK((*swapped)[0][1] == Tensor::vector<int64_t>({1, 2, 3}));
  FunctionRef log{"python", {{"import", std::string{"math:log"}}, {"processes", int64_t{2}}}};
  auto failed = Dataset::range(2).map(log, 2).collect();
  REQUIRE_FALSE(failed.ok());
  CHECK(failed.status().message().rfind("map function `python` on element 0: Python function "
                                        "`math:log` raised ValueError: math domain error",
                                        0) == 0);
}

TEST_CASE("two pool maps zipped on one thread share the pool: every element, none waits for ever") {
  // Each map keeps 3 calls per process in flight, finished by the thread that reads the map
  // (lazy executor items): while one map's calls hold every process, the other's calls wait for
  // room as blocking calls on that same thread, which hands the first map's calls to the
  // executor's threads before it waits (Executor::publish_lazy).
  REQUIRE(python::add_python_path(CONVEYOR_SOURCE_DIR "/test/unit/python").ok());
  python::install_embedded_python();
  FunctionRef neg{"python", {{"import", std::string{"operator:neg"}}, {"processes", int64_t{2}}}};
  FunctionRef pos{"python", {{"import", std::string{"operator:pos"}}, {"processes", int64_t{2}}}};
  const auto zipped = [&](int64_t n) {
    return Dataset::zip({Dataset::range(n).map(neg, 2), Dataset::range(n).map(pos, 2)});
  };
  auto all = zipped(300).collect();
  REQUIRE_MESSAGE(all.ok(), all.status().to_string());
  REQUIRE(all->size() == 300);
  for (int64_t i = 0; i < 300; ++i) {
    CHECK((*all)[i][0].as_int64() == -i);
    CHECK((*all)[i][1].as_int64() == i);
  }
  // Dropped mid-read, with calls of both maps in flight, again and again.
  for (int64_t n = 1; n <= 13; n += 3) {
    auto some = zipped(100).take(n).collect();
    REQUIRE_MESSAGE(some.ok(), some.status().to_string());
    CHECK(static_cast<int64_t>(some->size()) == n);
  }
}

TEST_CASE("a pool process killed with two requests in flight: both elements run again, once each") {
  python::ProcessPool pool(CONVEYOR_PYTHON_EXECUTABLE, {CONVEYOR_SOURCE_DIR "/test/unit/python"});
  // One process, two calls: the first runs, the second waits in its socket behind it.
  std::vector<Expected<Element>> results(2, internal_error("not run"));
  std::vector<std::thread> calls;
  for (int64_t i = 0; i < 2; ++i)
    calls.emplace_back([&, i] {
      results[i] = pool.call("conveyor_test_functions:slow", true, Element{Tensor::scalar(i)}, 1,
                             "slow", "this test");
    });
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (pool.requests_in_flight() != std::vector<int>{2} &&
         std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  const std::vector<int> victims = pool.pids();
  const bool both_sent = pool.requests_in_flight() == std::vector<int>{2};
  if (both_sent)
    ::kill(victims.at(0), SIGKILL);
  for (auto& t : calls)
    t.join();
  REQUIRE(both_sent);
  for (int64_t i = 0; i < 2; ++i) {
    REQUIRE_MESSAGE(results[i].ok(), results[i].status().to_string());
    CHECK((*results[i])[0].as_int64() == i);
  }
  REQUIRE(pool.pids().size() == 1);
  CHECK(pool.pids()[0] != victims[0]); // a fresh process ran them
}

namespace {

// Polls (bounded: 60 s) until the pool's processes have `want` requests sent and unanswered.
bool wait_in_flight(const python::ProcessPool& pool, const std::vector<int>& want) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (pool.requests_in_flight() != want && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  return pool.requests_in_flight() == want;
}

} // namespace

TEST_CASE("pool calls started without a waiting thread: rerun after a kill, and a dropped one") {
  python::ProcessPool pool(CONVEYOR_PYTHON_EXECUTABLE, {CONVEYOR_SOURCE_DIR "/test/unit/python"});
  const auto scalar = [](int64_t v) { return Element{Tensor::scalar(v)}; };
  const auto slow = [&](int64_t v) {
    return pool.start("conveyor_test_functions:slow", true, scalar(v), 1, "slow", "this test");
  };
  // start() never starts a process (a thread that may wait does): a blocking call makes one.
  CHECK(!pool.start("operator:neg", true, scalar(1), 1, "neg", "this test"));
  auto neg = pool.call("operator:neg", true, scalar(5), 1, "neg", "this test");
  REQUIRE_MESSAGE(neg.ok(), neg.status().to_string());
  CHECK((*neg)[0].as_int64() == -5);
  // kPoolCalls per process: two requests in its socket, one queued in the worker.
  auto a = slow(0);
  auto b = slow(1);
  auto c = slow(2);
  REQUIRE(a);
  REQUIRE(b);
  REQUIRE(c);
  CHECK(!slow(3));
  // start() copies and sends nothing (on the map's thread): the calls' own threads do.
  CHECK(pool.requests_in_flight() == std::vector<int>{0});
  std::vector<Expected<Element>> results(3, internal_error("not run"));
  std::vector<std::thread> threads;
  threads.emplace_back([&] { results[0] = a(); }); // sends a and b (two slots), not c
  const bool two_sent = wait_in_flight(pool, {2});
  threads.emplace_back([&] { results[1] = b(); });
  threads.emplace_back([&] { results[2] = c(); }); // waits for a slot
  const int victim = pool.pids().at(0);
  if (two_sent)
    ::kill(victim, SIGKILL); // a and b run again; c, never sent, runs as a first call
  for (auto& t : threads)
    t.join();
  REQUIRE(two_sent);
  for (int64_t i = 0; i < 3; ++i) {
    REQUIRE_MESSAGE(results[i].ok(), results[i].status().to_string());
    CHECK((*results[i])[0].as_int64() == i);
  }
  REQUIRE(pool.pids().size() == 1);
  CHECK(pool.pids()[0] != victim);
  // Dropped unfinished (its map went away) before anything sent it: it leaves the queue.
  slow(7);
  CHECK(pool.requests_in_flight() == std::vector<int>{0});
  // Dropped after another call's thread sent it: its reply is read there, not by the next call.
  auto x = slow(8);
  auto y = pool.start("operator:neg", true, scalar(3), 1, "neg", "this test");
  REQUIRE(x);
  REQUIRE(y);
  Expected<Element> ry = internal_error("not run");
  std::thread ty([&] { ry = y(); }); // sends x, then y, and waits for x's reply to be read
  const bool both_sent = wait_in_flight(pool, {2});
  x = nullptr;
  ty.join();
  REQUIRE(both_sent);
  REQUIRE_MESSAGE(ry.ok(), ry.status().to_string());
  CHECK((*ry)[0].as_int64() == -3);
  CHECK(pool.requests_in_flight() == std::vector<int>{0});
  // Several queued calls dropped before any copy ran: nothing is sent, the process is free.
  auto d1 = slow(9);
  auto d2 = slow(10);
  auto d3 = slow(11);
  REQUIRE(d3);
  d1 = d2 = d3 = nullptr;
  CHECK(pool.requests_in_flight() == std::vector<int>{0});
  auto after = pool.call("operator:neg", true, scalar(4), 1, "neg", "this test");
  REQUIRE_MESSAGE(after.ok(), after.status().to_string());
  CHECK((*after)[0].as_int64() == -4);
}

namespace {

// 1 MiB of `value`: big enough that pool results come back in result blocks.
Element megabyte(uint8_t value) {
  Tensor t(DType::uint8, Shape{1 << 20});
  std::fill_n(t.mutable_data<uint8_t>(), 1 << 20, value);
  return Element{std::move(t)};
}

// 1 MiB of `value` in the shared arena (as decoders, batch and numpy arrays make them).
Element arena_megabyte(uint8_t value) {
  Tensor t = TensorInternals::uninitialized(DType::uint8, Shape{1 << 20});
  std::fill_n(t.mutable_data<uint8_t>(), 1 << 20, value);
  REQUIRE(SharedArena::instance().locate(t.bytes().data(), t.bytes().size()));
  return Element{std::move(t)};
}

bool all_bytes(const Expected<Element>& e, uint8_t value) {
  REQUIRE_MESSAGE(e.ok(), e.status().to_string());
  const ByteView bytes = (*e)[0].bytes();
  return bytes.size() == (1u << 20) &&
         std::all_of(bytes.begin(), bytes.end(), [&](unsigned char b) { return b == value; });
}

} // namespace

TEST_CASE("pool results in result blocks: kept ones keep their bytes, a copy when none is free, "
          "and they outlive the pool") {
  auto pool = std::make_unique<python::ProcessPool>(
    CONVEYOR_PYTHON_EXECUTABLE, std::vector<std::string>{CONVEYOR_SOURCE_DIR "/test/unit/python"});
  const auto plus_one = [&](uint8_t v) {
    return pool->call("conveyor_test_functions:plus_one", true, megabyte(v), 1, "plus_one",
                      "this test");
  };
  auto kept = plus_one(0);
  CHECK(all_bytes(kept, 1));
  // Later results reuse the blocks they release, never the kept one's.
  for (uint8_t v = 1; v <= 20; ++v)
    CHECK(all_bytes(plus_one(v), v + 1));
  CHECK(all_bytes(kept, 1));
  CHECK(pool->results_copied() == 0); // every result was viewed in place
  // More results kept than there are blocks: the kept one holds one, 63 more take the rest, and
  // the last 7 are copied out of the process's output region.
  std::vector<Expected<Element>> held;
  for (int i = 0; i < 70; ++i)
    held.push_back(plus_one(static_cast<uint8_t>(i)));
  for (int i = 0; i < 70; ++i)
    CHECK(all_bytes(held[i], static_cast<uint8_t>(i + 1)));
  CHECK(pool->results_copied() == 7);
  held.clear(); // their blocks are free again
  CHECK(all_bytes(plus_one(41), 42));
  CHECK(pool->results_copied() == 7);
  CHECK(all_bytes(kept, 1));
  // The pool and its processes end; the kept tensor still holds its block.
  auto late = plus_one(9);
  pool.reset();
  CHECK(all_bytes(kept, 1));
  CHECK(all_bytes(late, 10));
}

TEST_CASE("a pool process killed with two 1 MiB requests in flight: both rerun once, each with "
          "its own block") {
  // Elements on the heap are copied into the process's input region; those in the shared arena
  // are read where they lie, by the dead process and then by its replacement.
  for (const bool in_arena : {false, true}) {
    CAPTURE(in_arena);
    const auto make = in_arena ? &arena_megabyte : &megabyte;
    python::ProcessPool pool(CONVEYOR_PYTHON_EXECUTABLE, {CONVEYOR_SOURCE_DIR "/test/unit/python"});
    auto first =
      pool.call("conveyor_test_functions:plus_one", true, make(100), 1, "plus_one", "this test");
    CHECK(all_bytes(first, 101));
    auto a =
      pool.start("conveyor_test_functions:slow_plus_one", true, make(1), 1, "slow", "this test");
    auto b =
      pool.start("conveyor_test_functions:slow_plus_one", true, make(2), 1, "slow", "this test");
    REQUIRE(a);
    REQUIRE(b);
    Expected<Element> ra = internal_error("not run");
    std::thread ta([&] { ra = a(); }); // sends both
    const bool both_sent = wait_in_flight(pool, {2});
    const int victim = pool.pids().at(0);
    if (both_sent)
      ::kill(victim, SIGKILL);
    auto rb = b();
    ta.join();
    REQUIRE(both_sent);
    CHECK(all_bytes(ra, 2));
    CHECK(all_bytes(rb, 3));
    REQUIRE(pool.pids().size() == 1);
    CHECK(pool.pids()[0] != victim);
    std::vector<Expected<Element>> more;
    for (uint8_t v = 10; v < 14; ++v)
      more.push_back(
        pool.call("conveyor_test_functions:plus_one", true, make(v), 1, "plus_one", "this test"));
    for (uint8_t v = 10; v < 14; ++v)
      CHECK(all_bytes(more[v - 10], v + 1));
    CHECK(all_bytes(first, 101)); // the dead process's block, still viewed
    CHECK(all_bytes(ra, 2));
    CHECK(all_bytes(rb, 3));
    CHECK(pool.results_copied() == 0);
    CHECK((in_arena ? pool.arguments_copied() : pool.arguments_in_place()) == 0);
  }
}

TEST_CASE("pool calls whose threads copy their 1 MiB elements at once: each result is its own "
          "element's") {
  python::ProcessPool pool(CONVEYOR_PYTHON_EXECUTABLE, {CONVEYOR_SOURCE_DIR "/test/unit/python"});
  REQUIRE(all_bytes(
    pool.call("conveyor_test_functions:plus_one", true, megabyte(0), 1, "plus_one", "this test"),
    1));
  for (int round = 0; round < 20; ++round) {
    // kPoolCalls, each finished on a thread of its own: the threads take the slots as they
    // free up and copy into them at the same time.
    std::vector<std::function<Expected<Element>()>> calls;
    for (int i = 0; i < kPoolCalls; ++i) {
      const auto v = static_cast<uint8_t>(round * 10 + i);
      calls.push_back(pool.start("conveyor_test_functions:plus_one", true, megabyte(v), 1,
                                 "plus_one", "this test"));
      REQUIRE(calls.back());
    }
    std::vector<Expected<Element>> results(calls.size(), internal_error("not run"));
    std::vector<std::thread> threads;
    for (std::size_t i = 0; i < calls.size(); ++i)
      threads.emplace_back([&, i] { results[i] = calls[i](); });
    for (auto& t : threads)
      t.join();
    for (std::size_t i = 0; i < calls.size(); ++i)
      CHECK(all_bytes(results[i], static_cast<uint8_t>(round * 10 + i + 1)));
  }
  CHECK(pool.requests_in_flight() == std::vector<int>{0});
}

namespace {

Expected<Element> pool_call(python::ProcessPool& pool, const std::string& function,
                            const Element& in, int64_t processes = 1) {
  return pool.call("conveyor_test_functions:" + function, true, in, processes, function,
                   "this test");
}

Expected<Element> pool_call(python::ProcessPool& pool, const std::string& function, uint8_t v,
                            int64_t processes = 1) {
  return pool_call(pool, function, megabyte(v), processes);
}

// The pipeline warnings given while it lives.
class Warnings {
public:
  Warnings() {
    set_pipeline_warning_handler([this](const std::string& m) {
      std::lock_guard<std::mutex> lock{mu_};
      messages_.push_back(m);
    });
  }
  ~Warnings() { set_pipeline_warning_handler({}); }
  std::vector<std::string> messages() {
    std::lock_guard<std::mutex> lock{mu_};
    return messages_;
  }

private:
  std::mutex mu_;
  std::vector<std::string> messages_;
};

} // namespace

TEST_CASE("a pool result numpy makes in its result block is not copied, a view inside it neither") {
  REQUIRE_FALSE(python::pool_allocator_module().empty()); // build/conveyor_pool_alloc.so
  python::ProcessPool pool(CONVEYOR_PYTHON_EXECUTABLE, {CONVEYOR_SOURCE_DIR "/test/unit/python"});
  std::vector<Expected<Element>> results;
  for (uint8_t v = 0; v < 10; ++v)
    results.push_back(pool_call(pool, "plus_one", v));
  for (uint8_t v = 0; v < 10; ++v)
    CHECK(all_bytes(results[v], v + 1));
  CHECK(pool.results_placed() == 10);
  CHECK(pool.results_copied() == 0);
  auto half = pool_call(pool, "plus_one_second_half", 7);
  REQUIRE_MESSAGE(half.ok(), half.status().to_string());
  const ByteView bytes = (*half)[0].bytes();
  CHECK(bytes.size() == (1u << 19));
  CHECK(std::all_of(bytes.begin(), bytes.end(), [](unsigned char b) { return b == 8; }));
  CHECK(pool.results_placed() == 11);
}

TEST_CASE("a pool function that keeps and later changes its result does not change the elements "
          "the worker has; its blocks are reused once it lets them go") {
  python::ProcessPool pool(CONVEYOR_PYTHON_EXECUTABLE, {CONVEYOR_SOURCE_DIR "/test/unit/python"});
  std::vector<Expected<Element>> results;
  // Each call sets the array it kept last time to 255: the worker's copies must not see that. More
  // calls than there are blocks: the process holds them all, later requests get none.
  for (int i = 0; i < ResultBlocks::kMaxBlocks + 6; ++i)
    results.push_back(
      pool_call(pool, i % 2 ? "plus_one_keeps_view" : "plus_one_kept", static_cast<uint8_t>(i)));
  auto failed = pool_call(pool, "plus_one_kept_then_raise", 3);
  REQUIRE_FALSE(failed.ok());
  CHECK(failed.status().message().find("kept an array, then failed") != std::string::npos);
  for (int i = 0; i < ResultBlocks::kMaxBlocks + 6; ++i)
    CHECK(all_bytes(results[i], static_cast<uint8_t>(i + 1)));
  CHECK(pool.results_placed() == 0);
  CHECK(pool.results_copied() == ResultBlocks::kMaxBlocks + 6);
  // It drops what it kept: the next reply releases the blocks, and results are placed again.
  CHECK(all_bytes(pool_call(pool, "release_kept", 20), 21));
  std::vector<Expected<Element>> later;
  for (uint8_t v = 30; v < 40; ++v)
    later.push_back(pool_call(pool, "plus_one", v));
  for (uint8_t v = 30; v < 40; ++v)
    CHECK(all_bytes(later[v - 30], v + 1));
  CHECK(pool.results_placed() == 10);
  for (int i = 0; i < ResultBlocks::kMaxBlocks + 6; ++i)
    CHECK(all_bytes(results[i], static_cast<uint8_t>(i + 1)));
  // A call that fails after keeping the array it made in its block: the process keeps that block
  // (leased again, the block freed last, numpy could not place the next result there).
  REQUIRE_FALSE(pool_call(pool, "plus_one_kept_then_raise", 3).ok());
  std::vector<Expected<Element>> after;
  for (uint8_t v = 50; v < 55; ++v)
    after.push_back(pool_call(pool, "plus_one", v));
  CHECK(pool.results_placed() == 15);
  CHECK(all_bytes(pool_call(pool, "plus_one_kept", 60), 61)); // sets the failed call's array
  for (uint8_t v = 50; v < 55; ++v)
    CHECK(all_bytes(after[v - 50], v + 1));
}

TEST_CASE("without the allocator module the pool processes copy results into their blocks, with "
          "a warning") {
  Warnings warnings;
  {
    python::ProcessPool pool(CONVEYOR_PYTHON_EXECUTABLE, {CONVEYOR_SOURCE_DIR "/test/unit/python"},
                             "");
    for (uint8_t v = 0; v < 3; ++v)
      CHECK(all_bytes(pool_call(pool, "plus_one", v), v + 1));
    CHECK(pool.results_placed() == 0);
    CHECK(pool.results_copied() == 0); // still in blocks, copied there by the pool process
  }
  REQUIRE(warnings.messages().size() == 1);
  CHECK(warnings.messages()[0].find("no conveyor_pool_alloc.so") != std::string::npos);
  // One the pool processes cannot load: they say so (once for the pool).
  python::ProcessPool pool(CONVEYOR_PYTHON_EXECUTABLE, {CONVEYOR_SOURCE_DIR "/test/unit/python"},
                           CONVEYOR_SOURCE_DIR "/no/such/conveyor_pool_alloc.so");
  std::vector<Expected<Element>> results(6, internal_error("not run"));
  std::vector<std::thread> calls; // on two processes
  for (uint8_t v = 0; v < 6; ++v)
    calls.emplace_back([&, v] { results[v] = pool_call(pool, "plus_one", v, 2); });
  for (auto& t : calls)
    t.join();
  REQUIRE(pool.pids().size() == 2);
  for (uint8_t v = 0; v < 6; ++v)
    CHECK(all_bytes(results[v], v + 1));
  CHECK(pool.results_placed() == 0);
  REQUIRE(warnings.messages().size() == 2);
  CHECK(warnings.messages()[1].find("could not load conveyor_pool_alloc") != std::string::npos);
}

TEST_CASE("pool arguments in the shared arena are read where they lie: each call its own bytes, "
          "and a new process is sent the chunk again") {
  REQUIRE(SharedArena::instance().enabled());
  python::ProcessPool pool(CONVEYOR_PYTHON_EXECUTABLE, {CONVEYOR_SOURCE_DIR "/test/unit/python"});
  // Each element is freed before the next is made: they take the same range in turn, so a call
  // that read a stale copy, or ran after its element was gone, would see another value.
  for (int v = 0; v < 40; ++v)
    CHECK(all_bytes(pool_call(pool, "plus_one", arena_megabyte(static_cast<uint8_t>(v))), v + 1));
  CHECK(pool.arguments_in_place() == 40);
  CHECK(pool.arguments_copied() == 0);
  // Storage outside the arena is copied.
  CHECK(all_bytes(pool_call(pool, "plus_one", megabyte(7)), 8));
  CHECK(pool.arguments_copied() == 1);
  // Two components, one in the arena and one not.
  Element both = arena_megabyte(3);
  both.components.push_back(megabyte(4)[0]);
  CHECK(all_bytes(pool.call("conveyor_test_functions:add", true, both, 1, "add", "this test"), 7));
  CHECK(pool.arguments_in_place() == 41);
  CHECK(pool.arguments_copied() == 2);
  // A process started after a kill maps the chunk it was never sent.
  const int victim = pool.pids().at(0);
  ::kill(victim, SIGKILL);
  for (int v = 50; v < 53; ++v)
    CHECK(all_bytes(pool_call(pool, "plus_one", arena_megabyte(static_cast<uint8_t>(v))), v + 1));
  REQUIRE(pool.pids().size() == 1);
  CHECK(pool.pids()[0] != victim);
  // With the arena off, the same tensors are made on the heap and copied.
  SharedArena::instance().set_enabled(false);
  Tensor heap = TensorInternals::uninitialized(DType::uint8, Shape{1 << 20});
  SharedArena::instance().set_enabled(true);
  std::fill_n(heap.mutable_data<uint8_t>(), 1 << 20, uint8_t{9});
  CHECK_FALSE(SharedArena::instance().locate(heap.bytes().data(), heap.bytes().size()));
  const uint64_t copied = pool.arguments_copied();
  CHECK(all_bytes(pool_call(pool, "plus_one", Element{heap}), 10));
  CHECK(pool.arguments_copied() == copied + 1);
}
