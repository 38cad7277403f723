// Dispatcher and worker processes that tests stop and restart themselves (the Cluster keeps its
// nodes for its whole life): a dispatcher on a given port and --work-dir, a worker of a
// dispatcher port, and a journaled dispatcher with two ready workers. Each REQUIREs that its
// process started.
#pragma once

#include <doctest/doctest.h>

#include <memory>
#include <string>
#include <vector>

#include "test/integration/cluster.hpp"
#include "test/support/free_port.hpp"

namespace conveyor::testing {

inline uint16_t free_port() {
  auto port = conveyor::testing::free_loopback_port();
  REQUIRE(port != 0);
  return port;
}

inline std::unique_ptr<ChildProcess> start_dispatcher(uint16_t port, const std::string& work_dir,
                                                      const std::string& name,
                                                      const std::vector<std::string>& extra = {}) {
  std::vector<std::string> args{"dispatcher", "--port", std::to_string(port), "--worker-timeout",
                                "3000"};
  args.insert(args.end(), extra.begin(), extra.end());
  if (!work_dir.empty()) {
    args.push_back("--work-dir");
    args.push_back(work_dir);
  }
  auto d = ChildProcess::conveyor(args, name);
  REQUIRE_MESSAGE(d.ok(), d.status().to_string());
  auto p = (*d)->wait_listening(kStartTimeout);
  REQUIRE_MESSAGE(p.ok(), (*d)->describe());
  CHECK(*p == port);
  return std::move(d).value();
}

inline std::unique_ptr<ChildProcess> start_worker(uint16_t dispatcher_port, const std::string& name,
                                                  std::vector<std::string> extra = {}) {
  std::vector<std::string> args{"worker",
                                "--dispatcher",
                                "127.0.0.1:" + std::to_string(dispatcher_port),
                                "--port",
                                "0",
                                "--heartbeat-interval",
                                "100"};
  args.insert(args.end(), extra.begin(), extra.end());
  auto w = ChildProcess::conveyor(args, name);
  REQUIRE_MESSAGE(w.ok(), w.status().to_string());
  return std::move(w).value();
}

inline std::string addr(uint16_t port) { return "127.0.0.1:" + std::to_string(port); }

// A dispatcher on its work dir `wd` (journaled) with two ready workers.
struct JournaledPair {
  explicit JournaledPair(const std::string& wd)
    : dispatcher(start_dispatcher(free_port(), wd, "dispatcher1")),
      port(*dispatcher->wait_listening(kStartTimeout)), w1(start_worker(port, "worker1")),
      w2(start_worker(port, "worker2")) {
    REQUIRE(w1->wait_for_output("worker: ready", kStartTimeout));
    REQUIRE(w2->wait_for_output("worker: ready", kStartTimeout));
  }
  std::unique_ptr<ChildProcess> dispatcher;
  uint16_t port;
  std::unique_ptr<ChildProcess> w1, w2;
};

} // namespace conveyor::testing
