// The functions every registry starts with (FunctionRegistry::global() calls this once).
#pragma once

#include "pipeline/runtime/status.hpp"

namespace conveyor {

class FunctionRegistry;

Status register_builtin_functions(FunctionRegistry& registry);

} // namespace conveyor
