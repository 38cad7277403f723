// WebDataset tar shards (kernels/webdataset.cpp, io/tar_reader.cpp): samples grouped by key, the
// dict element, projection by `keys`, damaged archives, long names, and sharding by shard.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "conveyor/iterator_state.hpp"
#include "pipeline/io/tar_reader.hpp"
#include "pipeline/sharding/sharding.hpp"
#include "test/support/tar_archive.hpp"
#include "test/unit/formats/formats_util.hpp"

using namespace conveyor;
using namespace conveyor::formats_test;
using conveyor::testing::tar_of;

namespace {

std::string strings_of(const Element& e) {
  std::string s;
  for (std::size_t i = 0; i < e.size(); ++i)
    s += (i ? "|" : "") + std::string(e[i].string_at(0));
  return s;
}

} // namespace

TEST_CASE("webdataset: one dict per sample, keys sorted with __key__, extensions projected") {
  ScratchDir dir;
  write_bytes(dir.file("a.tar"), tar_of({{"s/000.jpg", "J0"},
                                         {"s/000.cls", "0"},
                                         {"s/000.json", "{}"},
                                         {"s/001.cls", "1"},
                                         {"s/001.jpg", "J1"}}));
  write_bytes(dir.file("b.tar"),
              tar_of({{"002.seg.png", "P2"}, {"002.cls", "2"}, {"002.jpg", "J2"}}));
  const Dataset ds = Dataset::webdataset({dir.file("*.tar")}, {"jpg", "cls"});
  auto spec = ds.element_spec();
  REQUIRE_MESSAGE(spec.ok(), spec.status().to_string());
  REQUIRE(spec->structure.has_value());
  CHECK(spec->structure->to_string() == "{\"__key__\": _, \"cls\": _, \"jpg\": _}");
  auto got = collect(ds);
  REQUIRE_MESSAGE(got.ok(), got.status().to_string());
  REQUIRE(got->size() == 3);
  CHECK(strings_of((*got)[0]) == "s/000|0|J0"); // the json file is not asked for
  CHECK(strings_of((*got)[1]) == "s/001|1|J1");
  CHECK(strings_of((*got)[2]) == "002|2|J2");
  // Multi-dot extensions are whole: "seg.png".
  auto seg = collect(Dataset::webdataset({dir.file("b.tar")}, {"seg.png"}));
  REQUIRE(seg.ok());
  CHECK(strings_of((*seg)[0]) == "002|P2");
}

TEST_CASE("webdataset: a sample without a requested file fails alone, ignore_errors skips it") {
  ScratchDir dir;
  write_bytes(dir.file("a.tar"), tar_of({{"0.jpg", "J0"},
                                         {"0.cls", "0"},
                                         {"1.jpg", "J1"},
                                         {"2.jpg", "J2"},
                                         {"2.cls", "2"},
                                         {"2.cls", "again"}}));
  const Dataset ds = Dataset::webdataset({dir.file("a.tar")}, {"jpg", "cls"});
  auto failed = collect(ds);
  REQUIRE_FALSE(failed.ok());
  CHECK(failed.status().message().find("sample `1` of " + dir.file("a.tar") +
                                       " has no `cls` file (it has: jpg)") != std::string::npos);
  auto kept = collect(ds.ignore_errors());
  REQUIRE_MESSAGE(kept.ok(), kept.status().to_string());
  REQUIRE(kept->size() == 1); // sample 2 holds `cls` twice: an error too
  CHECK(strings_of((*kept)[0]) == "0|0|J0");
}

