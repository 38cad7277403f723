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
//
// An entry may stand for a run of `span` consecutive elements of one split (add/take_if_next's
// `span`, default 1): a deterministic read holds the elements a batch brought for one split as
// one entry, still encoded (consumer/ordered_reads.hpp), so the reorder's work is per run, not
// per element. held() counts elements (every span), `bytes` measures the whole entry.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <utility>
#include <vector>

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
      state(split).end = 0;
  }
  // A resumed read: the split's first `seq` elements were consumed before (its order starts
  // there).
  void start_split_at(const Key& split, int64_t seq) {
    auto& s = state(split);
    for (; !s.pending.empty() && s.pending.front().seq < seq; s.pending.pop_front())
      release(s.pending.front());
    s.next = std::max(s.next, seq);
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
  // it (with the `span` - 1 after it) is counted as handed out (the caller hands it on without a
  // copy into the reorder). `split_end`: the last of them is the split's last.
  bool take_if_next(const Key& split, int64_t seq, bool split_end, int64_t span = 1) {
    if (split != next_) // (the order may stand on a split that is over: move past it first)
      settle();
    if (split != next_ || (complete_ && complete_(split)))
      return false;
    auto& s = state(split);
    skip_covered(split, s);
    if (seq != s.next || s.pending.next_at(s.next))
      return false;
    s.next += span; // (fresh runs never overlap what is held)
    if (split_end)
      s.end = seq + span;
    return true;
  }
  // Every element of the split arrived (its job saw each acknowledged): it ends after the last
  // one that came, or where the order stands in it (nothing came: a split `filter` emptied, or
  // one whose every element a resumed read's cursor covers).
  void all_arrived(const Key& split) {
    if (split < next_)
      return;
    auto& s = state(split);
    if (s.end >= 0)
      return;
    s.end = s.pending.empty() ? s.next : s.pending.back().seq + s.pending.back().span;
  }
  // An element arrived (with `span`: elements seq .. seq + span - 1, as one entry). `split_end`:
  // its last is its split's last. False when the entry reaches past the order's place in its
  // split while starting before it: a part was handed out, the rest was not, and one entry
  // cannot be cut (the caller drops repeats and covered prefixes whole, so this is a bug: it
  // fails the read instead of losing the rest).
  bool add(const Key& split, int64_t seq, T element, bool split_end, int64_t span = 1) {
    if (split < next_)
      return true; // a split handed out already (a repeat the caller did not drop)
    auto& s = state(split);
    if (seq < s.next && seq + span > s.next)
      return false;
    if (split_end)
      s.end = seq + span;
    if (seq < s.next)
      return true; // before the split's start (a resumed read's consumed prefix)
    if (Entry* e = s.pending.insert(seq)) {
      e->value.emplace(std::move(element));
      e->bytes = bytes_ ? bytes_(*e->value) : 0; // (measured once: release() reads it)
      e->span = span > 0 ? span : 1;
      held_ += e->span;
      held_bytes_ += e->bytes;
    }
    return true;
  }
  // The split's producer says it had `count` elements in all (0: filtered empty).
  void split_done(const Key& split, int64_t count) {
    if (!(split < next_))
      state(split).end = count;
  }
  // The epoch had `num_splits` splits (its provider's end).
  void epoch_done(int64_t epoch, int64_t num_splits) { epoch_splits_[epoch] = num_splits; }

  // The next element in order, if it arrived.
  std::optional<T> pop() {
    SplitState* s = settle();
    if (!s || !s->pending.next_at(s->next))
      return std::nullopt;
    release(s->pending.front());
    s->next += s->pending.front().span;
    std::optional<T> out = std::move(s->pending.front().value);
    s->pending.pop_front();
    return out;
  }
  // The read ended (every split was produced and delivered): what is held goes out in order,
  // whatever the order still waited for.
  template <typename Out>
  void drain(Out&& out) {
    for (auto& [key, s] : splits_)
      for (std::size_t i = 0; i < s.pending.size(); ++i)
        out(std::move(*s.pending[i].value));
    splits_.clear();
    forget_cached();
    held_ = 0;
    held_bytes_ = 0;
  }

  // Elements held, waiting for an earlier one, and their bytes (0 without `bytes`).
  int64_t held() const { return held_; }
  int64_t held_bytes() const { return held_bytes_; }

private:
  // A held entry: the element (or run) starting at `seq`, how many positions it covers and its
  // bytes (measured once).
  struct Entry {
    int64_t seq = 0;
    int64_t span = 1;
    int64_t bytes = 0;
    std::optional<T> value;
  };
  // A split's held entries in seq order, as a queue over a vector: a split's elements mostly
  // arrive in order (appended), and a vector reused from split to split (spare_) allocates
  // nothing per entry (a deque allocated and freed a block every few held elements). Entries
  // only: a run of many elements is one entry, with no place per element.
  struct Pending {
    std::vector<Entry> entries;
    std::size_t head = 0;
    bool empty() const { return head == entries.size(); }
    std::size_t size() const { return entries.size() - head; }
    Entry& front() { return entries[head]; }
    Entry& back() { return entries.back(); }
    Entry& operator[](std::size_t i) { return entries[head + i]; }
    // Whether the front entry starts at `seq` (the order's next).
    bool next_at(int64_t seq) const { return !empty() && entries[head].seq == seq; }
    // A new entry at `seq` in order, or null when one starts there already.
    Entry* insert(int64_t seq) {
      if (empty() || entries.back().seq < seq) {
        entries.push_back(Entry{seq, 1, 0, std::nullopt});
        return &entries.back();
      }
      auto at = std::lower_bound(entries.begin() + static_cast<std::ptrdiff_t>(head), entries.end(),
                                 seq, [](const Entry& e, int64_t s) { return e.seq < s; });
      if (at != entries.end() && at->seq == seq)
        return nullptr;
      return &*entries.insert(at, Entry{seq, 1, 0, std::nullopt});
    }
    void pop_front() {
      entries[head].value.reset();
      if (++head == entries.size()) {
        entries.clear(); // (keeps its capacity)
        head = 0;
      } else if (head >= 1024 && 2 * head >= entries.size()) { // a split read far ahead of its head
        entries.erase(entries.begin(), entries.begin() + static_cast<std::ptrdiff_t>(head));
        head = 0;
      }
    }
  };
  struct SplitState {
    int64_t next = 0; // the next seq in order
    int64_t end = -1; // elements in the split; -1 = not known yet
    Pending pending;
  };
  // An element leaves the hold (handed out, or skipped by a resumed read).
  void release(const Entry& e) {
    held_ -= e.span;
    held_bytes_ -= e.bytes;
  }

  // The state of a split, made if it has none. Elements come in runs of one split and the order
  // asks for its next split's at every element: both are remembered, so that most calls look
  // nothing up in the map.
  SplitState& state(const Key& split) {
    if (last_ && split == last_key_)
      return *last_;
    if (split == next_ && next_state_known_ && next_state_)
      return *next_state_;
    auto [it, made] = splits_.try_emplace(split);
    if (made && !spare_.empty()) { // a finished split's buffer, emptied
      it->second.pending.entries = std::move(spare_.back());
      spare_.pop_back();
    }
    if (split == next_) {
      next_state_ = &it->second;
      next_state_known_ = true;
    }
    last_key_ = split;
    last_ = &it->second;
    return it->second;
  }
  // The state of next_, or null when it has none.
  SplitState* find_next() {
    if (!next_state_known_) {
      auto it = splits_.find(next_);
      next_state_ = it == splits_.end() ? nullptr : &it->second;
      next_state_known_ = true;
    }
    return next_state_;
  }
  void forget_cached() {
    next_state_known_ = false;
    next_state_ = nullptr;
    last_ = nullptr;
  }
  // next_'s state goes (the split is over or consumed); its buffer is kept for a later split.
  void erase_next() {
    auto it = splits_.find(next_);
    if (it == splits_.end())
      return;
    auto& entries = it->second.pending.entries;
    if (spare_.size() < 4 && entries.capacity() > 0) {
      entries.clear();
      spare_.push_back(std::move(entries));
    }
    splits_.erase(it);
    forget_cached();
  }

  // Moves the order past the splits that are over (and those a resumed read consumed whole);
  // returns the state of the split it then stands on (null when it has none yet).
  SplitState* settle() {
    for (;;) {
      SplitState* s = find_next();
      if (complete_ && complete_(next_)) { // a resumed read consumed all of it
        if (s)
          for (std::size_t i = 0; i < s->pending.size(); ++i)
            release(s->pending[i]);
        erase_next();
        advance();
        continue;
      }
      if (s) {
        skip_covered(next_, *s);
        if (s->pending.next_at(s->next))
          return s;
        if (s->end < 0 || s->next < s->end)
          return s;   // its next element has not come yet
        erase_next(); // over: on to the next split
      } else if (!over_without_state()) {
        return nullptr;
      }
      advance();
    }
  }

  // Steps the split's order over the elements a resumed read's cursor covers.
  void skip_covered(const Key& split, SplitState& s) {
    if (!covers_ || (complete_ && complete_(split))) // (a complete split covers every seq)
      return;
    while ((s.end < 0 || s.next < s.end) && !s.pending.next_at(s.next) && covers_(split, s.next))
      ++s.next;
  }

  // The next split has no state: nothing arrived for it and it is not known to be over, unless
  // it is past its epoch's end.
  bool over_without_state() const {
    auto n = epoch_splits_.find(next_.first);
    return n != epoch_splits_.end() && next_.second >= n->second;
  }

  void advance() {
    next_state_known_ = false;
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
  // state()'s memory (pointers into splits_: a map's nodes stay where they are until erased).
  SplitState* next_state_ = nullptr;
  bool next_state_known_ = false;
  Key last_key_{-1, -1};
  SplitState* last_ = nullptr;
  std::vector<std::vector<Entry>> spare_; // emptied buffers of finished splits
};

} // namespace conveyor
