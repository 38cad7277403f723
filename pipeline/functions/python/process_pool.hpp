// A pool of Python interpreter processes for Python maps with num_parallel_calls > 1: one
// interpreter runs one call at a time (the GIL), so CPU-bound functions scale only across
// processes. Each pool process is `PYTHON -c <pool_worker_script()> FD`, started with
// posix_spawn; element payloads go through shared memory regions (memfd + mmap), an input and an
// output one per request slot:
// the worker writes an element's tensors into the input region once, the function gets numpy
// views of it; a result of 64 KiB or more comes back in a result block (result_blocks.hpp) that
// the new element's tensors view in place (numpy in the pool process allocates it there:
// conveyor_pool_alloc.so, pool_alloc/), smaller ones (and big ones when no block is free, or when
// the function kept the array it made in the block) through the process's output region, copied
// once into the new element. A process that dies
// mid-call (SIGKILL, OOM killer) is replaced and the element is run again on the replacement, with
// a warning, and so is the request queued behind it (the blocks of its requests are freed, the
// ones its earlier results' tensors view stay theirs); a second death in a row fails the element
// loudly. Nothing is dropped silently.
//
// Each process holds up to kPoolDepth requests (python_functions.hpp): the one it runs and the
// next, already in its socket, so it never waits for the worker between two calls. The parallel
// map keeps kPoolCalls calls per process, queued with start() from its own thread without copying
// anything: the thread that runs the call (the map's own, which finishes its calls in order:
// map.cpp's lazy items) copies its element into shared memory and sends it, or, for the call past
// kPoolDepth, the thread that reads the reply freeing a slot does (while the process runs the
// request in its socket). A thread about to wait here (for a process with room, for its turn)
// hands the executor's lazy items to its threads first (Executor::publish_lazy): a call it waits
// for may be one of them. The processes run kPoolNiceIncrement nicer than the worker (the thread
// that feeds them must not wait for a core behind them).
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "conveyor/element.hpp"
#include "pipeline/functions/python_functions.hpp"
#include "pipeline/runtime/status.hpp"

namespace conveyor::python {

// The text of the program a pool process runs (pool_worker_script.cpp).
const char* pool_worker_script();

class PoolProcess;
class PoolCall;

// The pool processes' numpy allocator (conveyor_pool_alloc.so, pool_alloc/): its path beside the
// library or program running the pool, or "" when it is not there.
std::string pool_allocator_module();

struct PoolCounters {
  std::atomic<uint64_t> copied{0};           // ProcessPool::results_copied()
  std::atomic<uint64_t> placed{0};           // ProcessPool::results_placed()
  std::atomic<uint64_t> args_in_place{0};    // ProcessPool::arguments_in_place()
  std::atomic<uint64_t> args_copied{0};      // ProcessPool::arguments_copied()
  std::atomic<bool> allocator_warned{false}; // a process could not load it (warned once)
};

class ProcessPool {
public:
  // `python`: the interpreter to start (the one the worker embeds or runs in); `sys_path`: the
  // worker interpreter's sys.path, put in front of each pool process's own; `allocator`: the
  // pool processes' allocator module ("": none, with a warning; each result is then copied
  // into its block by the pool process).
  ProcessPool(std::string python, std::vector<std::string> sys_path,
              std::string allocator = pool_allocator_module());
  ~ProcessPool();

  // Runs the function (pickled bytes, or "module:function" when `is_import`) on `in` in a pool
  // process; at most `processes` of them exist (the pool grows to the largest count asked for).
  // `name` and `worker` name it in errors.
  Expected<Element> call(const std::string& function, bool is_import, const Element& in,
                         int64_t processes, const std::string& name, const std::string& worker);

  // The same call in two halves: queues the request now when a process can take it without
  // waiting (null otherwise: use call()), and returns what sends it (unless a thread reading an
  // earlier reply did) and waits for the result (it runs the element again if the process dies,
  // as call() does). Dropped unfinished, it withdraws a request not sent yet, and reads and drops
  // the reply of one sent, so the requests queued behind it get theirs.
  std::function<Expected<Element>()> start(const std::string& function, bool is_import,
                                           const Element& in, int64_t processes,
                                           const std::string& name, const std::string& worker);

  // The pool processes' ids, and the requests each was sent and has not answered yet, in the
  // same order (tests kill one to check recovery).
  std::vector<int> pids() const;
  std::vector<int> requests_in_flight() const;
  // Results of 64 KiB or more copied out of a process's output region: none of its result blocks
  // was free (all viewed), or the request's was too small or none was offered (a function's first
  // result bigger than its arguments). Tests; see result_blocks.hpp.
  uint64_t results_copied() const;
  // Results numpy made straight in their result block (conveyor_pool_alloc): the pool process
  // copied nothing, and the worker views them. Not counted: results copied into a block (no
  // allocator, or the function's result was not its new array), or kept by the function (the
  // process holds the block until it lets the array go; the result comes by the output region).
  uint64_t results_placed() const;
  // Numeric arguments of SharedArena::kMinBytes or more that the pool process read where they
  // lie, in the worker's shared arena (shared_arena.hpp), and those copied into its input region
  // (storage outside the arena: a view of a received frame, a tensor made on the heap). Tests.
  uint64_t arguments_in_place() const;
  uint64_t arguments_copied() const;

private:
  friend class PoolCall;
  Expected<Element> call_after(int deaths, const std::string& function, bool is_import,
                               const Element& in, int64_t processes, const std::string& name,
                               const std::string& worker);
  static Status after_death(int& deaths, const Status& death); // warns, or fails the second
  Expected<std::shared_ptr<PoolProcess>> take(int64_t processes);
  std::shared_ptr<PoolProcess> try_take(int64_t processes); // null: it would wait or start one
  // Of the first `processes` live ones, the one with the fewest calls in flight (null: none);
  // under mu_.
  std::shared_ptr<PoolProcess> least_busy(int64_t processes) const;
  void give_back(const std::shared_ptr<PoolProcess>& process);
  void forget(const std::shared_ptr<PoolProcess>& process); // it died (and was reaped)
  // The function's id in this pool, and the pool's copy of its text.
  std::pair<uint64_t, const std::string*> function_id(const std::string& function, bool is_import);

  std::string python_;
  std::vector<std::string> sys_path_;
  mutable std::mutex mu_;
  std::condition_variable idle_changed_;
  std::vector<std::shared_ptr<PoolProcess>> live_; // each with its calls in flight
  int64_t started_ = 0;                            // live processes, and those being started
  std::unordered_map<std::string, uint64_t> function_ids_[2]; // pickles, imports
  uint64_t next_function_id_ = 0;
  std::string allocator_;
  PoolCounters counters_;
};

} // namespace conveyor::python
