// Whole-epoch cross-trainer sharing: which trainer each reader (a consumer) reads as, and so
// when a trainer's first reader arrives and its last one leaves. CAF-free. The job keeps one for
// its consumers (JobCore), each task one for the consumers that asked it (TaskRunner).
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace conveyor::actors {

class TrainerReaders {
public:
  // Returns whether `trainer` had no reader before.
  bool add(uint64_t reader, const std::string& trainer) {
    if (auto r = readers_.find(reader); r != readers_.end() && r->second == trainer)
      return false; // (every request of a reader says its trainer: the common case first)
    const bool fresh = !has_reader(trainer);
    readers_[reader] = trainer;
    return fresh;
  }
  // The reader left: its trainer when it was that trainer's last reader, else empty.
  std::string remove(uint64_t reader) {
    auto r = readers_.find(reader);
    if (r == readers_.end())
      return {};
    std::string trainer = std::move(r->second);
    readers_.erase(r);
    return has_reader(trainer) ? std::string{} : trainer;
  }
  // Every reader of `trainer` leaves.
  void remove_trainer(const std::string& trainer) {
    for (auto it = readers_.begin(); it != readers_.end();)
      it = it->second == trainer ? readers_.erase(it) : std::next(it);
  }
  std::vector<std::string> trainers() const { // distinct, sorted
    std::set<std::string> distinct;
    for (const auto& [reader, t] : readers_)
      distinct.insert(t);
    return {distinct.begin(), distinct.end()};
  }

private:
  bool has_reader(const std::string& trainer) const {
    for (const auto& [reader, t] : readers_)
      if (t == trainer)
        return true;
    return false;
  }
  std::map<uint64_t, std::string> readers_;
};

} // namespace conveyor::actors
