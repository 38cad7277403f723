// Issue 33 item 4, "a journal that never lies": only an incomplete LAST record is a torn tail;
// every other kind of damage stops start-up naming file, byte offset and record, changes no
// file, and is got past only with JournalOptions::recover (--journal-recover), which moves the
// damaged segment aside and keeps the longest valid prefix. Rule: dispatcher/journal.hpp.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <map>

#include "dispatcher/journal.hpp"
#include "test/support/text.hpp"
#include "test/unit/journal/journal_files.hpp"
#include "test/unit/sharding/temp_dir.hpp"

using namespace conveyor;
using namespace conveyor::actors;
using namespace conveyor::msg;
using namespace conveyor::testing;
namespace fs = std::filesystem;

namespace {

std::vector<Update> datasets(int n) {
  std::vector<Update> out;
  for (int i = 0; i < n; ++i) {
    auto id = std::to_string(100 + i);
    out.push_back(RegisterDatasetRecord{id, "fp" + id, "definition " + id, 1, i});
  }
  return out;
}

DispatcherState apply_all(const std::vector<Update>& records, std::size_t n) {
  DispatcherState s;
  for (std::size_t i = 0; i < n; ++i)
    REQUIRE(s.apply(records[i]).ok());
  return s;
}

std::map<std::string, std::string> dir_contents(const std::string& dir) {
  std::map<std::string, std::string> out;
  for (const auto& e : fs::directory_iterator(dir))
    out[e.path().filename().string()] = read_bytes(e.path().string());
  return out;
}

// A work dir holding `records` (after an optional compaction of the first `compacted`).
std::string write_journal(const std::string& dir, const std::vector<Update>& records,
                          std::size_t compacted = 0) {
  DispatcherState state;
  auto j = Journal::open(JournalOptions{dir}, state);
  REQUIRE_MESSAGE(j.ok(), j.status().to_string());
  for (std::size_t i = 0; i < records.size(); ++i) {
    (*j)->append(records[i], nullptr);
    REQUIRE(state.apply(records[i]).ok());
    if (i + 1 == compacted)
      REQUIRE((*j)->compact(state).ok());
  }
  REQUIRE((*j)->flush().ok());
  return Journal::segment_path(dir, (*j)->generation());
}

struct Case {
  const char* name;
  std::function<void(const std::string& segment)> damage;
  int64_t offset;     // where the error must point
  std::string record; // "(record N" in the message, or "" for file-level damage
  std::string why;    // part of the message
  std::size_t kept;   // records a recovery keeps
};

} // namespace

