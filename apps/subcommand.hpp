// Subcommands of the `conveyor` command. Each lives in its own apps/cmd_*.cpp file and registers
// itself with a static Subcommand object, so adding a command never touches main.cpp.
#pragma once

#include <string>
#include <vector>

namespace conveyor::apps {

// args excludes the program and subcommand names. Returns the process exit code.
using SubcommandFn = int (*)(const std::vector<std::string>& args);

struct Subcommand {
  Subcommand(const char* name, const char* summary, SubcommandFn fn);
};

} // namespace conveyor::apps
