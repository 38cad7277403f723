// A job's task bookkeeping, without actors: which tasks exist (one per live worker), which are
// assigned (the worker answered with the task's handle), which finished, and when the job as a
// whole is finished. The version changes with every change consumers must see, so their
// long-polling get_tasks requests are answered exactly when something changed.
//
// Finished = at least one task, and every task that is not removed is assigned (consumers can
// see it) and reached its end. A task is
// removed when its worker leaves; then it no longer counts (OFF: its rest is lost; DYNAMIC:
// its unread splits are lost — the reference's at-most-once visitation).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "messages/protocol.hpp"

namespace conveyor::actors {

class JobTasks {
public:
  struct Task {
    msg::task_id_t id = 0;
    msg::worker_id_t worker = 0;
    std::string worker_address;
    bool assigned = false;
    bool done = false;
    std::string error;
  };

  // false when the job is finished (it takes no new tasks) or the task exists.
  bool add(msg::task_id_t id, msg::worker_id_t worker, std::string worker_address);
  // Returns true when this made the whole job finished (a task may report its end before the
  // job learns its handle: both travel from the worker on different paths).
  bool assigned(msg::task_id_t id);
  // Returns true when this made the whole job finished.
  bool done(msg::task_id_t id, std::string error);
  // Returns true when this made the whole job finished.
  bool remove(msg::task_id_t id);

  bool finished() const { return finished_; }
  uint64_t version() const { return version_; }
  const Task* find(msg::task_id_t id) const;
  const std::map<msg::task_id_t, Task>& tasks() const { return tasks_; }
  // The tasks consumers may read from: assigned and not removed.
  std::vector<const Task*> listed() const;

private:
  bool update_finished();
  std::map<msg::task_id_t, Task> tasks_;
  uint64_t version_ = 1;
  bool finished_ = false;
};

} // namespace conveyor::actors
