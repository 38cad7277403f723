// An in-process cluster for tests: a DispatchServer and N WorkerServers, each with its own
// actor system, talking over 127.0.0.1 on ports picked by the OS. Everything stops in the
// destructor, also when a REQUIRE throws halfway.
#pragma once

#include <doctest/doctest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <vector>

#include "node/log.hpp"
#include "conveyor/client.hpp"
#include "conveyor/server.hpp"

namespace conveyor::test {

inline NetworkConfig test_network() {
  NetworkConfig n;
  n.heartbeat_interval = std::chrono::milliseconds(500);
  n.connection_timeout = std::chrono::milliseconds(3000);
  n.scheduler_threads = 2;
  return n;
}

inline DispatcherConfig test_dispatcher_config() {
  DispatcherConfig c;
  c.worker_timeout = std::chrono::milliseconds(3000);
  c.job_gc_timeout = std::chrono::milliseconds(2000);
  c.network = test_network();
  // As the workers: DYNAMIC file sources list their patterns under the temporary directory.
  c.allowed_paths.push_back(std::filesystem::temp_directory_path().string());
  return c;
}

inline WorkerConfig test_worker_config() {
  WorkerConfig c;
  c.heartbeat_interval = std::chrono::milliseconds(200);
  c.connect_timeout = std::chrono::milliseconds(3000);
  c.network = test_network();
  // Tests write their input files under the temporary directory; workers read only there.
  c.allowed_paths.push_back(std::filesystem::temp_directory_path().string());
  // The test cluster stands in for remote workers: its consumers (target_workers AUTO, the
  // default) read over the network path these tests exist for; placement tests opt in.
  c.in_process_reads = false;
  return c;
}

inline ClientConfig test_client_config() {
  ClientConfig c;
  c.connect_timeout = std::chrono::milliseconds(3000);
  c.network = test_network();
  return c;
}

class TestCluster {
public:
  explicit TestCluster(int num_workers, DispatcherConfig dc = test_dispatcher_config(),
                       WorkerConfig wc = test_worker_config())
    : dispatcher_(std::make_unique<DispatchServer>(dc)) {
    if (!std::getenv("CONVEYOR_LOG_LEVEL"))
      log::set_level(log::Level::warning);
    auto st = dispatcher_->start();
    REQUIRE_MESSAGE(st.ok(), st.to_string());
    for (int i = 0; i < num_workers; ++i)
      add_worker(wc);
  }

  ~TestCluster() {
    workers_.clear(); // workers first: the dispatcher sees them leave
    dispatcher_.reset();
  }

  WorkerServer& add_worker(WorkerConfig wc = test_worker_config()) {
    wc.dispatcher_address = dispatcher_->target();
    auto w = std::make_unique<WorkerServer>(wc);
    auto st = w->start();
    REQUIRE_MESSAGE(st.ok(), st.to_string());
    workers_.push_back(std::move(w));
    return *workers_.back();
  }

  void stop_worker(std::size_t i) { workers_.at(i).reset(); }
  WorkerServer& worker(std::size_t i) { return *workers_.at(i); }

  Client client(ClientConfig cc = test_client_config()) {
    auto c = Client::connect(dispatcher_->target(), cc);
    REQUIRE_MESSAGE(c.ok(), c.status().to_string());
    return std::move(c).value();
  }

  DispatchServer& dispatcher() { return *dispatcher_; }
  std::string target() const { return dispatcher_->target(); }

private:
  std::unique_ptr<DispatchServer> dispatcher_;
  std::vector<std::unique_ptr<WorkerServer>> workers_;
};

// Reads the stream to its end (bounded: at most `limit` elements, `timeout` per element).
inline std::vector<Element> read_all(ElementStream& stream, std::size_t limit = 1000000,
                                     std::chrono::milliseconds timeout = std::chrono::seconds(20)) {
  std::vector<Element> out;
  for (std::size_t i = 0; i <= limit; ++i) {
    Element e;
    bool end = false;
    auto st = stream.next(e, end, timeout);
    REQUIRE_MESSAGE(st.ok(), st.to_string());
    if (end)
      return out;
    out.push_back(std::move(e));
  }
  FAIL("the stream did not end within " << limit << " elements");
  return out;
}

inline std::vector<int64_t> ints(const std::vector<Element>& elements) {
  std::vector<int64_t> v;
  for (const auto& e : elements)
    v.push_back(e[0].as_int64());
  return v;
}

inline std::vector<int64_t> sorted(std::vector<int64_t> v) {
  std::sort(v.begin(), v.end());
  return v;
}

} // namespace conveyor::test
