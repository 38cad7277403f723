// SplitReorder (deterministic=True's order): elements of splits arriving in any order come out
// in provider order, split ends known from a marked last element or a count (empty splits too),
// epochs by their split counts, resumed reads from their cursor's position, and the window.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "pipeline/sharding/split_reorder.hpp"

using conveyor::SplitReorder;

namespace {

using Reorder = SplitReorder<int64_t>;

std::vector<int64_t> pop_all(Reorder& r) {
  std::vector<int64_t> out;
  for (int i = 0; i < 100000; ++i) { // bounded
    auto e = r.pop();
    if (!e)
      return out;
    out.push_back(*e);
  }
  FAIL("pop() never ran dry");
  return out;
}

} // namespace

TEST_CASE("split reorder: a later split waits for the one before it, marked ends move on") {
  Reorder r(4);
  r.add({0, 1}, 0, 10, false);
  r.add({0, 1}, 1, 11, true);
  CHECK(pop_all(r).empty()); // split 0 has not come
  CHECK(r.held() == 2);
  r.add({0, 0}, 1, 1, true);
  CHECK(pop_all(r).empty()); // its element 0 has not come
  r.add({0, 0}, 0, 0, false);
  CHECK(pop_all(r) == std::vector<int64_t>{0, 1, 10, 11});
  CHECK(r.held() == 0);
  CHECK(r.next_split() == Reorder::Key{0, 2});
}

TEST_CASE("split reorder: an unmarked end waits for split_done, a filtered-empty split too") {
  Reorder r(4);
  r.add({0, 0}, 0, 0, false);
  r.add({0, 2}, 0, 20, false);
  CHECK(pop_all(r) == std::vector<int64_t>{0});
  r.split_done({0, 0}, 1);
  CHECK(pop_all(r).empty()); // split 1: nothing known
  r.split_done({0, 1}, 0);   // filter left it empty
  CHECK(pop_all(r) == std::vector<int64_t>{20});
}

TEST_CASE("split reorder: epochs end at their split count, then the next epoch's split 0") {
  Reorder r(4);
  r.add({1, 0}, 0, 100, true);
  r.add({0, 0}, 0, 0, true);
  CHECK(pop_all(r) == std::vector<int64_t>{0});
  r.add({0, 1}, 0, 1, true);
  CHECK(pop_all(r) == std::vector<int64_t>{1}); // epoch 0's size not known: waits at (0, 2)
  r.epoch_done(0, 2);
  CHECK(pop_all(r) == std::vector<int64_t>{100});
  // An epoch with no split (repeat of an empty source) is passed too.
  r.epoch_done(1, 1);
  r.epoch_done(2, 0);
  r.add({3, 0}, 0, 300, true);
  CHECK(pop_all(r) == std::vector<int64_t>{300});
}

TEST_CASE("split reorder: a resumed read starts after the cursor's prefix and complete splits") {
  Reorder r(4);
  r.skip_split({0, 0});
  r.start_split_at({0, 1}, 2);
  r.add({0, 1}, 1, -1, false); // a consumed element again: dropped, not held
  CHECK(r.held() == 0);
  r.add({0, 1}, 2, 12, true);
  CHECK(pop_all(r) == std::vector<int64_t>{12});
  r.add({0, 0}, 0, -1, false); // a repeat of a split already passed is not held either
  CHECK(r.held() == 0);
}

TEST_CASE("split reorder: the window says which splits are too far ahead") {
  Reorder r(2);
  CHECK_FALSE(r.beyond_window({0, 2}));
  CHECK(r.beyond_window({0, 3}));
  CHECK(r.beyond_window({1, 0})); // epoch 0's size is not known yet
  r.epoch_done(0, 2);
  CHECK_FALSE(r.beyond_window({1, 0})); // 2 splits past (0, 0)
  CHECK(r.beyond_window({1, 1}));
  CHECK(r.beyond_window({2, 0}));
  r.add({0, 0}, 0, 0, true);
  CHECK(pop_all(r) == std::vector<int64_t>{0});
  CHECK_FALSE(r.beyond_window({1, 1}));
}

TEST_CASE("split reorder: 4 producers at random speeds, repeats and empty splits - one order") {
  const uint32_t seed = std::random_device{}();
  INFO("seed " << seed);
  std::mt19937 rng{seed};
  // 40 splits of 0..5 elements; element value = split * 100 + seq.
  std::vector<int64_t> sizes(40);
  std::vector<int64_t> expected;
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    sizes[i] = std::uniform_int_distribution<int64_t>{0, 5}(rng);
    for (int64_t k = 0; k < sizes[i]; ++k)
      expected.push_back(static_cast<int64_t>(i) * 100 + k);
  }
  // Arrivals: every element once, some split ends marked, the others told by split_done.
  struct Arrival {
    int64_t split, seq;
    bool end_marker;
  };
  std::vector<Arrival> arrivals;
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    const bool marked = sizes[i] > 0 && rng() % 2 == 0;
    for (int64_t k = 0; k < sizes[i]; ++k)
      arrivals.push_back({static_cast<int64_t>(i), k, false});
    if (!marked)
      arrivals.push_back({static_cast<int64_t>(i), -1, true});
    else
      arrivals[arrivals.size() - 1].end_marker = true;
  }
  std::shuffle(arrivals.begin(), arrivals.end(), rng);
  Reorder r(static_cast<int64_t>(sizes.size()));
  std::vector<int64_t> got;
  for (const auto& a : arrivals) {
    const std::size_t split = static_cast<std::size_t>(a.split);
    if (a.seq < 0)
      r.split_done({0, a.split}, sizes[split]);
    else
      r.add({0, a.split}, a.seq, a.split * 100 + a.seq, a.end_marker);
    auto more = pop_all(r);
    got.insert(got.end(), more.begin(), more.end());
  }
  r.epoch_done(0, static_cast<int64_t>(sizes.size()));
  auto rest = pop_all(r);
  got.insert(got.end(), rest.begin(), rest.end());
  CHECK(r.held() == 0);
  CHECK(got == expected);
}

