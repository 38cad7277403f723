// A split provider that hears when a `repeat` above its source starts a new pass. tf.data's
// RepeatDataset resets every split provider of its input at the end of each repetition, so a
// source the pass left mid-epoch (the longer input of a zip that ended on its other input) starts
// its next epoch instead of carrying its unread splits into the next repetition. Only providers
// that can be left mid-epoch implement it (the DYNAMIC task's split feeds, worker/split_feed.hpp);
// the repeat kernel asks each of its input's providers for it when that input has several
// sources (one source ends its epoch before the pass does).
#pragma once

namespace conveyor {

class RepetitionAware {
public:
  virtual ~RepetitionAware() = default;
  // The repeat above this provider's source began its next pass.
  virtual void next_repetition() = 0;
};

} // namespace conveyor
