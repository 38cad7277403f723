// Moved to include/conveyor/status.hpp (public, installed); this path stays for code inside the repo.
#pragma once
#include "conveyor/status.hpp"
