// Moved to include/conveyor/sharding.hpp (public, installed); this path stays for code inside the repo.
#pragma once
#include "conveyor/sharding.hpp"
