// map(fn, num_parallel_calls, deterministic): fn applied to every element. With more than one
// parallel call, up to num_parallel_calls calls are queued on the process's executor
// (pipeline/runtime/executor.hpp) while this iterator keeps pulling its input on the caller's thread (so
// input errors and `unavailable` stay in stream order); a caller waiting for a result runs the
// oldest queued call itself (not while the first is a started call, the Python pool's, running
// elsewhere: see take_finished_slot). Started calls are lazy items (WorkQueue::submit_lazy) on a
// thread without a lease: no executor thread is woken for them, this thread runs them in order.
// deterministic=true returns results in input order, false returns whichever finishes first.
// Its waits give back the thread's lease first and end with the lease's check() error
// (pipeline/runtime/thread_lease.hpp: the Python trainer pipeline's GIL, Ctrl-C).
#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <thread>

#include "pipeline/runtime/executor.hpp"
#include "pipeline/runtime/thread_lease.hpp"
#include "pipeline/kernels/kernel.hpp"

namespace conveyor::kernels {

namespace {

using MapStartFn = std::function<std::function<Expected<Element>()>(const Element&, const Params&)>;

// `index` counts the map's input elements on this iterator from 0, so a failing element can be
// found again (tf.data names the function; the index is what makes a bad record findable).
Status function_error(const std::string& name, int64_t index, const Status& status) {
  return status.with_context("map function `" + name + "` on element " + std::to_string(index));
}

class MapIterator : public Iterator {
public:
  MapIterator(IteratorPtr input, MapFn fn, Params params, std::string name, MemoryBudget* budget,
              StopCheck stop)
    : input_(std::move(input)), fn_(std::move(fn)), params_(std::move(params)),
      name_(std::move(name)), budget_(budget), stop_(stop) {}

  Status get_next(Element& out, bool& end_of_sequence) override {
    Element in;
    CONVEYOR_RETURN_IF_ERROR(input_->get_next(in, end_of_sequence));
    if (end_of_sequence)
      return Status::OK();
    CONVEYOR_RETURN_IF_ERROR(stop_.check("map")); // between user-function calls
    FunctionMemoryScope scope(budget_);           // a large result is checked before it is built
    const int64_t index = next_index_++;
    auto mapped = fn_(in, params_);
    if (!mapped.ok())
      return function_error(name_, index, mapped.status());
    out = std::move(*mapped);
    return Status::OK();
  }

  Status save(IteratorStateWriter& out) override {
    out.put_tag("map");
    out.put_int(next_index_);
    return input_->save(out);
  }

  Status restore(IteratorStateReader& in) override {
    CONVEYOR_RETURN_IF_ERROR(in.expect_tag("map"));
    next_index_ = in.get_int();
    CONVEYOR_RETURN_IF_ERROR(in.status());
    return input_->restore(in);
  }

private:
  IteratorPtr input_;
  MapFn fn_;
  Params params_;
  std::string name_;
  MemoryBudget* budget_;
  StopCheck stop_;
  int64_t next_index_ = 0;
};

class ParallelMapIterator : public Iterator {
public:
  ParallelMapIterator(IteratorPtr input, MapFn fn, MapStartFn start, Params params,
                      std::string name, int64_t in_flight, bool deterministic,
                      std::shared_ptr<ExecutorGroup> group, MemoryBudget* budget, StopCheck stop)
    : group_(std::move(group)), input_(std::move(input)),
      fn_(std::make_shared<MapFn>(std::move(fn))), start_(std::move(start)),
      params_(std::make_shared<Params>(std::move(params))), name_(std::move(name)),
      in_flight_(in_flight), deterministic_(deterministic), budget_(budget), stop_(stop),
      shared_(std::make_shared<Shared>()) {}

  // The queue (declared last) is destroyed first: it drops the calls not started and waits
  // for the running ones, which only touch `shared_`, `fn_` and `params_` through their own
  // shared pointers.
  ~ParallelMapIterator() override { give_back_lease(); } // the running calls may need it

