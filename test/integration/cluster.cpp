#include "test/integration/cluster.hpp"

#include <algorithm>

#include <doctest/doctest.h>

#include "pipeline/graph/text_form.hpp"

namespace conveyor::testing {

namespace {
// Printed by `conveyor worker` once the dispatcher accepted its registration.
constexpr const char* kWorkerReady = "worker: ready";
} // namespace

Cluster::Cluster(int workers, std::vector<std::string> dispatcher_flags) {
  std::vector<std::string> args{"dispatcher", "--port", "0"};
  args.insert(args.end(), dispatcher_flags.begin(), dispatcher_flags.end());
  auto d = ChildProcess::conveyor(args, "dispatcher");
  REQUIRE_MESSAGE(d.ok(), d.status().to_string());
  dispatcher_ = std::move(d).value();
  auto port = dispatcher_->wait_listening(kStartTimeout);
  REQUIRE_MESSAGE(port.ok(), port.status().to_string());
  port_ = *port;
  for (int i = 0; i < workers; ++i)
    add_worker();
}

Cluster::~Cluster() {
  std::vector<ChildProcess*> order;
  for (auto it = workers_.rbegin(); it != workers_.rend(); ++it)
    order.push_back(it->get());
  if (dispatcher_)
    order.push_back(dispatcher_.get());
  for (ChildProcess* p : order) {
    bool killed_by_test = p->exited(); // e.g. a fault test's SIGKILL: not a shutdown to check
    p->stop(Millis{10000});
    if (!killed_by_test)
      CHECK_MESSAGE(p->wait_exit(Millis{0}) == 0, "unclean shutdown\n" << p->describe());
  }
}

ChildProcess& Cluster::add_worker(std::vector<std::string> extra_flags) {
  std::vector<std::string> args{"worker", "--dispatcher", address(), "--heartbeat-interval", "200"};
  // `--port P` in extra_flags: a worker restarted on the port of one that went; else any port.
  if (std::find(extra_flags.begin(), extra_flags.end(), "--port") == extra_flags.end())
    args.insert(args.end(), {"--port", "0"});
  args.insert(args.end(), extra_flags.begin(), extra_flags.end());
  auto w = ChildProcess::conveyor(args, "worker" + std::to_string(workers_.size() + 1));
  REQUIRE_MESSAGE(w.ok(), w.status().to_string());
  workers_.push_back(std::move(w).value());
  ChildProcess& worker = *workers_.back();
  REQUIRE_MESSAGE(worker.wait_for_output(kWorkerReady, kStartTimeout),
                  (worker.describe() + "\n" + describe()));
  return worker;
}

CommandResult Cluster::read(const std::string& dataset, std::vector<std::string> flags,
                            Millis timeout) const {
  std::vector<std::string> args{"read", "--dispatcher", address(), "--dataset", dataset};
  args.insert(args.end(), flags.begin(), flags.end());
  return run_conveyor(std::move(args), timeout, "read");
}

std::unique_ptr<ChildProcess> Cluster::start_read(const std::string& dataset,
                                                  std::vector<std::string> flags,
                                                  const std::string& name) const {
  std::vector<std::string> args{"read", "--dispatcher", address(), "--dataset", dataset};
  args.insert(args.end(), flags.begin(), flags.end());
  auto r = ChildProcess::conveyor(std::move(args), name);
  REQUIRE_MESSAGE(r.ok(), r.status().to_string());
  return std::move(r).value();
}

std::string Cluster::describe() const {
  std::string out = dispatcher_ ? dispatcher_->describe() : std::string{"(no dispatcher)"};
  for (const auto& w : workers_)
    out += "\n" + w->describe();
  return out;
}

std::vector<std::string> sorted(std::vector<std::string> lines) {
  std::sort(lines.begin(), lines.end());
  return lines;
}

std::vector<std::string> expected_sorted_lines(const std::string& dataset, int copies) {
  auto parsed = parse_dataset(dataset);
  REQUIRE_MESSAGE(parsed.ok(), parsed.status().to_string());
  auto elements = parsed->collect();
  REQUIRE_MESSAGE(elements.ok(), elements.status().to_string());
  std::vector<std::string> lines;
  for (int c = 0; c < copies; ++c)
    for (const auto& e : *elements)
      lines.push_back(e.to_string());
  return sorted(std::move(lines));
}

} // namespace conveyor::testing
