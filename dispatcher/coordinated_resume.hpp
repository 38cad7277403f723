// A coordinated read resumed from its N trainers' read cursors (issue 36), CAF-free: the job's
// start is decided once every consumer index brought its cursor, as the least over them, so the
// trainers may resume in any order (one ahead drops the rounds its cursor has; ConsumerCore and
// the stream do that). The dispatcher journals each trainer's shares (msg::CoordinatedResumeRecord)
// and DispatcherState applies this to them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "messages/journal_records.hpp"
#include "pipeline/sharding/read_cursor.hpp"

namespace conveyor::actors {

// A coordinated cursor's slots as a task skips them: per slot the elements of the rounds it
// consumed (rounds x N), ReadCursor::kSkipAll for a slot that ended. Ordered by slot.
std::vector<msg::OffSlot> coordinated_shares(const ReadCursor& cursor);

// The resumed job's slots, from every consumer index's shares: per slot the least skip over
// them (a slot that one trainer's cursor lacks: 0, it never learned of the slot's task), without
// the slots that ended for all; when every slot ended, the first with kSkipAll (a task that
// produces nothing, so that the job has one to end with). Empty when no cursor had a slot (a
// fresh job).
std::vector<msg::OffSlot> resumed_slots(const std::vector<std::vector<msg::OffSlot>>& shares);

// Why `cursor` cannot join a resumed job whose slots were decided already as `slots` ("" when
// it can): a trainer behind them would miss the rounds in between (e.g. restarted again from an
// older cursor); one ahead drops the rounds it has. Names both rounds per slot.
std::string late_join_refusal(const std::vector<msg::OffSlot>& slots, const ReadCursor& cursor);

} // namespace conveyor::actors