  Status get_next(Element& out, bool& end_of_sequence) override {
    end_of_sequence = false;
    // Keep `in_flight_` calls in flight. An input `unavailable` takes its place in the stream
    // like an error, and the input is not asked again until the caller has received it.
    while (!input_done_ && !waiting_for_retry_ &&
           static_cast<int64_t>(slots_.size()) < in_flight_) {
      CONVEYOR_RETURN_IF_ERROR(stop_.check("map"));
      Element in;
      bool end = false;
      Status status = input_->get_next(in, end);
      if (status.code() == ErrorCode::unavailable) {
        if (slots_.empty())
          return status;
        waiting_for_retry_ = true;
      }
      auto slot = std::make_shared<Slot>();
      if (!status.ok()) { // an input error keeps its place in the stream
        slot->result = status;
        slot->done = true;
      } else if (end) {
        input_done_ = true;
        break;
      } else {
        submit(slot, std::move(in), next_index_++);
      }
      slots_.push_back(std::move(slot));
    }
    if (slots_.empty()) {
      end_of_sequence = true;
      return Status::OK();
    }
    std::shared_ptr<Slot> slot;
    CONVEYOR_RETURN_IF_ERROR(take_finished_slot(slot));
    if (!slot->result.ok()) {
      if (slot->result.status().code() == ErrorCode::unavailable)
        waiting_for_retry_ = false;
      return slot->result.status();
    }
    out = std::move(*slot->result);
    return Status::OK();
  }

  // The calls in flight finish first: their results (and errors, in their places) are state.
  Status save(IteratorStateWriter& out) override {
    if (waiting_for_retry_)
      return failed_precondition("`map` cannot save its state while its input's `unavailable` "
                                 "waits for a retry");
    CONVEYOR_RETURN_IF_ERROR(finish_all_calls());
    out.put_tag("parallel_map");
    out.put_int(next_index_);
    out.put_bool(input_done_);
    out.put_int(static_cast<int64_t>(slots_.size()));
    for (const auto& slot : slots_) {
      out.put_status(slot->result.status());
      if (slot->result.ok())
        out.put_element(*slot->result);
    }
    return input_->save(out);
  }

  Status restore(IteratorStateReader& in) override {
    CONVEYOR_RETURN_IF_ERROR(in.expect_tag("parallel_map"));
    next_index_ = in.get_int();
    input_done_ = in.get_bool();
    const int64_t count = in.get_int();
    for (int64_t i = 0; i < count && in.status().ok(); ++i) {
      auto slot = std::make_shared<Slot>();
      Status status = in.get_status();
      if (status.ok())
        slot->result = in.get_element();
      else
        slot->result = std::move(status);
      slot->done = true;
      slots_.push_back(std::move(slot));
    }
    CONVEYOR_RETURN_IF_ERROR(in.status());
    return input_->restore(in);
  }

private:
  struct Slot {
    Expected<Element> result = Status(ErrorCode::internal, "map call not finished");
    bool done = false;                // guarded by Shared::mu
    bool started_call = false;        // start_ took it (set before it is queued)
    std::atomic<bool> running{false}; // its queued item began (on some thread)
  };
  struct Shared {
    std::mutex mu;
    std::condition_variable finished;
    bool consumer_waiting = false; // notify only then: wake-ups are the cost of small calls
  };