TEST_CASE("journal damage is refused naming file, offset and record, and changes no file - "
          "--journal-recover keeps the longest valid prefix") {
  const auto records = datasets(141);
  const std::size_t n = records.size();
  const std::size_t mid = n / 2;
  std::vector<Case> cases = {
    {"a middle record's length field enlarged (was taken for a torn tail)",
     [&](const std::string& seg) {
       auto d = read_bytes(seg);
       d[static_cast<std::size_t>(offset_of(records, mid)) + 1] ^= 0x10; // length + 4096
       write_bytes(seg, d);
     },
     offset_of(records, mid), "(record " + std::to_string(mid + 1) + ",",
     "header's checksum does not match", mid},
    {"the second half zeroed (was taken for a torn tail)",
     [&](const std::string& seg) {
       auto d = read_bytes(seg);
       std::fill(d.begin() + static_cast<long>(d.size() / 2), d.end(), '\0');
       write_bytes(seg, d);
     },
     -1, "", "checksum does not match", 0},
    {"garbage appended",
     [](const std::string& seg) {
       std::ofstream(seg, std::ios::binary | std::ios::app) << std::string(100, 'G');
     },
     offset_of(records, n), "(record " + std::to_string(n + 1) + ",", "header's checksum", n},
    {"zeros appended (more than a record header)",
     [](const std::string& seg) {
       std::ofstream(seg, std::ios::binary | std::ios::app) << std::string(300, '\0');
     },
     offset_of(records, n), "(record " + std::to_string(n + 1) + ",",
     "zeros instead of a record header", n},
    {"a complete last record with a bad payload checksum",
     [&](const std::string& seg) {
       auto d = read_bytes(seg);
       d[d.size() - 3] ^= 0x01;
       write_bytes(seg, d);
     },
     offset_of(records, n - 1), "(record " + std::to_string(n) + ",", "payload checksum", n - 1},
    {"the last record written twice",
     [&](const std::string& seg) {
       auto d = read_bytes(seg);
       d += d.substr(static_cast<std::size_t>(offset_of(records, n - 1)));
       write_bytes(seg, d);
     },
     offset_of(records, n), "(record " + std::to_string(n + 1) + ",",
     "sequence number " + std::to_string(n), n},
    {"garbage replacing the journal",
     [](const std::string& seg) { write_bytes(seg, std::string(5000, 'x')); }, 0, "", "bad magic",
     0},
    {"a zero-byte journal", [](const std::string& seg) { write_bytes(seg, ""); }, 0, "",
     "shorter than its 32-byte header", 0},
  };
  for (const auto& c : cases) {
    CAPTURE(c.name);
    testing::TempDir dir;
    REQUIRE(dir.ok());
    auto segment = write_journal(dir.path(), records);
    c.damage(segment);
    int64_t offset = c.offset;
    std::size_t kept = c.kept;
    if (offset < 0) { // the record the zeroing started in
      auto half = static_cast<int64_t>(fs::file_size(segment) / 2);
      std::size_t k = 0;
      while (offset_of(records, k + 1) <= half)
        ++k;
      offset = offset_of(records, k);
      kept = k;
    }
    const auto before = dir_contents(dir.path());
    DispatcherState state;
    auto refused = Journal::open(JournalOptions{dir.path()}, state);
    REQUIRE_FALSE(refused.ok());
    const auto message = refused.status().message();
    CAPTURE(message);
    CHECK(refused.status().code() == ErrorCode::data_loss);
    CHECK(message.rfind(segment + " at byte " + std::to_string(offset), 0) == 0);
    CHECK(contains(message, c.record));
    CHECK(contains(message, c.why));
    CHECK(contains(message, "--journal-recover"));
    CHECK(dir_contents(dir.path()) == before); // the evidence stays, nothing truncated
    CHECK(state == DispatcherState{});

    // Recovery: the damaged file moves aside intact, the valid prefix is kept, appends go on.
    JournalOptions options{dir.path()};
    options.recover = true;
    DispatcherState recovered;
    JournalReplay info;
    auto j = Journal::open(options, recovered, &info);
    REQUIRE_MESSAGE(j.ok(), j.status().to_string());
    CHECK(recovered == apply_all(records, kept));
    CHECK(info.records == static_cast<int64_t>(kept));
    REQUIRE_FALSE(info.moved_aside.empty());
    CHECK(read_bytes(info.moved_aside) == before.at(fs::path(segment).filename().string()));
    CHECK(info.recovered_dropped_bytes ==
          static_cast<int64_t>(before.at(fs::path(segment).filename().string()).size()) -
            (offset == 0 ? 0 : offset));
    (*j)->append(RegisterDatasetRecord{"after", "fpa", "d", 0, 0}, nullptr);
    REQUIRE((*j)->flush().ok());
    j->reset();
    DispatcherState again;
    auto reopened = Journal::open(JournalOptions{dir.path()}, again);
    REQUIRE_MESSAGE(reopened.ok(), reopened.status().to_string());
    CHECK(again.dataset("after"));
    CHECK(again.snapshot().datasets.size() == kept + 1);
  }
}

