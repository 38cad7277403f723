// The simulated dispatcher's disk: a JournalWriter (dispatcher/journal.hpp) over memory that
// outlives the dispatcher's incarnations. Appends become durable only at a simulated fsync, a
// world event `fsync_latency` after the first unsynced append (one group per fsync, as the file
// journal does); a crash loses every record not yet synced, and may tear the record being
// written (which recovery cuts off, as the file journal truncates a torn tail). A restarted
// dispatcher replays the snapshot and the durable records through the journal's codec and
// DispatcherState::apply, exactly as DispatchServer does with the files.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "dispatcher/journal.hpp"

namespace conveyor::sim {

class World;

class SimJournal final : public actors::JournalWriter {
public:
  // `slot`: the dispatcher's node slot (the fsync event gives work to its actors).
  SimJournal(World& world, std::size_t slot, std::chrono::microseconds fsync_latency,
             int64_t compact_after_records);

  uint64_t append(const msg::Update& update, Done on_durable) override;
  bool should_compact() const override;
  Status compact(const actors::DispatcherState& state) override;
  const std::string& dir() const override { return dir_; }

  // The dispatcher crashed: unsynced records are gone (callbacks never run).
  void crash();
  // A fresh state from the last snapshot and the durable records; false when the disk is empty
  // (a first start). An error is a journal bug: the simulator reports it as a violation.
  Expected<bool> replay(actors::DispatcherState& state) const;

  int64_t records_lost() const { return lost_; }
  int64_t compactions() const { return compactions_; }

private:
  void sync();

  World& world_;
  std::size_t slot_;
  std::chrono::microseconds fsync_latency_;
  int64_t compact_after_;
  std::string dir_ = "(simulated disk)";
  std::string snapshot_;             // encode_snapshot output; empty = none
  std::vector<std::string> durable_; // encoded records after the snapshot
  std::vector<std::string> pending_; // appended, not synced
  std::vector<Done> pending_done_;
  bool sync_scheduled_ = false;
  uint32_t incarnation_ = 0; // a sync scheduled before a crash does nothing after it
  uint64_t seq_ = 0;
  int64_t lost_ = 0;
  int64_t compactions_ = 0;
};

} // namespace conveyor::sim
