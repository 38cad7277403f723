// The order of a reproducible DYNAMIC read (issue 36, `deterministic=True`): splits in their
// provider's order (epoch, index) and each split's elements in their order (seq), whatever the
// workers that produced them, their speed or their failures.
//
// Elements arrive tagged with their split and sequence number (the same tags the read cursor
// records, pipeline/sharding/read_cursor.hpp) in any order across splits; within a split a
// repeated split (its worker lost) may bring elements again, which the caller has dropped already
// (only fresh elements come here). The reorder hands out the next element in order when it has
// arrived, and otherwise waits. To move past a split it must know the split is over: either its
// last element was marked (origin_run.split_end) or its producer said how many elements it had
// (split_done: also a split that `filter` left empty, which has no element to mark). To move
// past an epoch it must know how many splits the epoch had (epoch_done).
//
// The memory it holds is what arrived ahead of the next element: bounded by whoever limits how
// far ahead of next_split() splits are produced (window(): splits at most this far ahead of the
// next one may be held). held() counts it in elements, held_bytes() in the caller's measure
// (`bytes`, given an element). CAF-free; the element type is the caller's.
#pragma once

#include <algorithm>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <utility>

namespace conveyor {

template <typename T>
class SplitReorder {
public:
  using Key = std::pair<int64_t, int64_t>; // (epoch, index)

  explicit SplitReorder(int64_t window, std::function<int64_t(const T&)> bytes = {})
    : window_(window > 0 ? window : 1), bytes_(std::move(bytes)) {}

  int64_t window() const { return window_; }
  // The split the order waits for (or hands out from).
  Key next_split() const { return next_; }
  // Whether a split lies more than window() splits ahead of next_split() (its producer should
  // wait). Splits of a later epoch count as ahead once the current epoch's size is known and
  // they are further than the window past it; before that, only their own epoch's index counts.
  bool beyond_window(const Key& split) const {
    if (split.first == next_.first)
      return split.second - next_.second > window_;
    if (split.first < next_.first)
      return false;
    auto n = epoch_splits_.find(next_.first);
    if (n == epoch_splits_.end() || split.first > next_.first + 1)
      return true;
    return (n->second - next_.second) + split.second > window_;
  }

  // A resumed read: the split was consumed whole before (it produces nothing here).
  void skip_split(const Key& split) {
    if (!(split < next_))
      splits_[split].end = 0;
  }
  // A resumed read: the split's first `seq` elements were consumed before (its order starts
  // there).
  void start_split_at(const Key& split, int64_t seq) {
    auto& s = splits_[split];
    for (; s.next < seq; ++s.next)
      if (!s.pending.empty()) {
        release(s.pending.front());
        s.pending.pop_front();
      }
  }
  // A resumed read, whatever its cursor holds (also elements consumed beyond a gap, which a
  // read that was not deterministic leaves): `complete` says a split was consumed whole (it is
  // passed without waiting for it), `covers` that one element was (the order steps over it).
  void resume_from(std::function<bool(const Key&)> complete,
                   std::function<bool(const Key&, int64_t)> covers) {
    complete_ = std::move(complete);
    covers_ = std::move(covers);
  }
  // Whether element `seq` of `split` is the next in order and nothing is held before it: then
  // it is counted as handed out (the caller hands it on without a copy into the reorder).
  bool take_if_next(const Key& split, int64_t seq, bool split_end) {
    if (split != next_ || (complete_ && complete_(split)))
      return false;
    auto& s = splits_[split];
    skip_covered(split, s);
    if (seq != s.next || (!s.pending.empty() && s.pending.front()))
      return false;
    if (!s.pending.empty())
      s.pending.pop_front();
    ++s.next;
    if (split_end)
      s.end = seq + 1;
    return true;
  }
  // Every element of the split arrived (its job saw each acknowledged): it ends after the last
  // one that came, or where the order stands in it (nothing came: a split `filter` emptied, or
  // one whose every element a resumed read's cursor covers).
  void all_arrived(const Key& split) {
    if (split < next_)
      return;
    auto& s = splits_[split];
    if (s.end >= 0)
      return;
    s.end = s.next + static_cast<int64_t>(s.pending.size()); // (its last entry is an element)
  }
  // An element arrived. `split_end`: it is its split's last.
  void add(const Key& split, int64_t seq, T element, bool split_end) {
    if (split < next_)
      return; // a split handed out already (a repeat the caller did not drop)
    auto& s = splits_[split];
    if (split_end)
      s.end = seq + 1;
    if (seq < s.next)
      return; // before the split's start (a resumed read's consumed prefix)
    const auto at = static_cast<std::size_t>(seq - s.next);
    if (at >= s.pending.size())
      s.pending.resize(at + 1);
    if (!s.pending[at]) {
      s.pending[at].emplace(std::move(element));
      ++held_;
      held_bytes_ += bytes_ ? bytes_(*s.pending[at]) : 0;
    }
  }
  // The split's producer says it had `count` elements in all (0: filtered empty).
  void split_done(const Key& split, int64_t count) {
    if (!(split < next_))
      splits_[split].end = count;
  }
  // The epoch had `num_splits` splits (its provider's end).
  void epoch_done(int64_t epoch, int64_t num_splits) { epoch_splits_[epoch] = num_splits; }

