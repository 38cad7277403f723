// Reproducible order (`conveyor read --deterministic`, DistributeOptions::deterministic) with
// real processes: a DYNAMIC read prints the dataset's elements in the order one worker gives —
// the dataset's own order for these sources — on 1, 2 and 4 workers, with a filter that empties
// splits, with a worker SIGKILLed mid-read, with the dispatcher SIGKILLed and restarted on its
// work dir mid-read, and across trainers SIGKILLed and resumed from their cursors (the consumed
// prefixes, concatenated, are that order).
#include <doctest/doctest.h>

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <csignal>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <random>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "test/integration/cluster.hpp"
#include "test/integration/restartable_nodes.hpp"
#include "test/unit/sharding/temp_dir.hpp"
#include "conveyor/options.hpp"
#include "pipeline/graph/text_form.hpp"
#include "pipeline/sharding/deterministic_split.hpp"
#include "pipeline/sharding/read_cursor.hpp"
#include "pipeline/io/tfrecord.hpp"
#include "pipeline/tensor/codec.hpp"

using conveyor::testing::ChildProcess;
using conveyor::testing::Cluster;
using conveyor::testing::Millis;

namespace {

// The dataset's elements read locally, in order: what a deterministic read must print.
std::vector<std::string> in_order(const std::string& dataset) {
  auto parsed = conveyor::parse_dataset(dataset);
  REQUIRE_MESSAGE(parsed.ok(), parsed.status().to_string());
  auto elements = parsed->collect();
  REQUIRE_MESSAGE(elements.ok(), elements.status().to_string());
  std::vector<std::string> lines;
  for (const auto& e : *elements)
    lines.push_back(e.to_string());
  return lines;
}

const std::vector<std::string> kDeterministic{"--mode", "dynamic", "--deterministic"};

void check_in_order(const Cluster& cluster, const std::string& dataset) {
  auto r = cluster.read(dataset, kDeterministic);
  REQUIRE_MESSAGE(r.exit_code == std::optional<int>{0}, r.describe);
  const auto expected = in_order(dataset);
  CHECK(r.lines.size() == expected.size());
  CHECK_MESSAGE(r.lines == expected, cluster.describe());
}

std::string temp_path(const std::string& what) {
  static int counter = 0;
  return (std::filesystem::temp_directory_path() /
          ("conveyor_det_" + what + "_" + std::to_string(::getpid()) + "_" +
           std::to_string(++counter)))
    .string();
}

// The read cursor `conveyor read --checkpoint-to` wrote to `path`, decoded; the file removed.
conveyor::ReadCursor taken_cursor(const std::string& path) {
  std::ifstream in(path);
  const std::string blob{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  std::error_code ec;
  std::filesystem::remove(path, ec);
  auto decoded = conveyor::ReadCursor::decode(blob, "the cursor file");
  REQUIRE_MESSAGE(decoded.ok(), decoded.status().to_string());
  return std::move(*decoded);
}

} // namespace

TEST_CASE("deterministic: the same sequence on 1, 2 and 4 workers - also with a filter that "
          "empties splits") {
  // Workers of different speeds would interleave these without the reorder.
  const std::string mapped = "range(3000).map(sleep_us(us=100))";
  const std::string filtered = "range(4000).map(sleep_us(us=50)).filter(mod_eq(m=100, r=3))";
  Cluster cluster(1);
  for (int workers : {1, 2, 4}) {
    while (static_cast<int>(cluster.num_workers()) < workers)
      cluster.add_worker();
    INFO(workers << " worker(s)");
    check_in_order(cluster, mapped);
    check_in_order(cluster, filtered);
  }
}

TEST_CASE("deterministic: a worker SIGKILLed mid-read - the sequence is still the 1-worker one") {
  Cluster cluster(3, {"--worker-timeout", "1500"});
  const std::string dataset = "range(4000).map(sleep_us(us=500))";
  auto reader = cluster.start_read(dataset, kDeterministic, "reader");
  REQUIRE_MESSAGE(reader->wait_for_stdout_lines(800, Millis{60000}), reader->describe());
  cluster.worker(1).signal(SIGKILL);
  auto code = reader->wait_exit(Millis{60000});
  REQUIRE_MESSAGE(code == std::optional<int>{0},
                  std::string(reader->describe() + cluster.describe()));
  CHECK(reader->stdout_lines() == in_order(dataset));
}

TEST_CASE("deterministic: the dispatcher SIGKILLed mid-read and restarted on its work dir - the "
          "same sequence, and the hold stays within the window") {
  using namespace conveyor::testing;
  TempDir dir;
  REQUIRE(dir.ok());
  const std::string wd = dir.path() + "/work";
  // Splits of 50 elements; every other one is empty after the filter, so the reader learns that
  // it is over only from the job's finished-split log (journaled, served again after the restart).
  const std::vector<std::string> flags{"--range-split-size", "50"};
  auto d1 = start_dispatcher(free_port(), wd, "dispatcher1", flags);
  const uint16_t port = *d1->wait_listening(kStartTimeout);
  auto w1 = start_worker(port, "worker1");
  auto w2 = start_worker(port, "worker2");
  REQUIRE(w1->wait_for_output("worker: ready", kStartTimeout));
  REQUIRE(w2->wait_for_output("worker: ready", kStartTimeout));
  // ~1.8 s for both workers together.
  const std::string dataset = "range(12000).map(sleep_us(us=300)).filter(mod_eq(m=100, r=3))";
  auto reader = ChildProcess::conveyor({"read", "--dispatcher", addr(port), "--dataset", dataset,
                                        "--mode", "dynamic", "--deterministic", "--stats"},
                                       "read");
  REQUIRE(reader.ok());
  REQUIRE_MESSAGE(d1->wait_for_output("created job", kReadTimeout), d1->describe());
  std::this_thread::sleep_for(std::chrono::milliseconds(600)); // (well into the read)
  REQUIRE_FALSE((*reader)->exited());
  d1->signal(SIGKILL);
  REQUIRE(d1->wait_exit(kStartTimeout).has_value());
  auto d2 = start_dispatcher(port, wd, "dispatcher2", flags);
  CHECK(d2->wait_for_output("1 job(s) (1 running again)", kStartTimeout));
  auto rc = (*reader)->wait_exit(kReadTimeout);
  REQUIRE_MESSAGE(rc.has_value(), std::string((*reader)->describe() + d2->describe()));
  CHECK_MESSAGE(*rc == 0, (*reader)->describe());
  CHECK((*reader)->stderr_text().find("lost the dispatcher") != std::string::npos);
  CHECK_MESSAGE((*reader)->stdout_lines() == in_order(dataset), (*reader)->describe());
  // Each split has at most one element: the job hands out splits at most the window past the
  // lowest unfinished one, and the reader may not have heard yet that the ones before it
  // finished — about twice the window at most, restart or not.
  static const std::regex kHeld(R"(held at most (\d+) element)");
  std::smatch m;
  const std::string err = (*reader)->stderr_text();
  REQUIRE_MESSAGE(std::regex_search(err, m, kHeld), err);
  CHECK(std::stoll(m[1]) <= 2 * conveyor::kDeterministicWindow + 2);
}

TEST_CASE("deterministic: the hold stays within its byte budget with large elements - the "
          "consumer then asks only the worker of the split it waits for") {
  // Splits of one element of range(40, 0, step=-1), each flat_mapped to range(40 - index): early
  // splits are long, so without the budget the other workers' splits pile up behind split 0
  // (measured: ~150 elements of 64 KiB, ~10 MB); with it, the hold stays about 512 KiB plus
  // what the 4 credits (--max-outstanding) and a poll's latency bring (measured: ~0.9-1.4 MB).
  Cluster cluster(3, {"--range-split-size", "1"});
  const std::string dataset =
    "range(40, 0, step=-1).flat_map(range_fn).map(sleep_us(us=500)).map(bytes(size=65536))";
  const int64_t budget = 512 * 1024;
  auto r = cluster.read(dataset, {"--mode", "dynamic", "--deterministic", "--print", "none",
                                  "--stats", "--max-outstanding", "4", "--deterministic-hold-bytes",
                                  std::to_string(budget)});
  REQUIRE_MESSAGE(r.exit_code == std::optional<int>{0}, r.describe);
  CHECK_MESSAGE(r.stderr_text.find("read: 820 elements read") != std::string::npos, r.describe);
  static const std::regex kHeld(R"(held at most (\d+) element\(s\), (\d+) bytes)");
  std::smatch m;
  REQUIRE_MESSAGE(std::regex_search(r.stderr_text, m, kHeld), r.describe);
  const int64_t peak = std::stoll(m[2]);
  INFO("peak hold " << peak << " bytes");
#if defined(__SANITIZE_ADDRESS__)
  // Under AddressSanitizer (every step several times slower) about 1 run in 12 held ~80 elements
  // (5.2 MB) with 4 such runs at once, with or without the shared arena; 18 of 18 normal-build
  // runs, 6 at once, stayed within the bound below. Still far from the ~150 without the budget.
  const int64_t slack = 100;
#else
  const int64_t slack = 24;
#endif
  CHECK_MESSAGE(peak <= budget + slack * 65600, r.describe); // (no budget: ~150 elements, ~10 MB)
}

TEST_CASE("deterministic: --deterministic-hold-bytes below 1 is refused, naming the flag") {
  Cluster cluster(1);
  auto r = cluster.read(
    "range(10)", {"--mode", "dynamic", "--deterministic", "--deterministic-hold-bytes", "0"});
  CHECK(r.exit_code == std::optional<int>{2});
  CHECK_MESSAGE(r.stderr_text.find("`--deterministic-hold-bytes`: `deterministic_hold_bytes` "
                                   "must be at least 1 (bytes), got 0") != std::string::npos,
                r.describe);
}

TEST_CASE("deterministic: trainers SIGKILLed and resumed from their cursors - the consumed "
          "prefixes, concatenated, are the 1-worker sequence") {
  const uint32_t seed = std::random_device{}();
  INFO("seed " << seed);
  std::mt19937 rng{seed};
  const int64_t n = 3000;
  const std::string dataset = "range(3000).map(sleep_us(us=1000)).filter(mod_eq(m=5, r=1))";
  // A killed trainer's private job goes after --client-timeout (its tasks then end).
  Cluster cluster(2, {"--client-timeout", "2000"});
  const std::string cursor = temp_path("cursor");
  std::vector<std::string> consumed; // what the cursors covered, in order, all attempts
  std::vector<std::string> last_lines;
  int64_t covered = 0;
  static const std::regex kResumed(R"(resuming job \d+ after (\d+) consumed element)");
  const int attempts = 2;
  for (int attempt = 0; attempt <= attempts; ++attempt) {
    std::vector<std::string> args = kDeterministic;
    args.insert(args.end(), {"--checkpoint-to", cursor, "--checkpoint-every", "20"});
    const bool resumed = std::filesystem::exists(cursor);
    if (resumed)
      args.insert(args.end(), {"--resume-from", cursor});
    auto reader = cluster.start_read(dataset, args, "trainer");
    if (resumed) {
      REQUIRE_MESSAGE(reader->wait_for_output("consumed element(s)", Millis{30000}),
                      reader->describe());
      std::smatch m;
      const std::string err = reader->stderr_text();
      REQUIRE_MESSAGE(std::regex_search(err, m, kResumed), err);
      const int64_t now = std::stoll(m[1]);
      // The killed attempt's first (now - covered) lines are what its last cursor added.
      REQUIRE(now >= covered);
      REQUIRE(static_cast<int64_t>(last_lines.size()) >= now - covered);
      consumed.insert(consumed.end(), last_lines.begin(), last_lines.begin() + (now - covered));
      covered = now;
    }
    if (attempt == attempts) {
      auto code = reader->wait_exit(Millis{60000});
      REQUIRE_MESSAGE(code == std::optional<int>{0},
                      std::string(reader->describe() + cluster.describe()));
      auto lines = reader->stdout_lines();
      consumed.insert(consumed.end(), lines.begin(), lines.end());
      break;
    }
    // Killed after another 15..30% of the epoch's 600 elements.
    std::uniform_int_distribution<int64_t> at{n / 5 * 15 / 100, n / 5 * 30 / 100};
    REQUIRE_MESSAGE(reader->wait_for_stdout_lines(static_cast<std::size_t>(at(rng)), Millis{60000}),
                    reader->describe());
    reader->signal(SIGKILL);
    REQUIRE(reader->wait_exit(Millis{30000}).has_value());
    last_lines = reader->stdout_lines();
  }
  std::error_code ec;
  std::filesystem::remove(cursor, ec);
  std::filesystem::remove(cursor + ".tmp", ec);
  CHECK(covered > 0);
  CHECK(consumed == in_order(dataset));
}

TEST_CASE("deterministic: refused clearly - OFF, a named job, a pipeline that mixes splits") {
  Cluster cluster(1);
  auto off = cluster.read("range(10)", {"--mode", "off", "--deterministic"});
  CHECK(off.exit_code == std::optional<int>{2});
  CHECK_MESSAGE(off.stderr_text.find("`--deterministic`: `deterministic` needs the DYNAMIC") !=
                  std::string::npos,
                off.describe);
  auto named =
    cluster.read("range(10)", {"--mode", "dynamic", "--deterministic", "--job-name", "shared"});
  CHECK(named.exit_code == std::optional<int>{2});
  CHECK_MESSAGE(named.stderr_text.find("needs a private job") != std::string::npos, named.describe);
  auto batched = cluster.read("range(100).batch(4)", kDeterministic);
  CHECK(batched.exit_code != std::optional<int>{0});
  CHECK_MESSAGE(batched.stderr_text.find("`deterministic` needs a per-split pipeline") !=
                  std::string::npos,
                batched.describe);
}

TEST_CASE("deterministic: the job's splits are sized by the element's static bytes - 8192 "
          "int64 scalars, 1024 strings (size unknown) - and the cursor names that size") {
  // range(100000) on one worker: arrival order would cut 8192-element splits; before the byte
  // rule a deterministic job cut at most 1024 whatever the element.
  Cluster cluster(1);
  auto split_size_of = [&](const std::string& dataset) -> int64_t {
    const std::string cursor = temp_path("split_size");
    std::vector<std::string> args = kDeterministic;
    args.insert(args.end(), {"--checkpoint-to", cursor});
    auto r = cluster.read(dataset, args);
    REQUIRE_MESSAGE(r.exit_code == std::optional<int>{0}, r.describe);
    CHECK(r.lines.size() == 100000);
    return taken_cursor(cursor).split_size();
  };
  CHECK(split_size_of("range(100000)") == conveyor::kDeterministicLargestSplit);
  CHECK(split_size_of("range(100000).map(bytes(size=16))") == conveyor::kDeterministicDefaultSplit);
}

TEST_CASE("deterministic: elements of a size the spec says (256 KiB tensors) in 16-element "
          "splits on 2 workers - the same sequence, and the cursor names that size") {
  // 64 MiB budget / (16 splits x 256 KiB) = 16 elements a split (the old rule: 64 here).
  const std::string dataset = "range(400).map(pixels(size=262144)).map(sleep_us(us=500))";
  auto digest = [](const conveyor::Element& e) {
    std::string encoded;
    conveyor::encode_element(e, encoded);
    char buf[64];
    std::snprintf(buf, sizeof buf, "%zu %08x", e.byte_size(),
                  conveyor::crc32c(encoded.data(), encoded.size()));
    return std::string{buf};
  };
  auto parsed = conveyor::parse_dataset(dataset);
  REQUIRE_MESSAGE(parsed.ok(), parsed.status().to_string());
  auto elements = parsed->collect();
  REQUIRE_MESSAGE(elements.ok(), elements.status().to_string());
  std::vector<std::string> expected;
  for (const auto& e : *elements)
    expected.push_back(digest(e));
  Cluster cluster(2);
  const std::string cursor = temp_path("pixels");
  std::vector<std::string> args = kDeterministic;
  args.insert(args.end(), {"--print", "digest", "--checkpoint-to", cursor, "--stats"});
  auto r = cluster.read(dataset, args);
  REQUIRE_MESSAGE(r.exit_code == std::optional<int>{0}, r.describe);
  CHECK_MESSAGE(r.lines == expected, cluster.describe());
  CHECK(taken_cursor(cursor).split_size() == 16);
}
