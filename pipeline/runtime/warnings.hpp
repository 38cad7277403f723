// Loud warnings from the pipeline layer (which has no logger of its own): by default one line
// "conveyor pipeline: warning: <message>" on stderr. A node can route them into its logger, and a
// test can capture them, by installing a handler (process-wide; an empty function restores stderr).
#pragma once

#include <functional>
#include <string>

namespace conveyor {

using WarningHandler = std::function<void(const std::string& message)>;
void set_pipeline_warning_handler(WarningHandler handler);
void pipeline_warning(const std::string& message);

} // namespace conveyor
