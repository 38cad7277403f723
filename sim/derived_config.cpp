#include "sim/derived_config.hpp"

#include <cctype>
#include <set>

#include "sim/planted_bugs.hpp"
#include "sim/rng.hpp"

namespace conveyor::sim {

namespace {

using std::chrono::microseconds;
using std::chrono::milliseconds;

constexpr const char* kDispatcher = "dispatcher";

template <class T>
T pick(Rng& rng, std::initializer_list<T> choices) {
  auto i = rng.below(choices.size());
  return *(choices.begin() + static_cast<std::ptrdiff_t>(i));
}

Fault random_fault(Rng& rng, const std::string& kind_in, int workers, int consumers) {
  std::string kind = kind_in;
  if (kind == "any")
    kind =
      pick<std::string>(rng, {"crash", "restart", "partition", "disconnect", "slow", "dispatcher"});
  auto worker = [&] {
    return "worker-" + std::to_string(rng.below(static_cast<uint64_t>(workers)));
  };
  auto consumer = [&] {
    return "consumer-" + std::to_string(rng.below(static_cast<uint64_t>(consumers)));
  };
  // A link of the cluster: worker-dispatcher, worker-consumer or consumer-dispatcher.
  auto link = [&](Fault& f) {
    switch (rng.below(3)) {
      case 0:
        f.node = worker();
        f.peer = kDispatcher;
        break;
      case 1:
        f.node = worker();
        f.peer = consumer();
        break;
      default:
        f.node = consumer();
        f.peer = kDispatcher;
        break;
    }
  };
  Fault f;
  double progress = 0.02 + 0.88 * rng.unit();
  if (kind == "crash") {
    f = Fault::crash(worker(), microseconds{0});
  } else if (kind == "restart") {
    f = Fault::restart(worker(), microseconds{0}, milliseconds{rng.between(50, 3000)});
  } else if (kind == "drain") { // a graceful stop, then a new process
    f = Fault::drain(worker(), microseconds{0}, milliseconds{rng.between(50, 3000)});
  } else if (kind == "dispatcher") { // crash, restart from the simulated disk
    f = Fault::restart(kDispatcher, microseconds{0}, milliseconds{rng.between(50, 3000)});
  } else if (kind == "trainer") { // killed, restarted from its checkpoint (resume_from)
    f = Fault::restart(consumer(), microseconds{0}, milliseconds{rng.between(10, 2000)});
  } else if (kind == "partition") {
    f = Fault::partition("", "", microseconds{0}, milliseconds{rng.between(10, 10000)});
    link(f);
  } else if (kind == "disconnect") {
    f = Fault::disconnect("", "", microseconds{0});
    link(f);
  } else {
    f = Fault::slow("", "", microseconds{0}, milliseconds{rng.between(10, 2000)});
    link(f);
  }
  return f.at_fraction(static_cast<double>(static_cast<int>(progress * 1000)) / 1000.0);
}

} // namespace

std::string DerivedConfig::describe() const {
  return "latency " + std::to_string(latency.count()) + "us, jitter " +
         std::to_string(jitter.count()) + "us, credits " + std::to_string(credits) +
         ", split size " + std::to_string(split_size) + ", task buffer " +
         std::to_string(task_limits.buffer_elements) + ", produce step " +
         std::to_string(task_limits.step_elements) + ", consumer step up to " +
         std::to_string(consumer_step.count()) + "us" +
         (task_limits.bulk_min_bytes <= 1 ? ", every element on the bulk path" : "") + ", fsync " +
         std::to_string(fsync_latency.count()) + "us" +
         (compact_after > 0 ? ", snapshot every " + std::to_string(compact_after) + " records"
                            : "") +
         (cache_evicts() ? ", cross-trainer cache " +
                             std::to_string(task_limits.cross_trainer_cache_bytes) + " bytes"
                         : "");
}

DerivedConfig derive_config(const SimConfig& cfg, const FaultSpec& spec) {
  Rng rng{cfg.seed ^ 0x5eed5eed5eed5eedull};
  DerivedConfig d;
  d.latency = cfg.latency.value_or(microseconds{rng.between(20, 2000)});
  d.jitter = cfg.jitter.value_or(microseconds{rng.between(0, d.latency.count())});
  if (cfg.options.max_outstanding_requests)
    d.credits = *cfg.options.max_outstanding_requests;
  else if (cfg.draw_credits)
    d.credits = pick<int64_t>(rng, {1, 2, 4, 16, 64, 256, 4096});
  d.split_size = pick<int64_t>(rng, {2, 8, 64});
  d.task_limits.buffer_elements = pick<int64_t>(rng, {4, 64, 65536});
  if (cfg.task_buffer_elements) // (drawn all the same: the other draws stay as they were)
    d.task_limits.buffer_elements = *cfg.task_buffer_elements;
  d.task_limits.step_elements = pick<int64_t>(rng, {1, 16, 1024});
  // A third of the runs send every element on the bulk path (frames over the simulated
  // network); derived without a draw, so that every seed keeps its other choices.
  d.task_limits.bulk_min_bytes = d.task_limits.step_elements == 16 ? 1 : std::size_t{64} << 10;
  d.consumer_step = cfg.consumer_step.value_or(
    pick<microseconds>(rng, {microseconds{0}, microseconds{200}, microseconds{2000}}));
  const bool whole_epoch =
    cfg.options.cross_trainer_cache && cfg.options.cross_trainer_cache->finite_epoch;
  for (int i = 0; i < cfg.consumers; ++i) {
    const auto start = microseconds{rng.between(0, 20000)}; // (drawn either way: same seeds)
    // Whole-epoch sharing: the trainers start together (a trainer joining after the cache first
    // evicted is refused, by design; README).
    d.consumer_start.push_back(whole_epoch ? microseconds{0} : start + i * cfg.consumer_stagger);
  }
  if (cfg.options.cross_trainer_cache) { // its own stream: the other choices stay per seed
    Rng cache_rng{cfg.seed ^ 0xcac4ecac4ecac4eull};
    const int64_t never_evicts = d.task_limits.cross_trainer_cache_bytes; // the default
    // (8-byte elements.) Whole-epoch sharing: at least a few times the credits, so every trainer's
    // first request comes before the first eviction; the window then paces the trainers.
    const int64_t small = whole_epoch ? (2 * d.credits + 16) * 8 : 8 * 8;
    const int64_t medium = whole_epoch ? (8 * d.credits + 64) * 8 : 32 * 8;
    d.task_limits.cross_trainer_cache_bytes =
      pick<int64_t>(cache_rng, {small, medium, never_evicts});
  }
  Rng fault_rng = rng.fork(7);
  Rng disk_rng = rng.fork(11);
  d.fsync_latency =
    pick<microseconds>(disk_rng, {microseconds{50}, microseconds{500}, microseconds{4000}});
  d.compact_after = pick<int64_t>(disk_rng, {0, 8, 64});
  d.faults = cfg.faults;
  for (const auto& f : spec.explicit_faults)
    d.faults.push_back(f);
  // Drawn crashes leave at least one worker: a job whose workers all died for good waits for
  // new ones (as in the reference), which a liveness check cannot tell from a hang.
  std::set<std::string> crashed;
  for (const auto& r : spec.random_faults) {
    for (int i = 0; i < r.count; ++i) {
      auto f = random_fault(fault_rng, r.kind, cfg.workers, cfg.consumers);
      if (f.kind == Fault::Kind::crash && !crashed.count(f.node)) {
        if (static_cast<int>(crashed.size()) + 1 >= cfg.workers)
          f = Fault::restart(f.node, f.at, milliseconds{100}).at_fraction(*f.at_progress);
        else
          crashed.insert(f.node);
      }
      d.faults.push_back(std::move(f));
    }
  }
  return d;
}

namespace {

// A consumer restart is a trainer resumed from its checkpoint (DistributeOptions::resume_from),
// which a read allows only when it is DYNAMIC and its job private.
constexpr const char* kNotResumable =
  "a consumer restarts from its read cursor, which needs a DYNAMIC read of a private job (one "
  "consumer, no job_name, no coordinated or cross-trainer cache read); otherwise consumers can "
  "crash but not restart";

bool resumable_read(const SimConfig& c) {
  return c.options.policy == ShardingPolicy::dynamic && c.consumers == 1 && !c.options.job_name &&
         !c.options.num_consumers && !c.options.cross_trainer_cache && c.take <= 0;
}

// The autoscaling scenario's knobs (SimConfig::worker_rate ... register_max).
Status validate_autoscale(const SimConfig& config) {
  if (config.worker_rate && !(*config.worker_rate > 0))
    return invalid_argument("`worker_rate` must be positive (elements per virtual second), got " +
                            std::to_string(*config.worker_rate));
  if (config.task_buffer_elements && *config.task_buffer_elements < 1)
    return invalid_argument("`task_buffer_elements` must be at least 1, got " +
                            std::to_string(*config.task_buffer_elements));
  if (!(config.worker_rate_noise >= 0 && config.worker_rate_noise < 1))
    return invalid_argument("`worker_rate_noise` must be in [0, 1), got " +
                            std::to_string(config.worker_rate_noise));
  if (config.trainer_rate && !(*config.trainer_rate > 0))
    return invalid_argument("`trainer_rate` must be positive (elements per virtual second), got " +
                            std::to_string(*config.trainer_rate));
  if (!(config.trainer_slow_rate >= 0) || config.trainer_slow_at.count() < 0)
    return invalid_argument("`trainer_slow_rate` and `trainer_slow_at` must not be negative");
  if (!config.autoscale)
    return Status::OK();
  CONVEYOR_RETURN_IF_ERROR(actors::validate(*config.autoscale));
  if (config.autoscale_interval.count() <= 0)
    return invalid_argument("`autoscale_interval` must be positive, got " +
                            std::to_string(config.autoscale_interval.count()) + " ms");
  if (config.register_min.count() < 0 || config.register_max < config.register_min)
    return invalid_argument("`register_min` .. `register_max` must be a range of non-negative "
                            "delays, got " +
                            std::to_string(config.register_min.count()) + " .. " +
                            std::to_string(config.register_max.count()) + " ms");
  return Status::OK();
}

} // namespace

Status validate_config(const SimConfig& config, const FaultSpec& spec) {
  if (config.workers < 1 || config.workers > 10000)
    return invalid_argument("`workers` must be 1..10000, got " + std::to_string(config.workers));
  if (config.consumers < 1 || config.consumers > 1000)
    return invalid_argument("`consumers` must be 1..1000, got " + std::to_string(config.consumers));
  if (config.options.policy != ShardingPolicy::off &&
      config.options.policy != ShardingPolicy::dynamic)
    return invalid_argument(std::string{"the simulator runs OFF and DYNAMIC jobs, got "} +
                            to_string(config.options.policy));
  CONVEYOR_RETURN_IF_ERROR(validate(config.options));
  if (!planted_bug_from_string(config.plant_bug.empty() ? "none" : config.plant_bug))
    return invalid_argument(
      "unknown planted bug \"" + config.plant_bug +
      "\" (expected duplicate-split, forget-lost-split, forget-held-split, skip-round, "
      "credit-off-by-one or checkpoint-early)");
  if (config.options.num_consumers) {
    if (*config.options.num_consumers != config.consumers)
      return invalid_argument("coordinated reads in the simulator: `num_consumers` (" +
                              std::to_string(*config.options.num_consumers) +
                              ") must equal `consumers` (" + std::to_string(config.consumers) +
                              ")");
    if (config.take <= 0)
      return invalid_argument(
        "coordinated reads in the simulator need `take` (rounds per consumer) "
        "> 0: the dataset is infinite");
  } else if (config.options.cross_trainer_cache &&
             config.options.cross_trainer_cache->finite_epoch) {
    if (config.take != -1)
      return invalid_argument("whole-epoch cross-trainer cache reads in the simulator read the "
                              "finite epoch to its end: no `take`");
  } else if (config.options.cross_trainer_cache) {
    if (config.take <= 0)
      return invalid_argument("cross-trainer cache reads in the simulator need `take` (elements "
                              "per consumer) > 0: the dataset is infinite");
  } else if (config.take != -1 &&
             (config.options.policy != ShardingPolicy::off || config.options.job_name ||
              config.consumers != 1 || config.take <= 0)) {
    return invalid_argument("`take` is for coordinated reads (`num_consumers`), cross-trainer "
                            "cache reads and endless OFF reads (one consumer, a private job, "
                            "take > 0) only");
  }
  const bool endless_off =
    config.take > 0 && !config.options.num_consumers && !config.options.cross_trainer_cache;
  if (endless_off != (config.endless_period > 0))
    return invalid_argument("an endless OFF read (`take` without coordination or cache) needs "
                            "`endless_period` > 0 (the N of range(N).repeat()), and only it; "
                            "got endless_period " +
                            std::to_string(config.endless_period));
  if (config.consumer_stagger.count() < 0)
    return invalid_argument("`consumer_stagger` must not be negative, got " +
                            std::to_string(config.consumer_stagger.count()) + " ms");
  if (config.consumer_stagger.count() > 0 && config.consumers < 2)
    return invalid_argument("`consumer_stagger` staggers the consumers of a shared job: it needs "
                            "consumers >= 2, got " +
                            std::to_string(config.consumers));
  if (config.late_workers < 0 || config.late_workers >= config.workers)
    return invalid_argument("`late_workers` must be in [0, workers), got " +
                            std::to_string(config.late_workers));
  if (config.time_limit.count() <= 0)
    return invalid_argument("`time_limit` must be positive");
  CONVEYOR_RETURN_IF_ERROR(validate_autoscale(config));
  auto known = [&](const std::string& name) {
    if (name == kDispatcher)
      return true;
    auto numbered = [&](const char* prefix, int count) {
      auto p = std::string{prefix};
      if (name.rfind(p, 0) != 0 || name.size() == p.size())
        return false;
      for (std::size_t i = p.size(); i < name.size(); ++i)
        if (!std::isdigit(static_cast<unsigned char>(name[i])))
          return false;
      return std::stol(name.substr(p.size())) < count;
    };
    return numbered("worker-", config.workers) || numbered("consumer-", config.consumers);
  };
  for (const auto& r : spec.random_faults)
    if (r.kind == "trainer" && !resumable_read(config))
      return invalid_argument("faults `trainer:" + std::to_string(r.count) + "`: " + kNotResumable);
  std::vector<Fault> all = config.faults;
  all.insert(all.end(), spec.explicit_faults.begin(), spec.explicit_faults.end());
  for (const auto& f : all) {
    for (const auto* n : {&f.node, &f.peer}) {
      if (n->empty() && n == &f.peer)
        continue;
      if (!known(*n))
        return invalid_argument("fault `" + f.to_string() + "`: no node \"" + *n +
                                "\" (nodes are dispatcher, worker-0..worker-" +
                                std::to_string(config.workers - 1) + ", consumer-0..consumer-" +
                                std::to_string(config.consumers - 1) + ")");
    }
    if (f.kind == Fault::Kind::restart && f.node.rfind("consumer-", 0) == 0 &&
        !resumable_read(config))
      return invalid_argument("fault `" + f.to_string() + "`: " + kNotResumable);
    if (f.kind == Fault::Kind::drain && f.node.rfind("worker-", 0) != 0)
      return invalid_argument("fault `" + f.to_string() + "`: only workers drain");
    if ((f.kind == Fault::Kind::partition || f.kind == Fault::Kind::disconnect ||
         f.kind == Fault::Kind::slow) &&
        f.node == f.peer)
      return invalid_argument("fault `" + f.to_string() + "`: a link needs two different nodes");
  }
  return Status::OK();
}

} // namespace conveyor::sim
