#include "dispatcher/coordinated_resume.hpp"

#include <algorithm>
#include <map>

namespace conveyor::actors {

std::vector<msg::OffSlot> coordinated_shares(const ReadCursor& cursor) {
  std::vector<msg::OffSlot> out;
  for (const auto& [slot, s] : cursor.slots())
    out.push_back(
      msg::OffSlot{slot, s.ended ? ReadCursor::kSkipAll : s.consumed * cursor.num_consumers()});
  return out;
}

std::vector<msg::OffSlot> resumed_slots(const std::vector<std::vector<msg::OffSlot>>& shares) {
  std::map<int64_t, int64_t> least; // slot -> skip
  for (const auto& slots : shares)
    for (const auto& s : slots)
      least.try_emplace(s.slot, s.skip);
  for (auto& [slot, skip] : least)
    for (const auto& slots : shares) {
      auto mine = std::find_if(slots.begin(), slots.end(),
                               [slot = slot](const msg::OffSlot& s) { return s.slot == slot; });
      skip = std::min(skip, mine == slots.end() ? 0 : mine->skip);
    }
  std::vector<msg::OffSlot> out;
  for (const auto& [slot, skip] : least)
    if (skip != ReadCursor::kSkipAll)
      out.push_back(msg::OffSlot{slot, skip});
  if (out.empty() && !least.empty())
    out.push_back(msg::OffSlot{least.begin()->first, ReadCursor::kSkipAll});
  return out;
}

std::string late_join_refusal(const std::vector<msg::OffSlot>& slots, const ReadCursor& cursor) {
  const auto mine = coordinated_shares(cursor);
  const int64_t n = std::max<int64_t>(1, cursor.num_consumers());
  const auto rounds = [n](int64_t skip) {
    return skip == ReadCursor::kSkipAll ? std::string{"all (ended)"} : std::to_string(skip / n);
  };
  for (const auto& s : slots) {
    auto it = std::find_if(mine.begin(), mine.end(),
                           [&](const msg::OffSlot& m) { return m.slot == s.slot; });
    const int64_t have = it == mine.end() ? 0 : it->skip;
    if (have < s.skip)
      return "`resume_from` of consumer_index " + std::to_string(cursor.consumer_index()) +
             " is at round " + std::to_string(cursor.consumed()) +
             ", behind the resumed job its trainers started (task slot " + std::to_string(s.slot) +
             ": " + rounds(have) + " local rounds consumed, the job skips " + rounds(s.skip) +
             "): a trainer that joins the job after all " + std::to_string(n) +
             " brought their cursors must not be behind them";
  }
  return {};
}

} // namespace conveyor::actors
