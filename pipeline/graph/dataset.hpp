// Moved to include/conveyor/dataset.hpp (public, installed); this path stays for code inside the repo.
#pragma once
#include "conveyor/dataset.hpp"
