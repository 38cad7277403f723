// Moved to include/conveyor/iterator.hpp (public, installed); this path stays for code inside the repo.
#pragma once
#include "conveyor/iterator.hpp"
