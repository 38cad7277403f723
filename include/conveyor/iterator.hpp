// Iterator: pulls elements out of a dataset graph, one op per iterator object.
//
// Resumability contract (needed for DYNAMIC sharding, where a source may have to wait for the
// next split to arrive over the network): get_next may return an `unavailable` Status. Every
// iterator must then keep all partial progress (a half-filled batch, a shuffle buffer, the
// current interleave cycle...) in its members and propagate the `unavailable` unchanged, so that
// calling get_next again later continues exactly where it stopped — no element lost or repeated.
#pragma once

#include <atomic>
#include <memory>

#include "conveyor/element.hpp"
#include "conveyor/status.hpp"

namespace conveyor {

class FunctionRegistry;
class SplitProvider;
class PathPolicy;
class MemoryBudget;
class ExecutorGroup;
class IteratorStateWriter;
class IteratorStateReader;

struct IteratorContext {
  // Never null once make_iterator starts (defaults to FunctionRegistry::global()).
  const FunctionRegistry* functions = nullptr;
  // DYNAMIC sharding: when set, the dataset's one splittable source (range, from_tensor_slices,
  // list_files, text_lines, tfrecord) produces only the splits this provider hands out, instead of
  // its whole content. A source that exhausts the provider ends its sequence (`repeat` above it
  // then starts a new iteration that asks the same provider for the next epoch's splits).
  SplitProvider* split_provider = nullptr;
  // Which files the pipeline may read and write (pipeline/io/path_policy.hpp); nullptr = any (local
  // use on the caller's own files). Workers always set one; it outlives the iterators.
  const PathPolicy* paths = nullptr;
  // The job's memory budget (pipeline/runtime/memory_budget.hpp) that buffering ops (shuffle, batch,
  // prefetch, cache) charge; nullptr = unbounded. It outlives the iterators.
  MemoryBudget* memory = nullptr;
  // The job's share of the process's executor (pipeline/runtime/executor.hpp) that parallel maps and
  // prefetches queue their work in; null = each such op is a share of its own.
  std::shared_ptr<ExecutorGroup> executor_group;
  // Set (from any thread) when the pipeline must stop: its task stopped because its job ended or
  // the worker shuts down. Every kernel that can run long without returning an element checks it
  // and returns `cancelled` (pipeline/runtime/stop_flag.hpp); nullptr = never stopped. It outlives
  // the iterators.
  const std::atomic<bool>* stop = nullptr;
};

class Iterator {
public:
  virtual ~Iterator() = default;
  // On success either fills `out` (end_of_sequence = false) or sets end_of_sequence = true.
  // After end_of_sequence, further calls keep returning end_of_sequence.
  virtual Status get_next(Element& out, bool& end_of_sequence) = 0;

  // Checkpoints (conveyor/iterator_state.hpp): save() writes what this iterator holds between two
  // get_next calls, then its input's state; restore() reads it into a fresh iterator of the same
  // dataset before its first get_next. An iterator with threads pauses them while it saves, so
  // its input's state is taken with nothing in flight. The default refuses (unimplemented).
  virtual Status save(IteratorStateWriter& out);
  virtual Status restore(IteratorStateReader& in);
};

} // namespace conveyor
