// Moved to include/conveyor/messages/type_ids.hpp (public, installed); this path stays for code inside the repo.
#pragma once
#include "conveyor/messages/type_ids.hpp"