TEST_CASE("split reorder: at the read's end what is held goes out in order") {
  Reorder r(4);
  r.add({0, 2}, 1, 21, true);
  r.add({0, 1}, 0, 10, false);
  r.add({0, 2}, 0, 20, false);
  CHECK(pop_all(r).empty()); // split 0 never came (the read ended without it)
  std::vector<int64_t> out;
  r.drain([&](int64_t e) { out.push_back(e); });
  CHECK(out == std::vector<int64_t>{10, 20, 21});
  CHECK(r.held() == 0);
}

TEST_CASE("split reorder: a cursor's complete splits and covered elements are stepped over") {
  Reorder r(4);
  // Consumed before: all of split 0, and of split 1 elements 0, 1 and 3 (a gap at 2).
  r.resume_from(
    [](const Reorder::Key& s) {
      return s == Reorder::Key{0, 0};
    },
    [](const Reorder::Key& s, int64_t seq) {
      return s == Reorder::Key{0, 0} || (s == Reorder::Key{0, 1} && (seq <= 1 || seq == 3));
    });
  r.add({0, 1}, 4, 14, true);
  CHECK(pop_all(r).empty()); // element 2 has not come
  r.add({0, 1}, 2, 12, false);
  CHECK(pop_all(r) == std::vector<int64_t>{12, 14});
  CHECK(r.next_split() == Reorder::Key{0, 2});
}

TEST_CASE("split reorder: the next element in order is taken without being held") {
  Reorder r(4);
  CHECK(r.take_if_next({0, 0}, 0, false));
  CHECK_FALSE(r.take_if_next({0, 0}, 2, false)); // 1 comes first
  CHECK_FALSE(r.take_if_next({0, 1}, 0, false)); // split 0 is not over
  r.add({0, 1}, 0, 10, true);
  CHECK(r.take_if_next({0, 0}, 1, true)); // its last: the order moves on to split 1
  CHECK(pop_all(r) == std::vector<int64_t>{10});
  CHECK(r.held() == 0);
}

TEST_CASE("split reorder: all_arrived ends a split after what came - an empty one at once") {
  Reorder r(4);
  r.add({0, 0}, 0, 0, false);
  r.add({0, 0}, 1, 1, false);
  r.add({0, 2}, 0, 20, false);
  CHECK(pop_all(r) == std::vector<int64_t>{0, 1});
  r.all_arrived({0, 0});
  r.all_arrived({0, 1}); // nothing came: filter emptied it
  CHECK(pop_all(r) == std::vector<int64_t>{20});
  r.all_arrived({0, 0}); // told again: already passed
  r.add({0, 2}, 1, 21, false);
  r.all_arrived({0, 2});
  r.all_arrived({0, 2}); // told twice: the end stays
  CHECK(pop_all(r) == std::vector<int64_t>{21});
  CHECK(r.next_split() == Reorder::Key{0, 3});
}

TEST_CASE("split reorder: an entry may span several elements of its split (a held run)") {
  Reorder r(4);
  r.add({0, 1}, 0, 10, false, 3); // split 1's elements 0..2 as one entry
  r.add({0, 1}, 3, 13, true);     // and its last
  CHECK(r.held() == 4);
  CHECK(pop_all(r).empty());
  CHECK(r.take_if_next({0, 0}, 0, true, 2)); // split 0's two elements go straight out
  CHECK(pop_all(r) == std::vector<int64_t>{10, 13});
  CHECK(r.held() == 0);
  // A run next in order behind one that spans: split 2's 0..1 held after its 2..3 arrived.
  r.add({0, 2}, 2, 22, false, 2);
  CHECK(r.take_if_next({0, 2}, 0, false, 2));
  CHECK(pop_all(r) == std::vector<int64_t>{22});
  r.split_done({0, 2}, 4);
  r.add({0, 3}, 0, 30, false, 5);
  CHECK(pop_all(r) == std::vector<int64_t>{30});
  r.all_arrived({0, 3}); // its end is after the entry's last element
  r.add({0, 4}, 0, 40, true);
  CHECK(pop_all(r) == std::vector<int64_t>{40});
  CHECK(r.next_split() == Reorder::Key{0, 5}); // (split 4 ended with its marked element)
}

TEST_CASE("split reorder: an entry that starts before the order's place and reaches past it is "
          "refused, not dropped with its unreleased rest") {
  Reorder r(4);
  CHECK(r.take_if_next({0, 0}, 0, false, 2));  // split 0's elements 0..1 went out
  CHECK_FALSE(r.add({0, 0}, 1, 99, false, 3)); // 1..3: element 1 went out, 2..3 did not
  CHECK(r.held() == 0);
  CHECK(r.add({0, 0}, 0, 98, false, 2)); // wholly before the place: a repeat, dropped
  CHECK(r.held() == 0);
  CHECK(r.add({0, 0}, 2, 12, true, 2)); // the rest, on its own
  CHECK(pop_all(r) == std::vector<int64_t>{12});
}
