// Moved to include/conveyor/functions.hpp (public, installed); this path stays for code inside the repo.
#pragma once
#include "conveyor/functions.hpp"
