// `conveyor <subcommand> [flags]` — dispatches to the subcommands registered in apps/cmd_*.cpp.
#include <malloc.h>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "apps/subcommand.hpp"
#include "conveyor/version.hpp"
#include "messages/protocol.hpp"
#ifdef CONVEYOR_PYTHON_FUNCTIONS
#include "pipeline/functions/python/embedded_python.hpp"
#endif

namespace conveyor::apps {
namespace {

struct Entry {
  const char* summary;
  SubcommandFn fn;
};

std::map<std::string, Entry>& table() {
  static std::map<std::string, Entry> t;
  return t;
}

void usage(std::FILE* out) {
  std::fprintf(out,
               "usage: conveyor <command> [flags]   (conveyor <command> --help for its flags)\n"
               "       conveyor --version\n\ncommands:\n");
  for (const auto& [name, e] : table())
    std::fprintf(out, "  %-12s %s\n", name.c_str(), e.summary);
}

// glibc gives the free top of a heap back to the kernel once 128 KiB of it are free, and serves
// allocations from 128 KiB up with fresh mmaps. A data plane allocates and frees batches at a
// steady rate, so it faulted the same memory in again and again: every first touch of a page is a
// page fault (microseconds each on a virtual machine). `conveyor bench service` with 8-byte
// elements ran 1.8x faster with the thresholds below. The process keeps up to 256 MiB of free
// heap instead of returning it at once. An explicit GLIBC_TUNABLES / MALLOC_TRIM_THRESHOLD_ /
// MALLOC_MMAP_THRESHOLD_ in the environment wins.
void tune_malloc() {
  if (std::getenv("GLIBC_TUNABLES") || std::getenv("MALLOC_TRIM_THRESHOLD_") ||
      std::getenv("MALLOC_MMAP_THRESHOLD_"))
    return;
  mallopt(M_MMAP_THRESHOLD, 32 << 20); // glibc's largest allowed value on 64-bit
  mallopt(M_TRIM_THRESHOLD, 256 << 20);
}

} // namespace

Subcommand::Subcommand(const char* name, const char* summary, SubcommandFn fn) {
  table()[name] = Entry{summary, fn};
}

} // namespace conveyor::apps

int main(int argc, char** argv) {
  using namespace conveyor::apps;
  tune_malloc();
#ifdef CONVEYOR_PYTHON_FUNCTIONS
  // Workers (and `run`, `bench`) run Python functions in an interpreter started on first use.
  conveyor::python::install_embedded_python();
#endif
  if (argc < 2) {
    usage(stderr);
    return 2;
  }
  std::string name = argv[1];
  if (name == "--help" || name == "-h" || name == "help") {
    usage(stdout);
    return 0;
  }
  if (name == "--version") {
    if (argc > 2) {
      std::fprintf(stderr, "conveyor: --version takes no arguments (got `%s`)\n", argv[2]);
      return 2;
    }
    std::printf("conveyor %s\nprotocol version %u\n", CONVEYOR_VERSION,
                conveyor::msg::kProtocolVersion);
    return 0;
  }
  auto it = table().find(name);
  if (it == table().end()) {
    std::fprintf(stderr, "conveyor: unknown command `%s`\n\n", name.c_str());
    usage(stderr);
    return 2;
  }
  std::vector<std::string> args(argv + 2, argv + argc);
  return it->second.fn(args);
}
