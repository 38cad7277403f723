#include "sim/planted_bugs.hpp"

namespace conveyor::sim {

const char* to_string(PlantedBug bug) {
  switch (bug) {
    case PlantedBug::none: return "none";
    case PlantedBug::duplicate_split: return "duplicate-split";
    case PlantedBug::forget_lost_split: return "forget-lost-split";
    case PlantedBug::forget_held_split: return "forget-held-split";
    case PlantedBug::skip_round: return "skip-round";
    case PlantedBug::credit_off_by_one: return "credit-off-by-one";
    case PlantedBug::checkpoint_early: return "checkpoint-early";
  }
  return "?";
}

std::optional<PlantedBug> planted_bug_from_string(std::string_view name) {
  for (auto b : {PlantedBug::none, PlantedBug::duplicate_split, PlantedBug::forget_lost_split,
                 PlantedBug::forget_held_split, PlantedBug::skip_round,
                 PlantedBug::credit_off_by_one, PlantedBug::checkpoint_early})
    if (name == to_string(b))
      return b;
  return std::nullopt;
}

namespace {

// What PlantBug installs into the production code (node/hooks.hpp).
class PlantedBugHooks : public actors::hooks::Hooks {
public:
  std::unique_ptr<actors::hooks::SplitAnswerFilter> new_split_answer_filter() override {
    return std::make_unique<DuplicateSplitBug>();
  }
  bool forget_lost_split() override { return planted(PlantedBug::forget_lost_split); }
  bool forget_held_split() override { return planted(PlantedBug::forget_held_split); }
  bool credit_off_by_one() override { return planted(PlantedBug::credit_off_by_one); }
  bool skip_round(int64_t consumer_index, int64_t round) override {
    return planted(PlantedBug::skip_round) && consumer_index == 1 && round == 97;
  }
};

PlantedBugHooks g_planted_bug_hooks;

} // namespace

PlantBug::PlantBug(PlantedBug bug)
  : previous_(detail::planted_bug_switch().exchange(bug)),
    previous_hooks_(
      actors::hooks::install(bug == PlantedBug::none ? nullptr : &g_planted_bug_hooks)) {}

PlantBug::~PlantBug() {
  actors::hooks::install(previous_hooks_);
  detail::planted_bug_switch().store(previous_);
}

} // namespace conveyor::sim
