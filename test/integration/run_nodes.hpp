// What the `conveyor run` tests read from its output and check of its child processes.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <fstream>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "test/integration/cluster.hpp"
#include "test/support/text.hpp"

namespace conveyor::testing {

// Every "pid N" in the output: the topology lines ("  worker-1    127.0.0.1:4242   pid 123")
// and the workers run starts later.
inline std::vector<pid_t> node_pids(const std::string& output) {
  std::vector<pid_t> pids;
  static const std::regex kPid(R"(pid (\d+))");
  for (std::sregex_iterator it(output.begin(), output.end(), kPid), end; it != end; ++it)
    pids.push_back(std::stoi((*it)[1]));
  return pids;
}

// A zombie counts as gone (it is reaped by init once orphaned); SIGKILL takes a moment to land.
inline bool gone_within(pid_t pid, Millis timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
    std::string pid_field, comm, state;
    if (!(stat >> pid_field >> comm >> state) || state == "Z" || state == "X")
      return true;
    if (std::chrono::steady_clock::now() > deadline)
      return false;
    std::this_thread::sleep_for(Millis{10});
  }
}

} // namespace conveyor::testing
