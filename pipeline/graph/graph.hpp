// Moved to include/conveyor/graph.hpp (public, installed); this path stays for code inside the repo.
#pragma once
#include "conveyor/graph.hpp"
