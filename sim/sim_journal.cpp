#include "sim/sim_journal.hpp"

#include "sim/world.hpp"

namespace conveyor::sim {

SimJournal::SimJournal(World& world, std::size_t slot, std::chrono::microseconds fsync_latency,
                       int64_t compact_after_records)
  : world_(world), slot_(slot), fsync_latency_(fsync_latency),
    compact_after_(compact_after_records) {}

uint64_t SimJournal::append(const msg::Update& update, Done on_durable) {
  pending_.push_back(actors::Journal::encode(update));
  pending_done_.push_back(std::move(on_durable));
  if (!sync_scheduled_) {
    sync_scheduled_ = true;
    world_.after(
      fsync_latency_,
      [this, inc = incarnation_] {
        if (inc == incarnation_)
          sync();
      },
      slot_);
  }
  return ++seq_;
}

void SimJournal::sync() {
  sync_scheduled_ = false;
  for (auto& r : pending_)
    durable_.push_back(std::move(r));
  pending_.clear();
  auto done = std::move(pending_done_);
  pending_done_.clear();
  for (auto& d : done) // in append order, after the whole group is durable
    if (d)
      d(Status::OK());
}

bool SimJournal::should_compact() const {
  return compact_after_ > 0 &&
         static_cast<int64_t>(durable_.size() + pending_.size()) >= compact_after_;
}

Status SimJournal::compact(const actors::DispatcherState& state) {
  // As the file journal: everything appended is written first, then the snapshot replaces it.
  sync();
  snapshot_ = actors::Journal::encode_snapshot(state.snapshot());
  durable_.clear();
  ++compactions_;
  return Status::OK();
}

void SimJournal::crash() {
  // A torn last record is cut off by recovery: the same loss as never having written it.
  lost_ += static_cast<int64_t>(pending_.size());
  pending_.clear();
  pending_done_.clear();
  sync_scheduled_ = false;
  ++incarnation_;
}

Expected<bool> SimJournal::replay(actors::DispatcherState& state) const {
  if (snapshot_.empty() && durable_.empty())
    return false;
  if (!snapshot_.empty()) {
    auto snapshot = actors::Journal::decode_snapshot(snapshot_);
    if (!snapshot.ok())
      return snapshot.status().with_context("the simulated disk's snapshot");
    CONVEYOR_RETURN_IF_ERROR(state.restore(*snapshot));
  }
  for (std::size_t i = 0; i < durable_.size(); ++i) {
    auto update = actors::Journal::decode(durable_[i]);
    if (!update.ok())
      return update.status().with_context("the simulated disk's record " + std::to_string(i));
    CONVEYOR_RETURN_IF_ERROR(
      state.apply(*update).with_context("replaying record " + std::to_string(i)));
  }
  return true;
}

} // namespace conveyor::sim
