// Moved to include/conveyor/tensor.hpp (public, installed); this path stays for code inside the repo.
#pragma once
#include "conveyor/tensor.hpp"
