// Names the calling thread as `top -H`, perf and gdb show it (Linux keeps 15 characters; a longer name is refused). A
// thread otherwise inherits its creator's name: the Executor's threads, started from a CAF thread,
// all showed as "caf.multiplexer" in profiles.
#pragma once

#include <pthread.h>

namespace conveyor {

inline void name_this_thread(const char* name) { pthread_setname_np(pthread_self(), name); }

} // namespace conveyor
