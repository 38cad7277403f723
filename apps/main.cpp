// `conveyor <subcommand> [flags]` — dispatches to the subcommands registered in apps/cmd_*.cpp.
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "apps/subcommand.hpp"
#include "conveyor/version.hpp"
#include "messages/protocol.hpp"
#include "pipeline/runtime/malloc_tuning.hpp"
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

} // namespace

Subcommand::Subcommand(const char* name, const char* summary, SubcommandFn fn) {
  table()[name] = Entry{summary, fn};
}

} // namespace conveyor::apps

int main(int argc, char** argv) {
  using namespace conveyor::apps;
  conveyor::tune_malloc_for_data_plane(); // (the environment's settings win)
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
