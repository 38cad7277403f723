// A split's run of elements, decoded when the order reaches it (consumer/split_run.hpp).
#include "consumer/split_run.hpp"

#include <utility>

namespace conveyor::actors {

Status SplitRun::next(Element& out, DeliveredOrigin& origin) {
  if (done())
    return failed_precondition("a split's run of " + std::to_string(count) +
                               " elements was handed out whole");
  if (reader) {
    if (Status st = reader->next(out); !st.ok())
      return st.with_context("decoding a batch from " + batch->source);
  } else {
    out = std::move(decoded);
  }
  origin = DeliveredOrigin{first.epoch, first.index, first.seq + taken,
                           first.split_end && taken + 1 == count};
  ++taken;
  return Status::OK();
}

} // namespace conveyor::actors
