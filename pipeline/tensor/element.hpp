// Moved to include/conveyor/element.hpp (public, installed); this path stays for code inside the repo.
#pragma once
#include "conveyor/element.hpp"
