// tf.data's named-job semantics on real processes: a named job is keyed by its name and the
// consumer's iteration index, so readers of one iteration of a named DYNAMIC job together read
// each element exactly once, however late the second one starts (issue 32: two concurrent
// `conveyor read --job-name shared --mode dynamic` each printed the whole dataset, because the
// second one arrived after the first job ended and started the name's next repetition).
#include <doctest/doctest.h>

#include "test/integration/cluster.hpp"

using namespace conveyor;
using namespace conveyor::testing;

namespace {

std::vector<int64_t> range_ints(int64_t n) {
  std::vector<int64_t> all(static_cast<std::size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    all[static_cast<std::size_t>(i)] = i;
  return all;
}

// When the second reader starts, relative to the first.
enum class Stagger { together, mid_read, after_end };

const char* name_of(Stagger s) {
  switch (s) {
    case Stagger::together: return "together";
    case Stagger::mid_read: return "mid-read";
    case Stagger::after_end: return "after the first reader ended";
  }
  return "?";
}

} // namespace

TEST_CASE("named DYNAMIC job: two readers, concurrent or staggered, read each element once") {
  Cluster cluster(2);
  // ~0.5 s of work over the two workers: long enough that the second reader can start while
  // the first one reads; short enough for three rounds.
  constexpr int64_t kElements = 2000;
  const std::string dataset = "range(2000).map(sleep_us(us=500))";
  for (auto stagger : {Stagger::together, Stagger::mid_read, Stagger::after_end}) {
    CAPTURE(name_of(stagger));
    const std::vector<std::string> flags{"--mode",       "dynamic",
                                         "--job-name",   std::string{"shared-"} + name_of(stagger),
                                         "--timeout-ms", "30000"};
    auto a = cluster.start_read(dataset, flags, "reader-a");
    std::unique_ptr<ChildProcess> b;
    if (stagger == Stagger::together)
      b = cluster.start_read(dataset, flags, "reader-b");
    if (stagger == Stagger::mid_read) {
      REQUIRE_MESSAGE(a->wait_for_stdout_lines(100, kReadTimeout), a->describe());
      b = cluster.start_read(dataset, flags, "reader-b");
    }
    REQUIRE_MESSAGE(a->wait_exit(kReadTimeout) == 0, a->describe());
    if (stagger == Stagger::after_end) // iteration 0 of the name ended: b reads end of sequence
      b = cluster.start_read(dataset, flags, "reader-b");
    REQUIRE_MESSAGE(b->wait_exit(kReadTimeout) == 0, b->describe());
    auto lines = a->stdout_lines();
    const auto b_lines = b->stdout_lines();
    lines.insert(lines.end(), b_lines.begin(), b_lines.end());
    auto ints = sorted_ints(lines);
    CHECK_MESSAGE(ints.unparsed.empty(), a->describe() << b->describe());
    CHECK_MESSAGE(ints.sorted == range_ints(kElements),
                  "a read " << a->stdout_lines().size() << ", b read " << b_lines.size() << "\n"
                            << cluster.describe() << b->describe());
    if (stagger == Stagger::after_end)
      CHECK_MESSAGE(b_lines.empty(), b->describe());
  }
  // Reading the name again with the next iteration index reads the data again (tf.data: the
  // N-th re-iteration of a consumer joins iteration N).
  const std::vector<std::string> again{"--mode",          "dynamic",     "--job-name",
                                       "shared-together", "--iteration", "1"};
  auto r = cluster.read("range(2000).map(sleep_us(us=500))", again);
  REQUIRE_MESSAGE(r.exit_code == 0, r.describe);
  CHECK(sorted_ints(r.lines).sorted == range_ints(kElements));
  // --iteration needs a name and is not negative.
  auto unnamed = cluster.read("range(3)", {"--mode", "dynamic", "--iteration", "1"});
  CHECK(unnamed.exit_code != 0);
  CHECK_MESSAGE(unnamed.describe.find("`--iteration` needs `--job-name`") != std::string::npos,
                unnamed.describe);
}
