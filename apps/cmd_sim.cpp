// `conveyor sim` moved to its own program, `conveyor-sim` (apps/sim/): the simulator and its
// planted bugs stay out of the `conveyor` binary and the installed package. The old name only
// says where it went, so scripts fail loudly instead of silently running something else.
#include <cstdio>
#include <string>
#include <vector>

#include "apps/cli_common.hpp"
#include "apps/subcommand.hpp"

namespace conveyor::apps {
namespace {

int run_sim_moved(const std::vector<std::string>&) {
  return report_error(
    "sim",
    "the simulator is the separate program `conveyor-sim` (same flags; built with "
    "-DCONVEYOR_SIM=ON, the default, as build/conveyor-sim; not installed)",
    kExitBadArguments);
}

const Subcommand reg{"sim", "moved: the simulated cluster is `conveyor-sim` (developer builds)",
                     run_sim_moved};

} // namespace
} // namespace conveyor::apps
