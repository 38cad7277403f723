// Where a process's CPU time went, thread by thread (Linux /proc/self/task), for the benchmarks:
// a many-core machine that stays idle while throughput is low has one thread at a full core
// somewhere (a serialization point); the busiest threads name it.
#pragma once

#include <string>
#include <vector>

namespace conveyor::apps {

struct ThreadCpu {
  int tid = 0;
  // The thread's comm. Threads inherit their creator's until renamed, and CAF 0.17.6 names its
  // scheduler threads "caf.multiplexer", like its I/O thread.
  std::string name;
  double seconds = 0; // user + system CPU time so far
};

// Every thread of this process now; empty where /proc cannot be read.
std::vector<ThreadCpu> thread_cpu_snapshot();

// One line: how many threads ran in the window between the snapshots `before` and `after`
// (`seconds` long), and the `top` busiest with their share of one core, e.g.
// "12 ran; busiest: conveyor 97%, conveyor-exec 55%, caf.multiplexer 41%".
std::string busiest_threads(const std::vector<ThreadCpu>& before,
                            const std::vector<ThreadCpu>& after, double seconds,
                            std::size_t top = 4);

} // namespace conveyor::apps