TEST_CASE("a snapshot whose segment is missing or empty, or a segment without its snapshot, is "
          "damage") {
  const auto records = datasets(20);
  testing::TempDir dir;
  REQUIRE(dir.ok());
  auto segment = write_journal(dir.path(), records, 10); // snapshot-1 + segment-1 with 10 records
  auto snapshot = Journal::snapshot_path(dir.path(), 1);
  REQUIRE(segment == Journal::segment_path(dir.path(), 1));
  REQUIRE(fs::exists(snapshot));
  const auto good = read_bytes(segment);
  auto refused = [&](const std::string& part) {
    auto before = dir_contents(dir.path());
    DispatcherState state;
    auto j = Journal::open(JournalOptions{dir.path()}, state);
    REQUIRE_FALSE(j.ok());
    CAPTURE(j.status().message());
    CHECK(j.status().code() == ErrorCode::data_loss);
    CHECK(contains(j.status().message(), part));
    CHECK(dir_contents(dir.path()) == before);
  };
  SUBCASE("the segment truncated to zero bytes") {
    write_bytes(segment, "");
    refused(segment + " at byte 0: the journal segment is 0 bytes");
  }
  SUBCASE("the segment cut to its header (a new segment that does not continue the snapshot)") {
    // A segment that starts at record 1 after a snapshot that ends before record 11.
    testing::TempDir other;
    write_journal(other.path(), {});
    write_bytes(segment, read_bytes(Journal::segment_path(other.path(), 0)));
    refused(segment + " at byte 16: the segment starts at record 1 but the snapshot ends before "
                      "record 11");
  }
  SUBCASE("the segment deleted") {
    fs::remove(segment);
    refused(segment + " at byte 0: the segment is missing, but " + snapshot);
    JournalOptions options{dir.path()};
    options.recover = true;
    DispatcherState state;
    auto j = Journal::open(options, state);
    REQUIRE_MESSAGE(j.ok(), j.status().to_string());
    CHECK(state == apply_all(records, 10)); // the snapshot's records; the segment's are gone
  }
  SUBCASE("the snapshot deleted") {
    fs::remove(snapshot);
    refused(segment + " at byte 0: a segment newer than the newest snapshot (no snapshot)");
  }
  SUBCASE("an empty next segment beside its snapshot is an interrupted compaction, removed") {
    // compact() creates segment g+1 before it renames snapshot g+1 into place.
    testing::TempDir fresh;
    auto seg1 = write_journal(fresh.path(), records, 20); // snapshot-1, segment-1 empty
    auto seg2 = Journal::segment_path(fresh.path(), 2);
    fs::copy_file(seg1, seg2);
    DispatcherState state;
    auto j = Journal::open(JournalOptions{fresh.path()}, state);
    REQUIRE_MESSAGE(j.ok(), j.status().to_string());
    CHECK(state == apply_all(records, 20));
    CHECK_FALSE(fs::exists(seg2));
  }
  SUBCASE("intact files still open") {
    DispatcherState state;
    auto j = Journal::open(JournalOptions{dir.path()}, state);
    REQUIRE_MESSAGE(j.ok(), j.status().to_string());
    CHECK(state == apply_all(records, 20));
    CHECK(read_bytes(segment) == good);
  }
}

TEST_CASE("a version 6 work dir is refused clearly, not misread") {
  testing::TempDir dir;
  REQUIRE(dir.ok());
  std::string v6("CVJOURN1", 8);
  v6 += std::string("\x06\0\0\0\0\0\0\0", 8);
  v6 += std::string(40, 'r');
  auto segment = Journal::segment_path(dir.path(), 0);
  write_bytes(segment, v6);
  DispatcherState state;
  auto j = Journal::open(JournalOptions{dir.path()}, state);
  REQUIRE_FALSE(j.ok());
  CHECK(contains(j.status().message(), segment + " at byte 8: journal segment format version 6"));
  CHECK(contains(j.status().message(), "older conveyor"));
  CHECK(read_bytes(segment) == v6);
}
