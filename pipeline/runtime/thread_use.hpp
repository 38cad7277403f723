// What one of this process's threads has used (pipeline/runtime/stall_rule.hpp's ThreadUse): its
// CPU time, from /proc/self/task/TID/schedstat the time it was runnable but waited for a CPU, and
// from /proc/self/task/TID/stat whether it is runnable now.
#pragma once

#include <pthread.h>

#include "pipeline/runtime/stall_rule.hpp"

namespace conveyor {

// The calling thread's kernel thread id (the TID of /proc/self/task).
int this_thread_tid();

// `thread`'s use; `tid` its this_thread_tid(), 0 when not known yet (then, or where schedstat
// is missing, wait_known and runnable are false). CPU time 0 when the system cannot tell (it looks blocked).
ThreadUse thread_use(pthread_t thread, int tid);

} // namespace conveyor
