// cache(filename)'s temporary files name their writer (pipeline/io/temp_files.hpp): a later fill
// removes a dead writer's (here a SIGKILLed child's), never a live one's.
#include <doctest/doctest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "ops_test_util.hpp"
#include "pipeline/io/temp_files.hpp"
#include "pipeline/kernels/cache_file.hpp"

using namespace conveyor;

namespace {

std::vector<std::string> temp_files(const test::TempDir& dir) {
  std::vector<std::string> out;
  for (const auto& entry : std::filesystem::directory_iterator(dir.path()))
    if (entry.path().filename().string().find(".tmp-") != std::string::npos)
      out.push_back(entry.path().filename().string());
  return out;
}

// A child process that starts filling `prefix`'s cache file and then waits, its temporary file
// open, until it is killed (or `hold_fd` is closed: EOF on its pipe).
pid_t start_filling_child(const std::string& prefix, const std::string& fingerprint, int& hold_fd) {
  int ready[2], hold[2];
  REQUIRE(::pipe(ready) == 0);
  REQUIRE(::pipe(hold) == 0);
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    ::close(ready[0]);
    ::close(hold[1]);
    auto writer = kernels::CacheFileWriter::create(prefix, fingerprint);
    const char ok = writer.ok() && (*writer)->append(test::ints({1})).ok() ? 'y' : 'n';
    (void)!::write(ready[1], &ok, 1);
    char c;
    (void)!::read(hold[0], &c, 1);
    ::_exit(0);
  }
  ::close(ready[1]);
  ::close(hold[0]);
  hold_fd = hold[1];
  char ok = 'n';
  REQUIRE(::read(ready[0], &ok, 1) == 1);
  ::close(ready[0]);
  REQUIRE(ok == 'y');
  return pid;
}

} // namespace

TEST_CASE("temp_writer_state: this process is alive, a changed start time or an unknown tag is "
          "not") {
  const std::string self = temp_writer_tag();
  CHECK(temp_writer_state(self) == TempWriter::alive);
  // pid.start.pidns.boot.host: the same pid started at another time is another (dead) process.
  const auto first_dot = self.find('.'), second_dot = self.find('.', first_dot + 1);
  std::string reused = self;
  reused.replace(first_dot + 1, second_dot - first_dot - 1, "1");
  CHECK(temp_writer_state(reused) == TempWriter::dead);
  std::string other_host = self.substr(0, self.rfind('.') + 1) + "0badc0de";
  if (other_host != self)
    CHECK(temp_writer_state(other_host) == TempWriter::unknown);
  CHECK(temp_writer_state("123") == TempWriter::unknown); // an older build's `.tmp-PID-N`
  CHECK(temp_writer_state("1.2.3.x.5") == TempWriter::unknown);
}

TEST_CASE("file cache: a fill removes the temporary file of a SIGKILLed writer, never a live "
          "writer's") {
  test::TempDir dir;
  const std::string prefix = dir.file("c");
  const Dataset ds = Dataset::range(3).cache(prefix);
  const std::string fingerprint = Dataset::range(3).fingerprint();
  // An older build's name and another host's tag are never removed: their writers may be alive.
  const std::string old_name = "c.cache.tmp-123-0";
  const std::string tag = temp_writer_tag();
  const std::string foreign = "c.cache.tmp-" + tag.substr(0, tag.rfind('.') + 1) + "0badc0de-0";
  test::write_file(dir.file(old_name), "partial");
  test::write_file(dir.file(foreign), "partial");

  int hold_fd = -1;
  const pid_t child = start_filling_child(prefix, fingerprint, hold_fd);
  const std::string child_tag = std::to_string(child) + ".";
  auto child_files = [&] {
    int n = 0;
    for (const auto& name : temp_files(dir))
      n += name.rfind("c.cache.tmp-" + child_tag, 0) == 0;
    return n;
  };
  REQUIRE(child_files() == 1);

  CHECK(test::show(ds) == "[0, 1, 2]"); // a fill while the child writes: its file stays
  CHECK(child_files() == 1);

  REQUIRE(::kill(child, SIGKILL) == 0);
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  ::close(hold_fd);
  REQUIRE(WIFSIGNALED(status));
  CHECK(child_files() == 1); // nobody removes it by itself

  std::filesystem::remove(prefix + ".cache");
  CHECK(test::show(ds) == "[0, 1, 2]"); // the next fill of the same file removes it
  CHECK(child_files() == 0);
  auto left = temp_files(dir);
  std::sort(left.begin(), left.end());
  std::vector<std::string> expected{old_name, foreign};
  std::sort(expected.begin(), expected.end());
  CHECK(left == expected);
}