  void submit(const std::shared_ptr<Slot>& slot, Element in, int64_t index) {
    if (!queue_)
      queue_ = Executor::shared().make_queue(group_);
    // A function that can start a call without waiting (the Python pool) starts it here; the
    // queued item only waits for its result.
    if (start_ && !stop_.stopped()) {
      if (auto started = start_(in, *params_)) {
        slot->started_call = true;
        auto item = [slot, started = std::move(started), shared = shared_, name = name_, index,
                     budget = budget_]() {
          slot->running.store(true, std::memory_order_relaxed);
          FunctionMemoryScope scope(budget);
          // (even when stopped: the reply is read, not left in the way of the next call's)
          finish(*slot, *shared, started(), name, index);
        };
        // Its request waits on a process, sent by whichever call of that process runs or reads a
        // reply first (process_pool.cpp). This thread runs the call itself when it needs the
        // result (take_finished_slot's run_one), in order: a thread woken for it would send,
        // wait for the reply, then wake this one (a hand-over per element). Not with a lease
        // (the Python trainer's GIL): the wait would hold it.
        if (thread_lease() == nullptr)
          queue_->submit_lazy(std::move(item));
        else
          queue_->submit(std::move(item));
        return;
      }
    }
    // The budget and the stop flag outlive this iterator (IteratorContext), and so its calls:
    // the queue waits for the running ones when it is destroyed.
    queue_->submit([slot, in = std::move(in), fn = fn_, params = params_, shared = shared_,
                    name = name_, index, budget = budget_, stop = stop_]() {
      // Queued calls of a stopped pipeline do not run.
      Expected<Element> mapped = StopCheck::stopped_status("map");
      if (!stop.stopped()) {
        FunctionMemoryScope scope(budget);
        mapped = (*fn)(in, *params);
      }
      finish(*slot, *shared, std::move(mapped), name, index);
    });
  }

  static void finish(Slot& slot, Shared& shared, Expected<Element> mapped, const std::string& name,
                     int64_t index) {
    if (!mapped.ok())
      mapped = function_error(name, index, mapped.status());
    std::lock_guard<std::mutex> lock(shared.mu);
    slot.result = std::move(mapped);
    slot.done = true;
    if (shared.consumer_waiting)
      shared.finished.notify_one();
  }

  // The first slot (deterministic) or the first finished one, removed from `slots_`. While
  // none is finished, runs the oldest queued call here (queued in input order, so that is the
  // one a deterministic map needs first: a lazy started call too, whose reply it then waits for);
  // sleeps only while every call is running elsewhere, or while the first one is a started call
  // (the Python pool) running elsewhere: its reply comes without this thread, and the queued ones
  // are left to the executor's threads (they copy their elements in). Before it sleeps it hands
  // every lazy item to the threads (what the running calls wait for may be behind one).
  // An error: the thread lease's check ended the wait (the slots stay).
  Status take_finished_slot(std::shared_ptr<Slot>& out) {
    for (;;) {
      {
        std::unique_lock<std::mutex> lock(shared_->mu);
        if ((out = pop_finished_slot()))
          return Status::OK();
      }
      const Slot& first = *slots_.front();
      const bool first_runs = first.started_call && first.running.load(std::memory_order_relaxed);
      if (!first_runs && queue_ && queue_->run_one())
        continue;
      Executor::shared().publish_lazy(); // (what the running calls wait for may be behind them)
      std::unique_lock<std::mutex> lock(shared_->mu);
      if ((out = pop_finished_slot()))
        return Status::OK();
      shared_->consumer_waiting = true; // set with the check: no wake-up is missed
      Status st = wait_giving_back(shared_->finished, lock, [this] { return any_finished(); });
      shared_->consumer_waiting = false;
      CONVEYOR_RETURN_IF_ERROR(st);
    }
  }

  // Runs or waits for every call in flight (as take_finished_slot does for one).
  Status finish_all_calls() {
    const auto all_done = [this] {
      for (const auto& slot : slots_)
        if (!slot->done)
          return false;
      return true;
    };
    for (;;) {
      {
        std::lock_guard<std::mutex> lock(shared_->mu);
        if (all_done())
          return Status::OK();
      }
      if (queue_ && queue_->run_one())
        continue;
      Executor::shared().publish_lazy();
      std::unique_lock<std::mutex> lock(shared_->mu);
      if (all_done())
        return Status::OK();
      shared_->consumer_waiting = true;
      Status st = wait_giving_back(shared_->finished, lock, all_done);
      shared_->consumer_waiting = false;
      CONVEYOR_RETURN_IF_ERROR(st);
    }
  }