TEST_CASE("webdataset: a truncated or damaged archive is data_loss naming the shard") {
  ScratchDir dir;
  const std::string whole = tar_of({{"0.jpg", std::string(1000, 'x')}, {"0.cls", "0"}});
  write_bytes(dir.file("cut.tar"), whole.substr(0, 700));
  auto cut = collect(Dataset::webdataset({dir.file("cut.tar")}, {"jpg"}));
  REQUIRE_FALSE(cut.ok());
  CHECK(cut.status().code() == ErrorCode::data_loss);
  CHECK(cut.status().message().find(dir.file("cut.tar") + " is truncated") != std::string::npos);
  std::string bad = whole;
  bad[10] ^= 0x5a; // inside the first header's name: its checksum no longer matches
  write_bytes(dir.file("bad.tar"), bad);
  auto damaged = collect(Dataset::webdataset({dir.file("bad.tar")}, {"jpg"}));
  REQUIRE_FALSE(damaged.ok());
  CHECK(damaged.status().code() == ErrorCode::data_loss);
  CHECK(damaged.status().message().find("fails its checksum") != std::string::npos);
  // Without the end marker, an archive that ends on a block boundary is whole.
  write_bytes(dir.file("open.tar"), tar_of({{"0.jpg", "J"}}, false));
  auto open = collect(Dataset::webdataset({dir.file("open.tar")}, {"jpg"}));
  REQUIRE_MESSAGE(open.ok(), open.status().to_string());
  CHECK(open->size() == 1);
}

TEST_CASE("webdataset: bad keys are refused naming the argument") {
  for (const auto& keys :
       std::vector<std::vector<std::string>>{{}, {""}, {"__key__"}, {"a/b"}, {"jpg", "jpg"}}) {
    CAPTURE(keys.size());
    Status st = Dataset::webdataset({"x.tar"}, keys).validate();
    CHECK(st.code() == ErrorCode::invalid_argument);
    CHECK(st.message().find("`keys`") != std::string::npos);
  }
}

TEST_CASE("webdataset: FILE sharding gives each worker whole shards") {
  ScratchDir dir;
  for (int s = 0; s < 4; ++s)
    write_bytes(dir.file("shard-" + std::to_string(s) + ".tar"),
                tar_of({{std::to_string(s) + "a.jpg", "x"}, {std::to_string(s) + "b.jpg", "y"}}));
  const Dataset ds = Dataset::webdataset({dir.file("shard-*.tar")}, {"jpg"});
  std::vector<std::string> keys;
  for (int w = 0; w < 2; ++w) {
    auto mine = apply_sharding(ds, ShardingPolicy::file, 2, w);
    REQUIRE_MESSAGE(mine.ok(), mine.status().to_string());
    auto got = collect(*mine);
    REQUIRE(got.ok());
    CHECK(got->size() == 4);
    for (const auto& e : *got)
      keys.emplace_back(e[0].string_at(0));
  }
  std::sort(keys.begin(), keys.end());
  CHECK(keys == std::vector<std::string>{"0a", "0b", "1a", "1b", "2a", "2b", "3a", "3b"});
}

TEST_CASE("webdataset: a checkpoint taken after any sample resumes at the next one") {
  ScratchDir dir;
  write_bytes(dir.file("a.tar"), tar_of({{"s/000.jpg", "J0"},
                                         {"s/000.cls", "0"},
                                         {"s/001.jpg", "J1"},
                                         {"s/001.cls", "1"},
                                         {"s/002.cls", "2"},
                                         {"s/002.jpg", "J2"}}));
  write_bytes(dir.file("b.tar"), tar_of({{"003.cls", "3"}, {"003.jpg", "J3"}}));
  const Dataset ds = Dataset::webdataset({dir.file("*.tar")}, {"jpg", "cls"});
  const auto collected = collect(ds);
  REQUIRE(collected.ok());
  const std::vector<Element>& whole = *collected;
  REQUIRE(whole.size() == 4);
  for (std::size_t k = 0; k <= whole.size(); ++k) {
    CAPTURE(k);
    auto first = ds.make_iterator();
    REQUIRE(first.ok());
    std::vector<std::string> got;
    for (std::size_t i = 0; i < k; ++i) {
      Element e;
      bool end = false;
      REQUIRE((*first)->get_next(e, end).ok());
      REQUIRE_FALSE(end);
      got.push_back(e.to_string());
    }
    IteratorStateWriter out;
    REQUIRE((*first)->save(out).ok());
    auto second = ds.make_iterator();
    REQUIRE(second.ok());
    IteratorStateReader in(out.bytes());
    REQUIRE((*second)->restore(in).ok());
    for (int i = 0; i < 10; ++i) {
      Element e;
      bool end = false;
      REQUIRE((*second)->get_next(e, end).ok());
      if (end)
        break;
      got.push_back(e.to_string());
    }
    std::vector<std::string> want;
    for (const auto& e : whole)
      want.push_back(e.to_string());
    CHECK(got == want);
  }
}
