// Per-thread CPU time from /proc/self/task (apps/thread_cpu.hpp).
#include "apps/thread_cpu.hpp"

#include <dirent.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>

namespace conveyor::apps {

namespace {

// utime + stime of /proc/self/task/TID/stat, in seconds; < 0 when the thread is gone.
double task_cpu_seconds(const std::string& dir) {
  std::ifstream in(dir + "/stat");
  std::string line;
  if (!std::getline(in, line))
    return -1;
  // The name (field 2) is in parentheses and may hold spaces: count fields after its last ')'.
  const auto close = line.rfind(')');
  if (close == std::string::npos)
    return -1;
  std::istringstream fields(line.substr(close + 2));
  std::string field;
  unsigned long long utime = 0, stime = 0;
  for (int i = 3; fields >> field; ++i) { // field 3 is the state
    if (i == 14)
      utime = std::stoull(field);
    if (i == 15) {
      stime = std::stoull(field);
      break;
    }
  }
  return static_cast<double>(utime + stime) / static_cast<double>(::sysconf(_SC_CLK_TCK));
}

} // namespace

std::vector<ThreadCpu> thread_cpu_snapshot() {
  std::vector<ThreadCpu> out;
  DIR* tasks = ::opendir("/proc/self/task");
  if (tasks == nullptr)
    return out;
  while (const dirent* e = ::readdir(tasks)) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9')
      continue;
    const std::string dir = std::string("/proc/self/task/") + e->d_name;
    ThreadCpu t;
    t.tid = std::atoi(e->d_name);
    t.seconds = task_cpu_seconds(dir);
    if (t.seconds < 0)
      continue; // ended meanwhile
    std::ifstream comm(dir + "/comm");
    std::getline(comm, t.name);
    out.push_back(std::move(t));
  }
  ::closedir(tasks);
  return out;
}

std::string busiest_threads(const std::vector<ThreadCpu>& before,
                            const std::vector<ThreadCpu>& after, double seconds, std::size_t top) {
  std::map<int, double> start;
  for (const auto& t : before)
    start[t.tid] = t.seconds;
  std::vector<std::pair<double, std::string>> used; // (CPU seconds in the window, name)
  for (const auto& t : after) {
    auto s = start.find(t.tid);
    const double delta = t.seconds - (s == start.end() ? 0.0 : s->second);
    if (delta > 0)
      used.emplace_back(delta, t.name);
  }
  std::sort(used.begin(), used.end(),
            [](const auto& a, const auto& b) { return a.first > b.first; });
  std::string line = std::to_string(used.size()) + " ran; busiest:";
  for (std::size_t i = 0; i < used.size() && i < top; ++i) {
    char share[32];
    std::snprintf(share, sizeof share, " %.0f%%",
                  seconds > 0 ? 100.0 * used[i].first / seconds : 0.0);
    line += (i == 0 ? " " : ", ") + used[i].second + share;
  }
  return line;
}

} // namespace conveyor::apps
