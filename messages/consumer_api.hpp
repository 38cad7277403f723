// Moved to include/conveyor/messages/consumer_api.hpp (public, installed); this path stays for code inside the repo.
#pragma once
#include "conveyor/messages/consumer_api.hpp"
