#include "pipeline/runtime/thread_use.hpp"

#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <string>

namespace conveyor {

int this_thread_tid() { return static_cast<int>(::syscall(SYS_gettid)); }

ThreadUse thread_use(pthread_t thread, int tid) {
  ThreadUse use;
  clockid_t clock;
  timespec ts{};
  if (pthread_getcpuclockid(thread, &clock) == 0 && clock_gettime(clock, &ts) == 0)
    use.cpu = static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
  if (tid <= 0)
    return use;
  // "<ns on a CPU> <ns runnable, waiting for one> <time slices>" (kernel's sched_info).
  const std::string path = "/proc/self/task/" + std::to_string(tid) + "/schedstat";
  if (FILE* f = std::fopen(path.c_str(), "r")) {
    long long on_cpu = 0, waited = 0;
    use.wait_known = std::fscanf(f, "%lld %lld", &on_cpu, &waited) == 2;
    if (use.wait_known)
      use.wait = waited;
    std::fclose(f);
  }
  // "TID (COMM) STATE ...": R is running or waiting for a core (COMM may hold spaces or parens).
  const std::string stat = "/proc/self/task/" + std::to_string(tid) + "/stat";
  if (FILE* f = std::fopen(stat.c_str(), "r")) {
    char text[256] = {};
    const std::size_t got = std::fread(text, 1, sizeof text - 1, f);
    std::fclose(f);
    const std::string line(text, got);
    const auto close = line.rfind(')');
    use.runnable = close != std::string::npos && close + 2 < line.size() && line[close + 2] == 'R';
  }
  return use;
}

} // namespace conveyor
