// The autoscaler's actuator (dispatcher/scale_command.hpp): a real /bin/sh command per target.
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>
#include <thread>
#include <vector>

#include <doctest/doctest.h>

#include "dispatcher/scale_command.hpp"

using namespace conveyor::actors;
namespace fs = std::filesystem;

namespace {

struct TempDir {
  fs::path path;
  TempDir() {
    path = fs::temp_directory_path() /
           ("conveyor-scale-" + std::to_string(::getpid()) + "-" +
            std::to_string(std::chrono::steady_clock::now().time_since_epoch().count()));
    fs::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

std::string read_file(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Waits (bounded) until `runs` commands have finished.
bool wait_runs(const ScaleCommand& c, int64_t runs, std::chrono::seconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (c.runs() < runs && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  return c.runs() >= runs;
}

struct Lines {
  std::mutex mu;
  std::vector<std::pair<bool, std::string>> lines;
  ScaleCommand::Log log() {
    return [this](bool failed, const std::string& line) {
      std::lock_guard<std::mutex> g{mu};
      lines.emplace_back(failed, line);
    };
  }
};

} // namespace

TEST_CASE("scale command: the template must name {n}, which is replaced by the count") {
  auto st = ScaleCommand::validate("kubectl scale deployment/w --replicas=3");
  CHECK_FALSE(st.ok());
  CHECK(st.message().find("--scale-command") != std::string::npos);
  CHECK(st.message().find("{n}") != std::string::npos);
  CHECK(ScaleCommand::validate("scale {n}").ok());
  CHECK(ScaleCommand::expand("a {n} b {n}", 12) == "a 12 b 12");
}

TEST_CASE("scale command: runs the command with the count - failures are counted, not fatal") {
  TempDir dir;
  const auto out = dir.path / "n";
  Lines lines;
  {
    ScaleCommand cmd{"printf '%s' {n} > '" + out.string() + "'", lines.log()};
    cmd.request(5);
    REQUIRE(wait_runs(cmd, 1, std::chrono::seconds(30)));
    CHECK(read_file(out) == "5");
    CHECK(cmd.failures() == 0);
    cmd.request(3);
    REQUIRE(wait_runs(cmd, 2, std::chrono::seconds(30)));
    CHECK(read_file(out) == "3");
  }
  {
    ScaleCommand cmd{"exit {n}", lines.log()};
    cmd.request(3);
    REQUIRE(wait_runs(cmd, 1, std::chrono::seconds(30)));
    CHECK(cmd.failures() == 1);
  }
  std::lock_guard<std::mutex> g{lines.mu};
  REQUIRE(lines.lines.size() == 3);
  CHECK_FALSE(lines.lines[0].first);
  CHECK(lines.lines[2].first);
  CHECK(lines.lines[2].second.find("exit status 3") != std::string::npos);
}

TEST_CASE("scale command: one that runs too long is killed with what it started") {
  TempDir dir;
  const auto marker = dir.path / "late";
  Lines lines;
  ScaleCommand cmd{"sleep 30; touch '" + marker.string() + "' # {n}", lines.log(),
                   std::chrono::milliseconds(300)};
  const auto t0 = std::chrono::steady_clock::now();
  cmd.request(2);
  REQUIRE(wait_runs(cmd, 1, std::chrono::seconds(20)));
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(10));
  CHECK(cmd.failures() == 1);
  std::lock_guard<std::mutex> g{lines.mu};
  REQUIRE(lines.lines.size() == 1);
  CHECK(lines.lines[0].second.find("killed") != std::string::npos);
}
