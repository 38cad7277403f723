// list_files(shuffle=True) without a seed under DYNAMIC sharding: the job draws the files' order
// once (JobEntry::file_seed, journaled) and its read cursor records it, so a resumed job lists the
// files in the same order and the split indices the cursor covers name the same files. Before,
// the resumed job drew another order: the cursor's splits named other files, and the union of
// the two reads repeated some files and missed others.
#include <doctest/doctest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "cluster_fixture.hpp"
#include "test/unit/sharding/temp_dir.hpp"

namespace conveyor {
namespace {

// Reads up to `limit` file names (all when -1); bounded.
std::vector<std::string> read_names(ElementStream& stream, int64_t limit) {
  std::vector<std::string> out;
  for (int i = 0; i < 1000 && (limit < 0 || static_cast<int64_t>(out.size()) < limit); ++i) {
    Element e;
    bool end = false;
    Status st = stream.next(e, end, std::chrono::seconds(20));
    REQUIRE_MESSAGE(st.ok(), st.to_string());
    if (end)
      return out;
    out.push_back(std::string(e[0].string_at(0)));
  }
  REQUIRE(limit >= 0);
  return out;
}

TEST_CASE("resume: list_files(shuffle=True) without a seed lists the files in the same order in "
          "the resumed job - every file once") {
  testing::TempDir dir;
  REQUIRE(dir.ok());
  std::vector<std::string> files;
  for (int i = 0; i < 40; ++i)
    files.push_back(dir.write("f" + std::to_string(100 + i) + ".txt", {"x"}));
  const Dataset dataset = Dataset::list_files(dir.path() + "/*.txt", /*shuffle=*/true);
  test::TestCluster cluster{2};
  Client client = cluster.client();
  DistributeOptions opts;
  opts.policy = ShardingPolicy::dynamic;
  for (int64_t stop_after : {3, 17}) {
    CAPTURE(stop_after);
    std::vector<std::string> seen;
    std::string cursor;
    {
      auto stream = client.distribute(dataset, opts);
      REQUIRE_MESSAGE(stream.ok(), stream.status().to_string());
      seen = read_names(*stream, stop_after);
      auto checkpoint = stream->checkpoint();
      REQUIRE_MESSAGE(checkpoint.ok(), checkpoint.status().to_string());
      cursor = *checkpoint;
    }
    CHECK(cursor.find("file_seed ") != std::string::npos);
    DistributeOptions resumed = opts;
    resumed.resume_from = cursor;
    auto stream = client.distribute(dataset, resumed);
    REQUIRE_MESSAGE(stream.ok(), stream.status().to_string());
    auto rest = read_names(*stream, -1);
    seen.insert(seen.end(), rest.begin(), rest.end());
    std::sort(seen.begin(), seen.end());
    CHECK(seen == files); // TempDir::write returns the full paths, which list_files yields
  }
}

} // namespace
} // namespace conveyor
