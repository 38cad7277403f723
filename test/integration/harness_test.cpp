// The child-process harness itself (test/support/child_process.hpp), on /bin/sh so that it does
// not depend on the service: readiness parsing, exit codes, output capture and cleanup.
#include <fstream>
#include <string>
#include <thread>

#include <doctest/doctest.h>

#include "test/support/child_process.hpp"

using namespace conveyor::testing;

namespace {

std::unique_ptr<ChildProcess> shell(const std::string& script, const std::string& name) {
  auto child = ChildProcess::spawn({"/bin/sh", "-c", script}, name, test_log_dir());
  REQUIRE_MESSAGE(child.ok(), child.status().to_string());
  return std::move(child).value();
}

// A zombie counts as gone: an orphaned grandchild may wait a while for init to reap it.
bool process_alive(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string pid_field, comm, state;
  if (!(stat >> pid_field >> comm >> state))
    return false;
  return state != "Z" && state != "X";
}

// SIGKILL is delivered asynchronously: give the process a bounded moment to die.
bool gone_within(pid_t pid, Millis timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (process_alive(pid)) {
    if (std::chrono::steady_clock::now() > deadline)
      return false;
    std::this_thread::sleep_for(Millis{5});
  }
  return true;
}

} // namespace

TEST_CASE("harness: reads the port from the `listening on` line") {
  auto child =
    shell("echo 'dispatcher: listening on 127.0.0.1:45678 (protocol 1)'; exec sleep 30", "listen");
  auto port = child->wait_listening(Millis{5000});
  REQUIRE_MESSAGE(port.ok(), port.status().to_string());
  CHECK(*port == 45678);
  CHECK_FALSE(child->exited());
}

TEST_CASE("harness: an IPv6 address and stderr output are understood") {
  auto child = shell("echo 'listening on [::1]:7001' >&2; exec sleep 30", "listen6");
  auto port = child->wait_listening(Millis{5000});
  REQUIRE(port.ok());
  CHECK(*port == 7001);
}

TEST_CASE("harness: a child that exits without the startup line fails fast with its output") {
  auto child = shell("echo 'cannot bind' >&2; exit 3", "nolisten");
  auto port = child->wait_listening(Millis{10000});
  REQUIRE_FALSE(port.ok());
  CHECK(port.status().message().find("cannot bind") != std::string::npos);
  CHECK(child->wait_exit(Millis{5000}) == 3);
}

TEST_CASE("harness: run_to_completion collects lines and the exit code") {
  auto r = run_to_completion({"/bin/sh", "-c", "printf '3\\n1\\nx\\n2\\n'; echo oops >&2; exit 1"},
                             Millis{5000}, "complete", test_log_dir());
  REQUIRE(r.exit_code.has_value());
  CHECK(*r.exit_code == 1);
  CHECK(r.lines == std::vector<std::string>{"3", "1", "x", "2"});
  CHECK(r.stderr_text == "oops\n");
  auto ints = sorted_ints(r.lines);
  CHECK(ints.sorted == std::vector<int64_t>{1, 2, 3});
  CHECK(ints.unparsed == std::vector<std::string>{"x"});
}

TEST_CASE("harness: a command past its timeout is killed and reported as such") {
  auto r = run_to_completion({"/bin/sh", "-c", "echo started; exec sleep 30"}, Millis{300},
                             "timeout", test_log_dir());
  CHECK_FALSE(r.exit_code.has_value());
  CHECK(r.lines == std::vector<std::string>{"started"});
}

TEST_CASE("harness: the destructor kills a child that ignores SIGTERM, and its grandchildren") {
  pid_t leader = -1;
  pid_t grandchild = -1;
  {
    // The shell ignores TERM and starts a background sleep in its process group.
    auto child = shell("trap '' TERM; sleep 30 & echo \"grandchild $!\"; wait", "stubborn");
    REQUIRE(child->wait_for_output("grandchild ", Millis{5000}));
    REQUIRE(child->wait_for_stdout_lines(1, Millis{5000}));
    grandchild = std::stoi(child->stdout_lines().at(0).substr(std::string("grandchild ").size()));
    leader = child->pid();
    CHECK(process_alive(grandchild));
    child->stop(Millis{200});
    CHECK(child->exited());
  }
  CHECK(gone_within(leader, Millis{2000}));
  CHECK(gone_within(grandchild, Millis{2000}));
}
