// TFRecord writer and reader: exact byte layout, round trips, and the errors for corrupt and
// truncated files (each naming the file and the byte offset of the bad record).
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <unistd.h>

#include "pipeline/io/tfrecord.hpp"

using namespace conveyor;

namespace {

// A file path under the temp directory, removed when the test ends.
class TempFile {
public:
  explicit TempFile(const std::string& name)
    : path_((std::filesystem::temp_directory_path() /
             ("conveyor_tfrecord_test_" + std::to_string(::getpid()) + "_" + name))
              .string()) {}
  ~TempFile() {
    std::error_code ec;
    std::filesystem::remove(path_, ec);
  }
  const std::string& path() const { return path_; }

private:
  std::string path_;
};

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

void write_records(const std::string& path, const std::vector<std::string>& records) {
  auto writer = TFRecordWriter::open(path);
  REQUIRE(writer.ok());
  for (const auto& r : records)
    REQUIRE((*writer)->write(r).ok());
  REQUIRE((*writer)->close().ok());
}

// Reads every record; stops at the first error and returns it.
Status read_all(const std::string& path, std::vector<std::string>& records) {
  auto reader = TFRecordReader::open(path);
  if (!reader.ok())
    return reader.status();
  for (int guard = 0; guard < 100000; ++guard) {
    std::string record;
    bool eof = false;
    CONVEYOR_RETURN_IF_ERROR((*reader)->read(record, eof));
    if (eof)
      return Status::OK();
    records.push_back(record);
  }
  return internal_error("read_all: too many records");
}

// "abc" as TensorFlow lays it out: length 3 (u64 LE), masked crc32c of those 8 bytes,
// the data, masked crc32c of the data. (CRCs computed independently with a bitwise crc32c.)
const std::string kAbcRecord{"\x03\x00\x00\x00\x00\x00\x00\x00"
                             "\xb0\x99\x49\x0e"
                             "abc"
                             "\x6e\x57\xf1\x21",
                             19};

} // namespace

TEST_CASE("the writer produces TensorFlow's exact byte layout") {
  TempFile f{"layout"};
  write_records(f.path(), {"abc"});
  CHECK(read_bytes(f.path()) == kAbcRecord);
}

TEST_CASE("the reader reads a record written by hand") {
  TempFile f{"by_hand"};
  write_bytes(f.path(), kAbcRecord + kAbcRecord);
  std::vector<std::string> records;
  REQUIRE(read_all(f.path(), records).ok());
  CHECK(records == std::vector<std::string>{"abc", "abc"});
}

TEST_CASE("round trip of empty, binary and large records") {
  TempFile f{"round_trip"};
  std::string binary;
  for (int i = 0; i < 256; ++i)
    binary += static_cast<char>(i);
  std::string large(3 * 1024 * 1024 + 5, '\0');
  for (std::size_t i = 0; i < large.size(); ++i)
    large[i] = static_cast<char>(i * 131 + 7);
  const std::vector<std::string> written{"", "x", binary, std::string("a\0b", 3), large, ""};
  write_records(f.path(), written);
  CHECK(std::filesystem::file_size(f.path()) == 6 * 16 + 1 + 256 + 3 + large.size());

  auto reader = TFRecordReader::open(f.path());
  REQUIRE(reader.ok());
  uint64_t expected_offset = 0;
  for (const auto& want : written) {
    CHECK((*reader)->offset() == expected_offset);
    std::string got;
    bool eof = true;
    REQUIRE((*reader)->read(got, eof).ok());
    REQUIRE_FALSE(eof);
    CHECK(got == want);
    expected_offset += 16 + want.size();
  }
  std::string got;
  bool eof = false;
  REQUIRE((*reader)->read(got, eof).ok());
  CHECK(eof);
  // End of file is sticky.
  REQUIRE((*reader)->read(got, eof).ok());
  CHECK(eof);
}

TEST_CASE("an empty file has no records") {
  TempFile f{"empty"};
  write_bytes(f.path(), "");
  std::vector<std::string> records;
  CHECK(read_all(f.path(), records).ok());
  CHECK(records.empty());
}