  // Under shared_->mu: the slot pop_finished_slot() takes (slots_.end(): none).
  std::deque<std::shared_ptr<Slot>>::iterator find_finished_slot() {
    for (auto it = slots_.begin(); it != slots_.end(); ++it) {
      if ((*it)->done)
        return it;
      if (deterministic_)
        break;
    }
    return slots_.end();
  }
  bool any_finished() { return find_finished_slot() != slots_.end(); }

  // Under shared_->mu.
  std::shared_ptr<Slot> pop_finished_slot() {
    auto it = find_finished_slot();
    if (it == slots_.end())
      return nullptr;
    auto slot = std::move(*it);
    slots_.erase(it);
    return slot;
  }

  std::shared_ptr<ExecutorGroup> group_; // the job's share of the executor (null: its own)
  IteratorPtr input_;
  std::shared_ptr<const MapFn> fn_;
  MapStartFn start_; // null: every call runs fn_ on the executor
  std::shared_ptr<const Params> params_;
  std::string name_;
  int64_t in_flight_; // num_parallel_calls x the function's calls_per_parallel_call
  bool deterministic_;
  MemoryBudget* budget_;
  StopCheck stop_;
  std::shared_ptr<Shared> shared_;
  std::deque<std::shared_ptr<Slot>> slots_; // in input order
  bool input_done_ = false;
  bool waiting_for_retry_ = false; // an input `unavailable` is queued in slots_
  int64_t next_index_ = 0;
  std::unique_ptr<WorkQueue> queue_; // last: destroyed (drained) first
};

} // namespace

MakeResult make_map(const NodePtr& node, const KernelContext& kctx) {
  const FunctionRef& ref = node->function_attr("fn");
  auto def = find_function("map", ref, FunctionKind::map, kctx);
  if (!def.ok())
    return def.status();
  if (!(*def)->map)
    return internal_error("map function `" + ref.name + "` has no implementation");
  int64_t parallelism = node->int_attr("num_parallel_calls");
  if (parallelism == kAutotune)
    parallelism = std::max<int64_t>(1, std::thread::hardware_concurrency());
  if (parallelism < 1)
    return invalid_argument(
      "`map` argument `num_parallel_calls` must be positive or AUTOTUNE, got " +
      std::to_string(parallelism));
  auto input = make_input(node, kctx);
  if (!input.ok())
    return input.status();
  auto params = kctx.functions().resolve_params(ref);
  if (auto key = params.find("key"); key != params.end() && key->second != Scalar{std::string{}}) {
    // A component named by dict key: found once here, in the input's structure.
    auto spec = Dataset(node->inputs.at(0)).element_spec(&kctx.functions());
    if (!spec.ok())
      return spec.status().with_context("map(" + ref.name +
                                        "): finding key= in the input's elements");
    auto resolved = resolve_component_key(ref.name, std::move(params), *spec);
    if (!resolved.ok())
      return resolved.status();
    params = std::move(*resolved);
  }
  if (parallelism == 1)
    return IteratorPtr(std::make_unique<MapIterator>(
      std::move(*input), (*def)->map, std::move(params), ref.name, kctx.memory(), kctx.stop()));
  // A function that queues calls (the Python pool) gets more in flight than it runs at once.
  const int64_t per_call = (*def)->calls_per_parallel_call
                             ? std::max<int64_t>(1, (*def)->calls_per_parallel_call(params))
                             : 1;
  return IteratorPtr(std::make_unique<ParallelMapIterator>(
    std::move(*input), (*def)->map, (*def)->map_start, std::move(params), ref.name,
    parallelism * per_call, node->bool_attr("deterministic"), kctx.executor_group(), kctx.memory(),
    kctx.stop()));
}

} // namespace conveyor::kernels
