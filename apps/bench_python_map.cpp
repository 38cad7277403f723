// `conveyor bench python-map`: Python functions on the workers against the same function in a
// plain Python loop, in the same run (issue 34). The measurement is python/bench/
// bench_python_map.py (one implementation: it drives the Python client); this command finds it
// next to this binary (the build tree's python/bench/, or <prefix>/share/conveyor/bench/ when
// installed), runs it with --python and passes every other flag to it (its own parser refuses
// what it does not know). The load average is printed before and after.
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "apps/bench.hpp"

namespace conveyor::apps {
namespace {

namespace fs = std::filesystem;

constexpr const char* kScript = "bench_python_map.py";

fs::path exe_dir() {
  std::error_code ec;
  return fs::read_symlink("/proc/self/exe", ec).parent_path();
}

// The script, and the directory of the conveyor package to import when it is the build tree's.
struct Located {
  fs::path script;
  fs::path package_dir; // empty: the interpreter's own sys.path (an installed package)
};

Located locate() {
  const fs::path dir = exe_dir();
  if (fs::exists(dir / "python" / "bench" / kScript))
    return {dir / "python" / "bench" / kScript, dir / "python"};
  if (fs::exists(dir.parent_path() / "share" / "conveyor" / "bench" / kScript))
    return {dir.parent_path() / "share" / "conveyor" / "bench" / kScript, {}};
  return {};
}

int run(const std::vector<std::string>& args) {
  std::string python = "/usr/bin/python3";
  std::vector<std::string> passed;
  for (std::size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--python") {
      if (i + 1 == args.size()) {
        std::fprintf(stderr, "conveyor bench python-map: `--python` needs a PATH\n");
        return 2;
      }
      python = args[++i];
    } else {
      passed.push_back(args[i]);
    }
  }
  const Located where = locate();
  const bool help = !passed.empty() && (passed[0] == "--help" || passed[0] == "-h");
  if (help)
    std::printf("usage: conveyor bench python-map [--python PATH] [the script's flags]\n"
                "  --python PATH   the interpreter (default /usr/bin/python3); every other flag "
                "goes to %s:\n\n",
                kScript);
  if (where.script.empty()) {
    std::fprintf(stderr,
                 "conveyor bench python-map: %s is neither in %s/python/bench/ (a build tree) "
                 "nor in %s/share/conveyor/bench/ (an installed conveyor)\n",
                 kScript, exe_dir().c_str(), exe_dir().parent_path().c_str());
    return 1;
  }
  if (!help)
    std::printf("load average before: %s\n", load_average().c_str());
  std::fflush(stdout);
  const pid_t pid = ::fork();
  if (pid < 0) {
    std::perror("conveyor bench python-map: fork");
    return 1;
  }
  if (pid == 0) {
    // The in-process servers of --service log every job at info: quiet unless asked.
    ::setenv("CONVEYOR_LOG_LEVEL", "warning", 0);
    if (!where.package_dir.empty()) {
      const char* old = std::getenv("PYTHONPATH");
      const std::string path =
        where.package_dir.string() + (old && *old ? ":" + std::string(old) : "");
      ::setenv("PYTHONPATH", path.c_str(), 1);
    }
    std::vector<std::string> argv{python, where.script.string()};
    argv.insert(argv.end(), passed.begin(), passed.end());
    std::vector<char*> cargv;
    for (auto& a : argv)
      cargv.push_back(a.data());
    cargv.push_back(nullptr);
    ::execv(python.c_str(), cargv.data());
    std::fprintf(stderr, "conveyor bench python-map: cannot run `--python` %s\n", python.c_str());
    ::_exit(127);
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
  }
  if (!help)
    std::printf("load average after: %s\n", load_average().c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}

const Benchmark reg{"python-map",
                    "Python map functions on workers vs a plain Python loop (its script)", run};

} // namespace
} // namespace conveyor::apps