TEST_CASE("opening a missing file is not_found and names the file") {
  auto reader = TFRecordReader::open("/nonexistent/conveyor/x.tfrecord");
  REQUIRE_FALSE(reader.ok());
  CHECK(reader.status().code() == ErrorCode::not_found);
  CHECK(reader.status().message().find("/nonexistent/conveyor/x.tfrecord") != std::string::npos);

  auto writer = TFRecordWriter::open("/nonexistent/conveyor/x.tfrecord");
  REQUIRE_FALSE(writer.ok());
  CHECK(writer.status().code() == ErrorCode::io_error);
  CHECK(writer.status().message().find("/nonexistent/conveyor/x.tfrecord") != std::string::npos);
}

TEST_CASE("writing after close is an error") {
  TempFile f{"closed"};
  auto writer = TFRecordWriter::open(f.path());
  REQUIRE(writer.ok());
  REQUIRE((*writer)->close().ok());
  Status st = (*writer)->write("x");
  CHECK(st.code() == ErrorCode::failed_precondition);
}

TEST_CASE("corrupt and truncated records give data_loss naming the file and the record's offset") {
  TempFile f{"corrupt"};
  // Two good records; the second starts at byte 19 (16 bytes of framing + "abc").
  const std::string good = kAbcRecord + kAbcRecord;
  const std::string at = " at byte offset 19 in " + f.path() + ": ";

  struct Case {
    std::string name;
    std::string bytes;
    std::string message;
  };
  std::string bad_length = good;
  bad_length[19] = 4; // length 4, but the length crc is for 3
  std::string bad_length_crc = good;
  bad_length_crc[19 + 9] ^= 0x01;
  std::string bad_data = good;
  bad_data[19 + 13] = 'X';
  std::string bad_data_crc = good;
  bad_data_crc[19 + 17] ^= 0x40;
  const std::vector<Case> cases{
    {"length flipped", bad_length, "corrupt record" + at + "length crc mismatch"},
    {"length crc flipped", bad_length_crc, "corrupt record" + at + "length crc mismatch"},
    {"data flipped", bad_data, "corrupt record" + at + "data crc mismatch"},
    {"data crc flipped", bad_data_crc, "corrupt record" + at + "data crc mismatch"},
    {"truncated length", good.substr(0, 19 + 5),
     "truncated record" + at + "length has 5 of 8 bytes"},
    {"truncated length crc", good.substr(0, 19 + 10),
     "truncated record" + at + "length crc has 2 of 4 bytes"},
    {"truncated payload", good.substr(0, 19 + 13),
     "truncated record" + at + "payload has 1 of 3 bytes"},
    {"truncated payload crc", good.substr(0, 19 + 16),
     "truncated record" + at + "payload crc has 1 of 4 bytes"},
  };
  for (const auto& c : cases) {
    CAPTURE(c.name);
    write_bytes(f.path(), c.bytes);
    std::vector<std::string> records;
    Status st = read_all(f.path(), records);
    CHECK(records == std::vector<std::string>{"abc"}); // the first record is still read
    CHECK(st.code() == ErrorCode::data_loss);
    CHECK(st.message() == c.message);
  }
}

TEST_CASE("a length far beyond the end of the file is a truncation, not a huge allocation") {
  TempFile f{"huge_length"};
  // A length of 2^60 with a valid length crc, followed by only 10 payload bytes.
  std::string header(8, '\0');
  header[7] = 0x10;
  const uint32_t masked = mask_crc32c(crc32c(header.data(), 8));
  std::string bytes = header;
  for (int i = 0; i < 4; ++i)
    bytes += static_cast<char>(masked >> (8 * i));
  bytes += std::string(10, 'z');
  write_bytes(f.path(), bytes);
  std::vector<std::string> records;
  Status st = read_all(f.path(), records);
  CHECK(st.code() == ErrorCode::data_loss);
  CHECK(st.message() == "truncated record at byte offset 0 in " + f.path() +
                          ": payload has 10 of " + std::to_string(uint64_t{1} << 60) + " bytes");
}

TEST_CASE("after an error the reader stays at the bad record") {
  TempFile f{"sticky"};
  std::string bad = kAbcRecord + kAbcRecord;
  bad[19 + 13] = 'X';
  write_bytes(f.path(), bad);
  auto reader = TFRecordReader::open(f.path());
  REQUIRE(reader.ok());
  std::string record;
  bool eof = false;
  REQUIRE((*reader)->read(record, eof).ok());
  Status first = (*reader)->read(record, eof);
  Status second = (*reader)->read(record, eof);
  CHECK_FALSE(first.ok());
  CHECK(first == second);
  CHECK((*reader)->offset() == 19);
}
