// What the process knows about its functions beyond the registry: the plugins it loaded (for the
// unknown-function error and `conveyor inspect --functions`) and a function's signature as text.
#pragma once

#include <string>
#include <vector>

#include "pipeline/functions/functions.hpp"

namespace conveyor {

// The plugins this process loaded (into any registry), in load order, paths as given.
std::vector<std::string> loaded_plugin_paths();

// The plugin that registered a function of this name; empty for built-in (or unknown) names.
std::string plugin_defining(const std::string& function_name);

// "scale(factor: float = 2.0)": a function's name, its parameters' kinds and defaults.
std::string describe_function(const FunctionDef& def);

} // namespace conveyor
