// Task -> job: split distribution for DYNAMIC sharding (tf.data service's distributed_epoch).
//
// A task asks for the next split of the epoch it is in (TF's GetSplit(repetition)): the job
// hands out each split of an epoch once across all its tasks; a task asking for an epoch that
// is already exhausted gets end_of_splits at once and moves to the next epoch, so every task
// sees one end_of_splits per epoch and a `repeat` above the source starts the next epoch.
// A task whose pipeline ended reports task_done.
#pragma once

#include <cstdint>
#include <string>

#include <caf/meta/type_name.hpp>
#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include "messages/protocol.hpp"
#include "messages/type_ids.hpp"
#include "pipeline/split_provider.hpp"

namespace conveyor {
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, Split& x) {
  return f(caf::meta::type_name("Split"), x.epoch, x.index, x.begin, x.end, x.file);
}
} // namespace conveyor

namespace conveyor::msg {

// task -> job
struct get_split {
  task_id_t task = 0;
  int64_t epoch = 0; // the epoch the task's pipeline is in
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, get_split& x) {
  return f(caf::meta::type_name("get_split"), x.task, x.epoch);
}

// job -> task
struct split_reply {
  bool end_of_splits = false;
  Split split; // valid when !end_of_splits
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, split_reply& x) {
  return f(caf::meta::type_name("split_reply"), x.end_of_splits, x.split);
}

// task -> job: the task's pipeline reached its end (every element is in its buffer), or
// failed with `error` (non-empty; its consumers get the error with their next request).
struct task_done {
  task_id_t task = 0;
  std::string error;
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, task_done& x) {
  return f(caf::meta::type_name("task_done"), x.task, x.error);
}

// The job, as its tasks see it.
using split_source_actor =
  caf::typed_actor<caf::replies_to<get_split>::with<split_reply>, caf::reacts_to<task_done>>;

} // namespace conveyor::msg