  // The next element in order, if it arrived.
  std::optional<T> pop() {
    for (;;) {
      auto it = splits_.find(next_);
      if (complete_ && complete_(next_)) { // a resumed read consumed all of it
        if (it != splits_.end()) {
          for (const auto& e : it->second.pending)
            release(e);
          splits_.erase(it);
        }
        advance();
        continue;
      }
      if (it != splits_.end()) {
        auto& s = it->second;
        skip_covered(next_, s);
        if (!s.pending.empty() && s.pending.front()) {
          release(s.pending.front());
          T out = std::move(*s.pending.front());
          s.pending.pop_front();
          ++s.next;
          return out;
        }
        if (s.end < 0 || s.next < s.end)
          return std::nullopt; // its next element has not come yet
        splits_.erase(it);     // over: on to the next split
      } else if (!over_without_state()) {
        return std::nullopt;
      }
      advance();
    }
  }
  // The read ended (every split was produced and delivered): what is held goes out in order,
  // whatever the order still waited for.
  template <typename Out>
  void drain(Out&& out) {
    for (auto& [key, s] : splits_)
      for (auto& element : s.pending)
        if (element)
          out(std::move(*element));
    splits_.clear();
    held_ = 0;
    held_bytes_ = 0;
  }

  // Elements held, waiting for an earlier one, and their bytes (0 without `bytes`).
  int64_t held() const { return held_; }
  int64_t held_bytes() const { return held_bytes_; }

private:
  struct SplitState {
    int64_t next = 0; // the next seq in order
    int64_t end = -1; // elements in the split; -1 = not known yet
    // Arrived elements from seq `next` on (empty slots: not arrived). Elements of a split mostly
    // arrive in order, so this is a queue, not a map: no node per element.
    std::deque<std::optional<T>> pending;
  };
  // An element leaves the hold (handed out, or skipped by a resumed read).
  void release(const std::optional<T>& e) {
    if (!e)
      return;
    --held_;
    held_bytes_ -= bytes_ ? bytes_(*e) : 0;
  }

  // Steps the split's order over the elements a resumed read's cursor covers.
  void skip_covered(const Key& split, SplitState& s) {
    if (!covers_ || (complete_ && complete_(split))) // (a complete split covers every seq)
      return;
    while ((s.end < 0 || s.next < s.end) && (s.pending.empty() || !s.pending.front()) &&
           covers_(split, s.next)) {
      if (!s.pending.empty())
        s.pending.pop_front();
      ++s.next;
    }
  }

  // The next split has no state: nothing arrived for it and it is not known to be over, unless
  // it is past its epoch's end.
  bool over_without_state() const {
    auto n = epoch_splits_.find(next_.first);
    return n != epoch_splits_.end() && next_.second >= n->second;
  }

  void advance() {
    auto n = epoch_splits_.find(next_.first);
    if (n != epoch_splits_.end() && next_.second + 1 >= n->second) {
      // The epoch is over: the next one starts.
      next_ = Key{next_.first + 1, 0};
      return;
    }
    ++next_.second;
  }

  int64_t window_;
  Key next_{0, 0};
  std::map<Key, SplitState> splits_;
  std::map<int64_t, int64_t> epoch_splits_;
  int64_t held_ = 0;
  std::function<int64_t(const T&)> bytes_;
  int64_t held_bytes_ = 0;
  std::function<bool(const Key&)> complete_;
  std::function<bool(const Key&, int64_t)> covers_;
};

} // namespace conveyor
