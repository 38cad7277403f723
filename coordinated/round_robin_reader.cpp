#include "coordinated/round_robin_reader.hpp"

#include <algorithm>
#include <string>
#include <utility>

#include "coordinated/round_elements.hpp"

namespace conveyor::actors {

RoundRobinReader::RoundRobinReader(int64_t consumer_index, int64_t num_consumers,
                                   int64_t max_outstanding, int64_t max_bytes)
  : planner_(consumer_index, num_consumers, std::min<int64_t>(max_outstanding, 8192), max_bytes),
    num_consumers_(std::max<int64_t>(1, num_consumers)) {
  planner_.start_resuming();
}

void RoundRobinReader::fill_poll(msg::get_tasks& req) const {
  req.round = planner_.next_round();
  req.round_fence = planner_.fence();
  for (const auto& r : planner_.lost_reports())
    req.lost_reports.push_back(msg::get_tasks::lost_report{r.task, r.rounds});
}

void RoundRobinReader::fill_join(msg::join_job& req) const {
  auto known = planner_.known_schedule();
  req.known_active = std::move(known.active);
  req.known_gone = std::move(known.gone);
  req.known_lost = std::move(known.lost);
}

Status RoundRobinReader::on_task_list(const msg::task_list& list) {
  std::vector<RoundRobinPlanner::TaskEntry> entries;
  for (const auto& t : list.tasks)
    entries.push_back({t.task, t.start_round, t.end_round, false, false, -1});
  for (const auto& r : list.retired_rounds)
    entries.push_back({r.task, r.start_round, r.end_round, true, false, r.served_rounds});
  for (const auto& r : list.lost_rounds)
    entries.push_back({r.task, r.start_round, r.end_round, false, true, r.served_rounds});
  return planner_.on_tasks(entries, list.round_fence);
}

void RoundRobinReader::fill_request(const RoundRobinPlanner::Request& r, int64_t consumer_index,
                                    int64_t round_timeout_ns, msg::get_elements& req) const {
  req.round_first = r.first;
  req.round_count = r.probe ? 0 : r.count;
  req.consumer_index = consumer_index;
  req.round_timeout_ns = round_timeout_ns;
  req.round_resume = r.probe || r.resume;
  req.round_committed_known = r.committed_known;
}

Status RoundRobinReader::on_batch(const RoundRobinPlanner::Request& r,
                                  const msg::element_batch& batch) {
  std::vector<Element> elements;
  if (batch.num_elements > 0) {
    if (auto s = decode_round_elements(batch.payload, batch.num_elements, elements); !s.ok())
      return s.with_context("reading task " + std::to_string(r.task));
    ++messages_;
    bytes_ += static_cast<int64_t>(batch.payload.size());
  }
  return planner_.on_reply(r, std::move(elements), batch.round_committed);
}

void RoundRobinReader::note_slots(const msg::task_list& list) {
  for (const auto& t : list.tasks)
    slots_.try_emplace(t.task, t.off_slot >= 0 ? t.off_slot : static_cast<int64_t>(t.task),
                       t.off_skip / num_consumers_);
}

std::vector<Element>
RoundRobinReader::take_ready(std::vector<std::pair<int64_t, int64_t>>* rounds) {
  std::vector<std::pair<msg::task_id_t, int64_t>> where;
  auto ready = planner_.take_ready(rounds ? &where : nullptr);
  if (rounds)
    for (const auto& [task, local] : where) {
      auto it = slots_.find(task);
      rounds->emplace_back(it == slots_.end() ? static_cast<int64_t>(task) : it->second.first,
                           (it == slots_.end() ? 0 : it->second.second) + local);
    }
  elements_ += static_cast<int64_t>(ready.size());
  return ready;
}

} // namespace conveyor::actors
