// The node log format (node/log.hpp): timestamp, level, node and pid on every line; JSON lines
// that parse as one object with escaped text.
#include <doctest/doctest.h>

#include <unistd.h>

#include <regex>

#include "node/log.hpp"

using namespace conveyor;

namespace {
struct FormatGuard {
  log::Format saved = log::format();
  ~FormatGuard() {
    log::set_format(saved);
    log::set_node("conveyor");
  }
};
} // namespace

TEST_CASE("log: a text line has a UTC timestamp, the level, the node and the pid") {
  FormatGuard guard;
  log::set_format(log::Format::text);
  log::set_node("worker");
  const auto line = log::format_line(log::Level::warning, "worker", "task 3 stalled");
  CAPTURE(line);
  const std::regex re(
    R"(^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z warning node=worker pid=(\d+) worker: task 3 stalled$)");
  std::smatch m;
  REQUIRE(std::regex_match(line, m, re));
  CHECK(std::stol(m[1].str()) == ::getpid());
}

TEST_CASE("log: a json line is one object with escaped fields") {
  FormatGuard guard;
  log::set_format(log::Format::json);
  log::set_node("dispatcher");
  const auto line = log::format_line(log::Level::info, "dispatcher", "say \"hi\"\\\n\x01");
  CAPTURE(line);
  const std::regex re(
    R"(^\{"ts":"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z","level":"info","pid":(\d+),"node":"dispatcher","component":"dispatcher","msg":"say \\"hi\\"\\\\\\n\\u0001"\}$)");
  CHECK(std::regex_match(line, re));
}

TEST_CASE("log: level and format names") {
  CHECK(log::level_from_string("warn") == log::Level::warning);
  CHECK(!log::level_from_string("loud"));
  CHECK(log::format_from_string("json") == log::Format::json);
  CHECK(!log::format_from_string("xml"));
  CHECK(log::abbreviate("abc", 10) == "abc");
  CHECK(log::abbreviate(std::string(300, 'x'), 10) == std::string(10, 'x') + "... (300 bytes)");
}
