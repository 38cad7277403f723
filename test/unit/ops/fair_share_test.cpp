// Weighted fair shares across tenants (pipeline/runtime/fair_share.hpp), driven by a fake clock:
// a small discrete-event model of an executor whose threads always find work (saturated), so the
// shares are exact functions of the scheduling rule, not of the machine's load.
#include <doctest/doctest.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "pipeline/runtime/fair_share.hpp"

using namespace conveyor;

namespace {

constexpr int64_t kMs = 1'000'000;

struct Group {
  Group(std::shared_ptr<ShareTenant> t, int64_t item) : tenant(std::move(t)), item_ns(item) {}
  std::shared_ptr<ShareTenant> tenant;
  int64_t item_ns; // every item of this group holds a thread this long
  ThreadTime time;
  bool ready = true; // has work (always, unless the test idles it)
};

// Runs `threads` threads from `from` to `until` (ns): each free thread takes the group FairShare
// picks among the ready ones and holds it for one item. Returns the time the threads were busy.
struct Model {
  explicit Model(std::vector<Group*> gs) : groups(std::move(gs)) {}
  FairShare shares{5 * kMs};
  std::vector<Group*> groups;
  int64_t now = 0;

  void start() {
    for (auto* g : groups)
      shares.on_ready(g->time, *g->tenant, now);
  }
  void run(int threads, int64_t until) {
    struct Running {
      Group* group = nullptr;
      int64_t started = 0;
      int64_t free_at = 0;
    };
    std::vector<Running> pool(static_cast<std::size_t>(threads), Running{nullptr, now, now});
    for (int steps = 0; steps < 10'000'000; ++steps) { // bounded
      auto* next = &pool[0];
      for (auto& r : pool)
        if (r.free_at < next->free_at)
          next = &r;
      now = next->free_at;
      if (next->group) {
        next->group->time.finish(next->started, now);
        next->group->tenant->finish(next->started, now);
        next->group = nullptr;
      }
      if (now >= until)
        break;
      std::vector<Group*> ready;
      for (auto* g : groups)
        if (g->ready)
          ready.push_back(g);
      REQUIRE(!ready.empty());
      auto i = shares.pick(
        ready, now, [](Group* g) -> const ThreadTime& { return g->time; },
        [](Group* g) -> ShareTenant& { return *g->tenant; });
      Group* g = ready[i];
      g->time.start(now);
      g->tenant->start(now);
      *next = Running{g, now, now + g->item_ns};
    }
    for (auto& r : pool) // (items still running at `until` are charged up to it)
      if (r.group) {
        r.group->time.finish(r.started, until);
        r.group->tenant->finish(r.started, until);
      }
    now = until;
  }
};

double share(const ShareTenant& t, const std::vector<const ShareTenant*>& all) {
  int64_t total = 0;
  for (const auto* x : all)
    total += x->time.used;
  return static_cast<double>(t.time.used) / static_cast<double>(total);
}

} // namespace

TEST_CASE("fair share: two tenants weighted 3:1 on a saturated executor get 0.75/0.25 of its "
          "thread time, whatever their items' lengths") {
  auto a = std::make_shared<ShareTenant>("a", 3);
  auto b = std::make_shared<ShareTenant>("b", 1);
  // b's items are four times longer: turns would give it the larger share; thread time does not.
  Group ga{a, 1 * kMs};
  Group gb{b, 4 * kMs};
  Model m{{&ga, &gb}};
  m.start();
  m.run(2, 10'000 * kMs);
  CHECK(share(*a, {a.get(), b.get()}) == doctest::Approx(0.75).epsilon(0.05 / 0.75));
  CHECK(share(*b, {a.get(), b.get()}) == doctest::Approx(0.25).epsilon(0.05 / 0.25));
  // (Tighter than the issue's ±0.05: the rule itself is exact up to an item and the lead.)
  CHECK(share(*a, {a.get(), b.get()}) == doctest::Approx(0.75).epsilon(0.01));
}

TEST_CASE("fair share: within a tenant its jobs share equally, across tenants by weight") {
  auto a = std::make_shared<ShareTenant>("a", 1);
  auto b = std::make_shared<ShareTenant>("b", 1);
  // Tenant a runs three jobs, b one: by tenant they get half each, not 3:1 as per job.
  Group a1{a, 1 * kMs}, a2{a, 2 * kMs}, a3{a, 3 * kMs};
  Group b1{b, 2 * kMs};
  Model m{{&a1, &a2, &a3, &b1}};
  m.start();
  m.run(3, 6'000 * kMs);
  CHECK(share(*a, {a.get(), b.get()}) == doctest::Approx(0.5).epsilon(0.02));
  const double a_total = static_cast<double>(a->time.used);
  for (auto* g : {&a1, &a2, &a3})
    CHECK(static_cast<double>(g->time.used) / a_total == doctest::Approx(1.0 / 3).epsilon(0.03));
}

TEST_CASE("fair share: a tenant that had no work comes back at most the lead behind") {
  auto a = std::make_shared<ShareTenant>("a", 1);
  auto b = std::make_shared<ShareTenant>("b", 1);
  Group ga{a, 1 * kMs};
  Group gb{b, 1 * kMs};
  Model m{{&ga, &gb}};
  m.start();
  gb.ready = false;
  m.shares.on_unready(*b);
  m.run(1, 1'000 * kMs); // a alone: a second of thread time
  CHECK(a->time.used == 1'000 * kMs);
  gb.ready = true;
  m.shares.on_ready(gb.time, *b, m.now);
  const int64_t a_before = a->time.used;
  const int64_t b_before = b->time.used;
  m.run(1, 2'000 * kMs);
  // Without the catch-up rule b would hold the thread for the whole next second.
  const double b_share = static_cast<double>(b->time.used - b_before) /
                         static_cast<double>(a->time.used - a_before + b->time.used - b_before);
  CHECK(b_share == doctest::Approx(0.5).epsilon(0.02));
  CHECK(b->time.used - b_before <= 1'000 * kMs); // (its reported time is what it held)
}

TEST_CASE("fair share: a tenant whose weight changes is not held back by its past at the old "
          "weight") {
  auto a = std::make_shared<ShareTenant>("a", 3);
  auto b = std::make_shared<ShareTenant>("b", 1);
  Group ga{a, 1 * kMs};
  Group gb{b, 1 * kMs};
  Model m{{&ga, &gb}};
  m.start();
  m.run(1, 4'000 * kMs); // a: 3 s, b: 1 s of thread time
  a->weight = 1;         // a's next job asks for weight 1
  const int64_t a_before = a->time.used;
  const int64_t b_before = b->time.used;
  m.run(1, 6'000 * kMs);
  // Counting a's 3 s again at weight 1 would hold it back for two seconds.
  const double a_share = static_cast<double>(a->time.used - a_before) /
                         static_cast<double>(a->time.used - a_before + b->time.used - b_before);
  CHECK(a_share == doctest::Approx(0.5).epsilon(0.02));
}
