// Helpers shared by the op kernel tests: running datasets, printing results, scratch files, the
// test-only functions (names prefixed `test_`) and a scripted SplitProvider.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <random>
#include <string>
#include <vector>

#include "pipeline/graph/dataset.hpp"
#include "pipeline/functions/functions.hpp"
#include "pipeline/runtime/iterator.hpp"
#include "pipeline/sharding/split_provider.hpp"

namespace conveyor::test {

// Registers the test_ functions into the global registry (idempotent). Sources
// test_saving_source(n) and test_unsaved_source(n) yield 0..n-1; only the first one's iterator
// saves its position. Source test_varying_source yields 0..varying_length-1 and is registered
// skip_by_count.
void register_test_functions();
// How many times test_count_calls ran.
extern std::atomic<int64_t> count_calls;
extern std::atomic<int64_t> varying_length;

// All elements of `it`; the status of the first error (or OK). Stops after `limit` elements.
Status drain(Iterator& it, std::vector<Element>& out, int64_t limit = 100000);
// All elements of `ds` (a default context); a failed REQUIRE on error.
std::vector<Element> run(const Dataset& ds);
// The first error `ds` gives while iterating (or making its iterator); OK if none.
Status first_error(const Dataset& ds);

// "[0, (1, 2), \"a\"]": the elements' literals, to compare with tf.data's documented outputs.
std::string str(const std::vector<Element>& elements);
// run(ds) printed.
std::string show(const Dataset& ds);

Element ints(const std::vector<int64_t>& values); // a rank-1 int64 tensor

// A fresh directory under the build tree, removed (with its content) by the destructor.
class TempDir {
public:
  TempDir();
  ~TempDir();
  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

private:
  std::string path_;
};
void write_file(const std::string& path, const std::string& content);

// Hands out scripted splits epoch by epoch like the job's provider: end_of_splits after each
// epoch, always end_of_splits after the last. With `unavailable_probability` > 0 it answers
// `unavailable` at seeded random calls instead (then hands out the same split on a later call).
class FakeSplitProvider : public SplitProvider {
public:
  FakeSplitProvider(std::vector<std::vector<Split>> epochs, double unavailable_probability = 0,
                    uint64_t seed = 1);
  // Index-range splits of `split_size` over `num_elements`, `num_epochs` times.
  static std::vector<std::vector<Split>> range_splits(int64_t num_elements, int64_t split_size,
                                                      int64_t num_epochs);

  Status get_next(Split& out, bool& end_of_splits) override;
  SplitPosition position() const override { return {epoch_, next_}; }
  Status restore(const SplitPosition& pos) override;

  int64_t unavailable_count() const { return unavailable_count_; }
  static const char* unavailable_message() { return "fake: next split not here yet"; }

private:
  std::vector<std::vector<Split>> epochs_;
  double probability_;
  std::mt19937_64 rng_;
  int64_t epoch_ = 0;
  int64_t next_ = 0;
  int64_t unavailable_count_ = 0;
};

} // namespace conveyor::test
