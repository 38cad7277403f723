#include "dispatcher/autoscale_policy.hpp"

#include <algorithm>
#include <cstdio>

namespace conveyor::actors {

namespace {
std::string pct(double share) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "%.0f%%", 100 * share);
  return buf;
}
} // namespace

Status validate(const AutoscaleConfig& c) {
  if (c.min_workers < 0)
    return invalid_argument("`--min-workers` must be at least 0, got " +
                            std::to_string(c.min_workers));
  if (c.max_workers < std::max<int64_t>(c.min_workers, 1))
    return invalid_argument("`--max-workers` must be at least 1 and at least `--min-workers` (" +
                            std::to_string(c.min_workers) + "), got " +
                            std::to_string(c.max_workers));
  if (!(c.cooldown_s >= 0))
    return invalid_argument("`--scale-cooldown-ms` must be at least 0");
  if (!(c.low_wait >= 0 && c.low_wait < c.high_wait && c.high_wait < 1))
    return invalid_argument("the autoscaler's wait thresholds must satisfy 0 <= low < high < 1");
  if (c.settle_rounds < 1)
    return invalid_argument("the autoscaler's settle rounds must be at least 1");
  return Status::OK();
}

int64_t AutoscalePolicy::clamp(int64_t n) const {
  return std::clamp(n, config_.min_workers, config_.max_workers);
}

AutoscaleDecision AutoscalePolicy::move(double now_s, int64_t to, std::string reason) {
  const bool changed = to != target_;
  target_ = to;
  if (changed)
    last_change_s_ = now_s;
  return {target_, changed, std::move(reason)};
}

AutoscaleDecision AutoscalePolicy::decide(const AutoscaleObservation& o) {
  if (target_ < 0) {
    // Start from what runs (within the bounds): the first change is then a real need.
    target_ = clamp(o.workers);
    last_change_s_ = o.now_s;
    return {target_, target_ != o.workers,
            "starting at " + std::to_string(target_) + " workers (" + std::to_string(o.workers) +
              " registered, bounds " + std::to_string(config_.min_workers) + ".." +
              std::to_string(config_.max_workers) + ")"};
  }
  if (!o.has_readers) {
    low_rounds_ = 0;
    return hold("no job has readers");
  }
  // Counted at every observation (cooldowns included), so a slowdown is seen as soon as the
  // policy may act on it.
  if (floor_ > 0 && o.demand >= 0 && floor_demand_ > 0 && o.demand < 0.8 * floor_demand_)
    ++demand_low_rounds_;
  else
    demand_low_rounds_ = 0;
  const double since = o.now_s - last_change_s_;
  if (since < config_.cooldown_s)
    return hold("cooling down after the last change");
  if (o.workers != target_ && since < 3 * config_.cooldown_s)
    return hold("waiting for the workers: " + std::to_string(o.workers) + " of " +
                std::to_string(target_) + " registered");
  const std::string share = "wait share on workers " + pct(o.wait_share);
  if (o.wait_share > config_.high_wait) {
    low_rounds_ = 0;
    if (came_down_from_ > target_) {
      // The last move down took one worker too many away (at once, or once the noise showed
      // it): back up, and stay at or above that count for a while.
      const int64_t back = target_ + 1;
      block_s_ = floor_ == back && block_s_ > 0 ? std::min(2 * block_s_, 640 * config_.cooldown_s)
                                                : 10 * config_.cooldown_s;
      floor_ = back;
      floor_until_ = o.now_s + block_s_;
      floor_demand_ = o.demand;
      came_down_from_ = 0;
      return move(o.now_s, clamp(back),
                  share + " at " + std::to_string(target_) +
                    " workers after a step down: back to " + std::to_string(clamp(back)));
    }
    const int64_t up = clamp(std::max(target_ + 1, o.estimate));
    if (up == target_)
      return hold(share + ", but already at --max-workers " + std::to_string(target_));
    return move(o.now_s, up,
                share + " > " + pct(config_.high_wait) + " (estimate " +
                  std::to_string(o.estimate) + "): up to " + std::to_string(up));
  }
  if (o.wait_share < config_.low_wait) {
    if (++low_rounds_ < config_.settle_rounds)
      return hold(share + ": settling");
    const int64_t down = target_ - 1;
    if (down < config_.min_workers)
      return hold(share + ", already at --min-workers " + std::to_string(target_));
    if (down < floor_ && o.now_s < floor_until_ && demand_low_rounds_ >= config_.settle_rounds) {
      floor_ = 0; // the trainers slowed: what was too few may do now
      block_s_ = 0;
    }
    if (down < floor_ && o.now_s < floor_until_)
      return hold(share + ", but " + std::to_string(down) + " workers were too few lately");
    low_rounds_ = 0;
    came_down_from_ = target_;
    return move(o.now_s, down,
                share + " < " + pct(config_.low_wait) + ": probing " + std::to_string(down));
  }
  low_rounds_ = 0;
  return hold(share + ": within the band");
}

} // namespace conveyor::actors
