// A real cluster for integration tests: `conveyor dispatcher` and `conveyor worker` processes on
// 127.0.0.1 with ports the OS picks (--port 0, read back from their `listening on` lines).
// Every process is stopped and reaped when the Cluster goes away, also after a failed REQUIRE.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "test/support/child_process.hpp"

namespace conveyor::testing {

// Generous bounds: sanitizer builds start processes several times slower.
inline constexpr Millis kStartTimeout{20000};
inline constexpr Millis kReadTimeout{60000};

class Cluster {
public:
  // Starts a dispatcher (with `dispatcher_flags` added) and `workers` workers, and waits until
  // every worker is registered. REQUIREs on failure.
  explicit Cluster(int workers, std::vector<std::string> dispatcher_flags = {});
  // Stops the workers, then the dispatcher, with SIGTERM, and checks that each shut down
  // cleanly (exit status 0: no crash, no sanitizer report, no hang past the grace period).
  ~Cluster();
  Cluster(const Cluster&) = delete;
  Cluster& operator=(const Cluster&) = delete;

  // Starts one more worker and waits until it is registered (on any port, unless extra_flags
  // holds `--port P`).
  ChildProcess& add_worker(std::vector<std::string> extra_flags = {});

  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }
  uint16_t port() const { return port_; }
  ChildProcess& dispatcher() { return *dispatcher_; }
  ChildProcess& worker(std::size_t i) { return *workers_.at(i); }
  std::size_t num_workers() const { return workers_.size(); }

  // `conveyor read --dispatcher <address> --dataset <expr> <flags...>` to completion.
  CommandResult read(const std::string& dataset, std::vector<std::string> flags = {},
                     Millis timeout = kReadTimeout) const;
  // The same, started in the background.
  std::unique_ptr<ChildProcess> start_read(const std::string& dataset,
                                           std::vector<std::string> flags = {},
                                           const std::string& name = "read") const;

  // Every process's output, for failure messages.
  std::string describe() const;

private:
  std::unique_ptr<ChildProcess> dispatcher_;
  std::vector<std::unique_ptr<ChildProcess>> workers_;
  uint16_t port_ = 0;
};

// Output lines of reading `dataset` locally (no service), each repeated `copies` times, sorted:
// what an OFF job on `copies` workers (or `copies` epochs) must produce, in some order.
std::vector<std::string> expected_sorted_lines(const std::string& dataset, int copies = 1);
std::vector<std::string> sorted(std::vector<std::string> lines);

} // namespace conveyor::testing
