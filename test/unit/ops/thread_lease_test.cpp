// The thread lease (pipeline/runtime/thread_lease.hpp): what the Python trainer pipeline uses
// to keep the GIL across calls. A call run gives back a lease adopted in it; the waits of a
// prefetch's consumer and of a parallel map give the lease back first and end with its check's
// error, leaving the iterator to go on in order.
#include <doctest/doctest.h>

#include <chrono>
#include <string>
#include <vector>

#include "ops_test_util.hpp"
#include "pipeline/runtime/thread_lease.hpp"

using namespace conveyor;

namespace {

// Counts what the kernels do with it; every check() is an error.
struct CountingLease : ThreadLease {
  int taken = 0;
  int given_back = 0;
  int checks = 0;
  void take() override { ++taken; }
  void give_back() override { ++given_back; }
  Status check() override {
    ++checks;
    return Status(ErrorCode::cancelled, "the test's check");
  }
  std::chrono::milliseconds check_interval() const override { return std::chrono::milliseconds{2}; }
};

// Reads `ds` with `lease` set until a get_next fails (at most 40 elements), then on without it:
// the elements read before and after the error, in order.
std::vector<std::string> read_until_checked(const Dataset& ds, CountingLease& lease,
                                            Status& error) {
  auto it = ds.make_iterator();
  REQUIRE(it.ok());
  std::vector<std::string> seen;
  {
    LeaseScope scope(&lease);
    for (int i = 0; i < 40 && error.ok(); ++i) {
      Element e;
      bool end = false;
      error = (*it)->get_next(e, end);
      if (error.ok())
        seen.push_back(e.to_string());
    }
  }
  for (int i = 0; i < 3; ++i) {
    Element e;
    bool end = false;
    REQUIRE((*it)->get_next(e, end).ok());
    seen.push_back(e.to_string());
  }
  return seen;
}

std::vector<std::string> in_order(std::size_t n) {
  std::vector<std::string> out;
  for (std::size_t i = 0; i < n; ++i)
    out.push_back(std::to_string(i));
  return out;
}

const FunctionRef kSlow{"sleep_us", {{"us", int64_t{20000}}}};

} // namespace

TEST_CASE("a lease adopted in a call run is given back when the outermost run ends") {
  CountingLease lease;
  CHECK_FALSE(CallRun::adopt(&lease)); // no run open: the caller takes its resource per call
  {
    CallRun outer;
    {
      CallRun inner;
      CHECK(CallRun::adopt(&lease));
      CHECK(thread_lease() == &lease);
      CHECK_FALSE(CallRun::adopt(&lease)); // the thread has one
    }
    CHECK(lease.given_back == 0);
    CHECK(thread_lease() == &lease);
  }
  CHECK(lease.given_back == 1);
  CHECK(thread_lease() == nullptr);
}

TEST_CASE("a lease's check ends a prefetch consumer's wait, and the prefetch goes on in order") {
  // The consumer runs a queued fill itself (no wait); one running on a pool thread is waited
  // for, which gives the lease back and checks it every 2 ms.
  CountingLease lease;
  Status error;
  const auto seen = read_until_checked(Dataset::range(1000).map(kSlow).prefetch(1), lease, error);
  CHECK(error.code() == ErrorCode::cancelled);
  CHECK(error.message() == "the test's check");
  CHECK(lease.given_back >= 1);
  CHECK(lease.checks == 1);
  CHECK(seen == in_order(seen.size()));
}

TEST_CASE("a lease's check ends a parallel map's wait, and the map goes on in order") {
  // The consumer runs a queued call itself rather than wait, so it waits only when the pool's
  // threads took both calls first: on a loaded machine a read may never wait. Fresh reads until
  // one did (each of them must stay in order), bounded in time.
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  int reads = 0;
  bool checked = false;
  while (!checked && std::chrono::steady_clock::now() < until) {
    CountingLease lease;
    Status error;
    const auto seen = read_until_checked(Dataset::range(1000).map(kSlow, 2), lease, error);
    ++reads;
    CHECK(seen == in_order(seen.size()));
    if (!error.ok()) {
      CHECK(error.code() == ErrorCode::cancelled);
      CHECK(lease.given_back >= 1);
      checked = true;
    }
  }
  CAPTURE(reads);
  CHECK(checked);
}
