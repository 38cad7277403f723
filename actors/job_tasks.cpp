#include "actors/job_tasks.hpp"

namespace conveyor::actors {

bool JobTasks::add(msg::task_id_t id, msg::worker_id_t worker, std::string worker_address) {
  if (finished_ || tasks_.count(id))
    return false;
  tasks_[id] = Task{id, worker, std::move(worker_address), false, false, {}};
  return true; // not listed before it is assigned: the version does not change yet
}

bool JobTasks::assigned(msg::task_id_t id) {
  auto t = tasks_.find(id);
  if (t == tasks_.end() || t->second.assigned)
    return false;
  t->second.assigned = true;
  ++version_;
  return update_finished();
}

bool JobTasks::done(msg::task_id_t id, std::string error) {
  auto t = tasks_.find(id);
  if (t == tasks_.end() || t->second.done)
    return false;
  t->second.done = true;
  t->second.error = std::move(error);
  return update_finished();
}

bool JobTasks::remove(msg::task_id_t id) {
  if (!tasks_.erase(id))
    return false;
  ++version_;
  return update_finished();
}

bool JobTasks::update_finished() {
  if (finished_ || tasks_.empty())
    return false;
  for (const auto& [id, t] : tasks_)
    if (!t.done || !t.assigned)
      return false;
  finished_ = true;
  ++version_;
  return true;
}

const JobTasks::Task* JobTasks::find(msg::task_id_t id) const {
  auto t = tasks_.find(id);
  return t == tasks_.end() ? nullptr : &t->second;
}

std::vector<const JobTasks::Task*> JobTasks::listed() const {
  std::vector<const Task*> out;
  for (const auto& [id, t] : tasks_)
    if (t.assigned)
      out.push_back(&t);
  return out;
}

} // namespace conveyor::actors
