// A read cursor file in the temp directory (`conveyor read --checkpoint-to`), removed with its
// `.tmp` sibling at the end, and what a resumed read says it resumed from.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>

#include <doctest/doctest.h>

#include "test/integration/cluster.hpp"

namespace conveyor::testing {

struct CursorFile {
  CursorFile() {
    static int counter = 0;
    path = (std::filesystem::temp_directory_path() /
            ("conveyor_cursor_" + std::to_string(::getpid()) + "_" + std::to_string(++counter)))
             .string();
    std::filesystem::remove(path);
  }
  CursorFile(const CursorFile&) = delete;
  CursorFile& operator=(const CursorFile&) = delete;
  ~CursorFile() {
    std::error_code ec;
    std::filesystem::remove(path, ec);
    std::filesystem::remove(path + ".tmp", ec);
  }
  bool exists() const { return std::filesystem::exists(path); }
  std::string text() const {
    std::ifstream in{path};
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
  }
  std::string path;
};

// "read: resuming job J after M consumed element(s)" -> M (REQUIREs that it was printed).
inline int64_t resumed_after(ChildProcess& reader) {
  REQUIRE_MESSAGE(reader.wait_for_output("consumed element(s)", Millis{30000}), reader.describe());
  static const std::regex kLine(R"(resuming job \d+ after (\d+) consumed element)");
  std::smatch m;
  const std::string err = reader.stderr_text();
  REQUIRE_MESSAGE(std::regex_search(err, m, kLine), err);
  return std::stoll(m[1]);
}

} // namespace conveyor::testing
