#include "sim/cluster.hpp"

#include <chrono>
#include <deque>
#include <map>
#include <memory>
#include <optional>

#include <caf/event_based_actor.hpp>
#include <caf/send.hpp>

#include "consumer/consumer_actor.hpp"
#include "conveyor/client.hpp"
#include "dispatcher/dispatcher_actor.hpp"
#include "sim/sim_journal.hpp"
#include "consumer/element_sink.hpp"
#include "node/log.hpp"
#include "node/node_config.hpp"
#include "sim/derived_config.hpp"
#include "sim/invariants.hpp"
#include "sim/planted_bugs.hpp"
#include "sim/production_cost.hpp"
#include "sim/scale_actuator.hpp"
#include "sim/sim_transport.hpp"
#include "sim/world.hpp"
#include "worker/worker_actor.hpp"
#include "messages/all.hpp"
#include "pipeline/graph/serialize.hpp"
#include "pipeline/sharding/read_cursor.hpp"

namespace conveyor::sim {

namespace {

using std::chrono::microseconds;
using std::chrono::milliseconds;

constexpr uint16_t kDispatcherPort = 5050;
constexpr uint16_t kWorkerPort = 6000; // + incarnation: a restarted worker is a new stream
constexpr const char* kDispatcher = "dispatcher";

void configure_node(caf::actor_system_config& cfg) {
  // The registration of a real node, minus the middleman (the simulated network replaces it).
  actors::register_conveyor_types(cfg);
}

// Routes the nodes' log lines into the trace while a run lasts.
class LogCapture {
public:
  // The level is fixed (not raised with keep_trace): log lines are part of the trace hash.
  explicit LogCapture(World& world) : previous_(log::level()) {
    log::set_level(log::Level::info);
    log::set_sink([&world](log::Level, std::string_view component, std::string_view message) {
      const Node* n = world.current_node();
      world.trace().record(world.elapsed(), {0x6c6f67 /* log */, Trace::hash_of(message)}, [&] {
        return "[" + (n != nullptr ? n->name() : std::string{"-"}) + "] " + std::string{component} +
               ": " + std::string{message};
      });
    });
  }
  ~LogCapture() {
    log::set_sink(nullptr);
    log::set_level(previous_);
  }

private:
  log::Level previous_;
};

class ClusterRun;

// The trainer behind a consumer: records what arrives and returns the credits after its step.
class RecordingSink : public actors::ElementSink {
public:
  RecordingSink(ClusterRun& run, int index) : run_(run), index_(index) {}
  void job_details(const msg::job_info& info) override { info_ = info; }
  Status push(actors::ReadyElements&& ready, const msg::stream_stats& stats) override;
  void final_stats(const msg::stream_stats& stats) override {
    stream.lost_tasks = stats.lost_tasks;
  }
  void finish(Status status) override;

  // The trainer finished its step on the next `n` elements: they are trained on, and its
  // checkpoint (the read cursor) now covers them.
  void acked_elements(int64_t n);
  // The trainer's process dies and restarts from its last checkpoint: what it received but had
  // not finished is forgotten (the resumed read must bring it again). Returns the checkpoint
  // ("" = none yet: the read starts over), or why this read cannot be resumed.
  Expected<std::string> restart();
  // As ElementStream::checkpoint() allows: DYNAMIC, a private job, a per-split pipeline.
  bool resumable() const {
    return info_.policy == ShardingPolicy::dynamic && info_.job_name.empty() && info_.per_split &&
           info_.split_size > 0;
  }

  msg::stream_actor consumer;
  ObservedStream stream;
  int64_t pushed = 0;
  int64_t acked = 0;
  std::map<std::string, int64_t> per_worker;
  int64_t take = -1;       // coordinated reads: stop after this many elements
  bool cancelled = false;  // ... and it did
  Duration ended_at{0};    // when the stream ended (virtual, from the start)
  uint64_t generation = 0; // the consumer's incarnation: a dead one's acks are dropped

private:
  ClusterRun& run_;
  int index_;
  msg::job_info info_;
  // The cursor covers the next `n` unacked elements.
  void cover(std::size_t n);

  // Trainer restarts (resumable reads only): the cursor of the elements acked so far — the
  // trainer's checkpoint — and the origins of those pushed but not acked yet, in order.
  std::optional<ReadCursor> cursor_;
  std::deque<actors::DeliveredOrigin> unacked_;
};

class ClusterRun {
public:
  ClusterRun(const Dataset& dataset, const SimConfig& cfg, const Reference& ref,
             const FaultSpec& spec)
    : dataset_(dataset), cfg_(cfg), ref_(ref), derived_(derive_config(cfg, spec)),
      world_(world_options(cfg, derived_)) {}

  ~ClusterRun() {
    // The nodes' actors call into the sinks while they die: kill them while all is intact.
    // Then no handle of a node's actor may outlive the node's actor system.
    workers_.clear();
    world_.shut_down();
    for (auto& s : sinks_)
      s->consumer = nullptr;
  }

  SimResult run();

  // --- called by the sinks
  void on_push(int index, int64_t n);
  void on_finish(int index) {
    if (!sinks_[static_cast<std::size_t>(index)]->stream.crashed)
      ++ended_;
  }
  World& world() { return world_; }

private:
  static WorldOptions world_options(const SimConfig& cfg, const DerivedConfig& d) {
    WorldOptions o;
    o.seed = cfg.seed;
    o.keep_trace = cfg.keep_trace;
    o.connection_timeout = cfg.connection_timeout;
    o.link.latency = d.latency;
    o.link.jitter = d.jitter;
    o.link.bytes_per_second = cfg.bytes_per_second;
    o.configure_node = configure_node;
    return o;
  }

  std::size_t slot_of(const std::string& name) const { return slots_.at(name); }
  void start_dispatcher();
  void start_worker(int index);
  void start_consumer(int index);
  void schedule_fault(const Fault& f);
  void fire(const Fault& f);
  // Drains the worker at `slot` as SIGTERM does; `then` runs (between messages) once it drained,
  // if the same process still runs.
  void drain_worker(std::size_t slot, std::function<void()> then);
  // The autoscale actuator's node operations (sim/scale_actuator.hpp).
  ScaleActuator::Nodes actuator_nodes();
  // The trainer at a fixed rate (SimConfig::trainer_rate): when it is done with `n` elements
  // that arrived now, one credit returned per element.
  void pace_trainer(int index, int64_t n);
  // What runs when consumer `index`'s trainer finished its step on `n` elements: they are
  // trained on, and their credits go back (nothing, if the trainer restarted meanwhile).
  std::function<void()> finish_step(int index, int64_t n);
  // The node's process ends (crash, restart, a drained worker); a restart starts a fresh one
  // `f.duration` later.
  void end_process(std::size_t slot, const Fault& f);
  // Late workers start once the consumers received their share (late_at_percent_), or once no
  // other worker is up: without one no element comes, and a job waits for workers (as a
  // cluster's late workers would start on their own).
  void start_late_workers();
  std::vector<std::string> leaks();

  const Dataset& dataset_;
  const SimConfig& cfg_;
  const Reference& ref_;
  DerivedConfig derived_;
  World world_; // declared before every handle-holding member: destroyed after them
  std::map<std::string, std::size_t> slots_;
  std::vector<std::shared_ptr<RecordingSink>> sinks_;
  int ended_ = 0;
  int64_t received_ = 0;
  int64_t expected_ = 0;
  int64_t late_at_percent_ = 0; // late workers start at this progress (0 = started / none)
  std::vector<std::pair<double, Fault>> progress_faults_; // not fired yet
  std::vector<std::string> fired_;
  bool any_fault_ = false;
  std::vector<std::pair<std::size_t, std::size_t>> partitions_; // to heal at the end
  std::shared_ptr<SimJournal> journal_;                         // the dispatcher's disk
  std::map<std::size_t, caf::actor> workers_; // live worker actors by slot (for drain faults)
  std::map<int, std::string> resume_from_;    // restarted trainers' checkpoints, by consumer
  std::unique_ptr<ScaleActuator> actuator_;   // SimConfig::autoscale
  int64_t scale_drained_ = 0;                 // workers the actuator drained, gone
  std::vector<Time> trainer_free_;            // by consumer: when its trainer is free again
};

Status RecordingSink::push(actors::ReadyElements&& ready, const msg::stream_stats& stats) {
  if (cancelled) // coordinated / cache reads: the trainer stopped after `take` elements
    return Status::OK();
  std::vector<Element> elements;
  if (resumable()) { // a cursor names each element's split
    if (!cursor_)
      cursor_.emplace(info_.fingerprint, info_.split_size, info_.file_seed);
    for (;;) {
      Element e;
      bool got = false;
      actors::DeliveredOrigin origin;
      CONVEYOR_RETURN_IF_ERROR(ready.next(e, got, &origin));
      if (!got)
        break;
      elements.push_back(std::move(e));
      unacked_.push_back(origin);
    }
    // A worker's end marks: a split is complete once all its elements were acked.
    for (const auto& end : ready.take_split_ends())
      cursor_->split_ended(end.epoch, end.index, end.count);
    if (planted(PlantedBug::checkpoint_early)) // the cursor covers what merely arrived
      cover(unacked_.size());
  } else {
    CONVEYOR_RETURN_IF_ERROR(ready.take(elements));
  }
  if (elements.empty()) // (only end marks: the trainer has nothing to take)
    return Status::OK();
  // The consumer pushes one task's batch at a time: its worker is the one whose count grew.
  std::string source = "?";
  for (const auto& [worker, count] : stats.per_worker) {
    auto& before = per_worker[worker];
    if (count != before) {
      source = worker;
      before = count;
    }
  }
  // One incarnation per task: a worker that re-registers under the same address gets a new
  // task, whose stream is a new OFF stream (grouping by address would count it as repeats); a
  // restarted dispatcher's job has its tasks re-created under their old ids, each a new actor.
  if (stats.pushed_task != 0)
    source += "/task" + std::to_string(stats.pushed_task);
  if (!stats.pushed_incarnation.empty())
    source += "#" + stats.pushed_incarnation;
  auto n = static_cast<int64_t>(elements.size());
  stream.job = stats.job;
  stream.lost_tasks = stats.lost_tasks;
  for (auto& e : elements) {
    stream.elements.push_back(std::move(e));
    stream.sources.push_back(source);
  }
  pushed += n;
  stream.max_unacked = std::max(stream.max_unacked, pushed - acked);
  run_.on_push(index_, n);
  // Coordinated / cache reads: the trainer stops after `take` elements (the dataset is infinite).
  if (take > 0 && static_cast<int64_t>(stream.elements.size()) >= take && !cancelled) {
    stream.elements.resize(static_cast<std::size_t>(take));
    stream.sources.resize(static_cast<std::size_t>(take));
    cancelled = true;
    if (consumer)
      caf::anon_send(consumer, msg::cancel_atom_v);
  }
  return Status::OK();
}

void RecordingSink::acked_elements(int64_t n) {
  acked += n;
  if (cursor_)
    cover(static_cast<std::size_t>(n));
}

void RecordingSink::cover(std::size_t n) {
  for (std::size_t i = 0; i < n && !unacked_.empty(); ++i) {
    const auto& o = unacked_.front();
    cursor_->consume(o.epoch, o.index, o.seq, o.split_end);
    unacked_.pop_front();
  }
}

Expected<std::string> RecordingSink::restart() {
  if (take > 0 || (info_.job != 0 && !resumable()))
    return failed_precondition("a trainer restart needs a resumable read (DYNAMIC, a private "
                               "job, a per-split pipeline)");
  // Forget what was received but not trained on: the resumed read must deliver it again.
  const auto keep = static_cast<std::size_t>(acked);
  if (stream.elements.size() > keep) {
    stream.elements.resize(keep);
    stream.sources.resize(keep);
  }
  pushed = acked;
  unacked_.clear();
  per_worker.clear(); // the new consumer counts its own
  ++generation;
  return cursor_ && cursor_->consumed() > 0 ? cursor_->encode() : std::string{};
}

void RecordingSink::finish(Status status) {
  if (stream.ended)
    return;
  stream.ended = true;
  stream.status = std::move(status);
  ended_at = run_.world().elapsed();
  run_.on_finish(index_);
}

void ClusterRun::on_push(int index, int64_t n) {
  received_ += n;
  auto& sink = *sinks_[static_cast<std::size_t>(index)];
  if (cfg_.trainer_rate) {
    pace_trainer(index, n);
  } else {
    // The trainer takes the batch after its step, then returns the credits.
    auto step = derived_.consumer_step.count() > 0
                  ? microseconds{world_.user_rng().between(0, derived_.consumer_step.count())}
                  : microseconds{0};
    world_.after(step, finish_step(index, n), slot_of(sink.stream.consumer));
  }
  if (late_at_percent_ > 0 && expected_ > 0 && received_ * 100 >= late_at_percent_ * expected_)
    start_late_workers();
  // Progress-triggered faults fire between messages, never inside an actor.
  for (auto it = progress_faults_.begin(); it != progress_faults_.end();) {
    if (expected_ > 0 &&
        static_cast<double>(received_) >= it->first * static_cast<double>(expected_)) {
      auto f = it->second;
      world_.after(microseconds{0}, [this, f] { fire(f); });
      it = progress_faults_.erase(it);
    } else {
      ++it;
    }
  }
}

std::function<void()> ClusterRun::finish_step(int index, int64_t n) {
  return [this, index, n, generation = sinks_[static_cast<std::size_t>(index)]->generation] {
    auto& s = *sinks_[static_cast<std::size_t>(index)];
    if (s.generation != generation)
      return; // the trainer restarted meanwhile: this step never finished
    s.acked_elements(n);
    if (s.consumer)
      caf::anon_send(s.consumer, msg::ack_atom_v, static_cast<uint64_t>(n));
  };
}

void ClusterRun::pace_trainer(int index, int64_t n) {
  auto& free = trainer_free_.at(static_cast<std::size_t>(index));
  free = std::max(free, world_.now()); // it waited for these: it starts on them now
  const auto slow_at = world_.start_time() + cfg_.trainer_slow_at;
  for (int64_t i = 0; i < n; ++i) {
    const double rate =
      cfg_.trainer_slow_rate > 0 && free >= slow_at ? cfg_.trainer_slow_rate : *cfg_.trainer_rate;
    free += std::chrono::duration_cast<Duration>(std::chrono::duration<double>(1.0 / rate));
    world_.at(free, finish_step(index, 1),
              slot_of(sinks_[static_cast<std::size_t>(index)]->stream.consumer));
  }
}

ScaleActuator::Nodes ClusterRun::actuator_nodes() {
  ScaleActuator::Nodes nodes;
  nodes.add = [this](int index) {
    auto name = "worker-" + std::to_string(index);
    slots_[name] = world_.add_node(name);
  };
  nodes.start = [this](int index) { start_worker(index); };
  nodes.stop = [this](int index) {
    auto name = "worker-" + std::to_string(index);
    auto slot = slot_of(name);
    if (workers_.count(slot) == 0) { // not started yet (or gone): its node just ends
      world_.crash(slot);
      return;
    }
    drain_worker(slot, [this, slot, name] {
      ++scale_drained_;
      end_process(slot, Fault::crash(name, microseconds{0})); // for good: no restart
    });
  };
  return nodes;
}

void ClusterRun::start_dispatcher() {
  auto slot = slot_of(kDispatcher);
  auto* node = world_.node(slot);
  actors::DispatcherStart start;
  start.address = std::string{kDispatcher} + ":" + std::to_string(kDispatcherPort);
  start.worker_timeout = cfg_.worker_timeout;
  start.job_gc_timeout = cfg_.job_gc_timeout;
  start.request_timeout = cfg_.options.request_timeout;
  start.range_split_size = derived_.split_size;
  start.adaptive_split_size = false; // the invariants count splits of this size
  start.round_lookahead = 16;        // coordinated reads: late workers join within short runs
  start.client_timeout = cfg_.job_gc_timeout * 4;
  start.auth_token = cfg_.auth_token;
  if (cfg_.autoscale) {
    start.autoscale_interval = cfg_.autoscale_interval;
    start.autoscale = *cfg_.autoscale;
    start.scale_to = [this](int64_t target) { actuator_->request(target); };
  }
  // Its disk outlives it: a restarted dispatcher replays what was synced before the crash.
  if (!journal_)
    journal_ =
      std::make_shared<SimJournal>(world_, slot, derived_.fsync_latency, derived_.compact_after);
  auto restored = std::make_shared<actors::DispatcherState>();
  auto replayed = journal_->replay(*restored);
  if (!replayed.ok())
    world_.violation("the dispatcher cannot replay its journal: " + replayed.status().to_string());
  else if (*replayed)
    start.restored = restored;
  start.journal = journal_;
  auto dispatcher = actors::spawn_dispatcher(node->system(), start);
  SimTransport transport{world_, slot, node->incarnation()};
  if (auto port =
        transport.publish(msg::dispatcher_actor{dispatcher}, kDispatcher, kDispatcherPort);
      !port)
    world_.violation("the dispatcher cannot publish: " + node->system().render(port.error()));
}

void ClusterRun::start_worker(int index) {
  auto name = "worker-" + std::to_string(index);
  auto slot = slot_of(name);
  auto* node = world_.node(slot);
  if (node == nullptr) // a late worker whose node crashed before it started
    return;
  // A late worker restarted (by a fault) before its start came: it runs already, and a second
  // worker on the node would find its port taken.
  if (workers_.count(slot) > 0)
    return;
  auto transport = std::make_shared<SimTransport>(world_, slot, node->incarnation());
  actors::WorkerStart start;
  start.transport = transport;
  start.dispatcher = HostPort{kDispatcher, kDispatcherPort};
  start.heartbeat_interval = cfg_.heartbeat_interval;
  start.request_timeout = cfg_.options.request_timeout;
  start.task_limits = derived_.task_limits;
  // (no task_executor: the tasks run on the deterministic scheduler)
  start.auth_token = cfg_.auth_token;
  if (auto bulk = transport->serve_bulk(name, 0); bulk) // the bulk path, over the simulated network
    start.bulk = *bulk;
  auto worker = actors::spawn_worker(node->system(), std::move(start));
  workers_[slot] = caf::actor_cast<caf::actor>(worker);
  auto port = static_cast<uint16_t>(kWorkerPort + node->incarnation());
  if (auto p = transport->publish(msg::worker_actor{worker}, name, port); !p)
    world_.violation(name + " cannot publish: " + node->system().render(p.error()));
  // As the worker itself: connect_atom is accepted only from an actor of its node.
  caf::send_as(caf::actor_cast<caf::actor>(worker), caf::actor_cast<caf::actor>(worker),
               caf::connect_atom_v, name + ":" + std::to_string(port));
}

void ClusterRun::start_consumer(int index) {
  auto name = "consumer-" + std::to_string(index);
  auto slot = slot_of(name);
  auto* node = world_.node(slot);
  if (node == nullptr)
    return;
  DistributeOptions o = cfg_.options;
  if (auto it = resume_from_.find(index); it != resume_from_.end() && !it->second.empty())
    o.resume_from = it->second; // a restarted trainer continues from its checkpoint
  auto start =
    actors::consumer_start(o, std::make_shared<SimTransport>(world_, slot, node->incarnation()),
                           conveyor::ClientConfig{}.connect_timeout, msg::kProtocolVersion);
  start.sink = sinks_[static_cast<std::size_t>(index)];
  start.auth_token = cfg_.auth_token;
  start.limits.max_outstanding = derived_.credits; // the seed decides the credits
  start.dispatcher_address = std::string{kDispatcher} + ":" + std::to_string(kDispatcherPort);
  start.definition = to_binary(dataset_);
  if (o.num_consumers)
    start.consumer_index = index; // coordinated reads: consumer i reads index i
  if (o.cross_trainer_cache)
    start.trainer_id = "trainer-" + std::to_string(index); // each consumer its own trainer
  if (!o.job_name && cfg_.consumers > 1)
    start.job_request.job_name = std::string{"sim"};
  sinks_[static_cast<std::size_t>(index)]->consumer =
    actors::spawn_consumer(node->system(), std::move(start));
}

void ClusterRun::schedule_fault(const Fault& f) {
  if (f.at_progress) {
    progress_faults_.emplace_back(*f.at_progress, f);
    return;
  }
  world_.at(world_.start_time() + f.at, [this, f] { fire(f); });
}

void ClusterRun::fire(const Fault& f) {
  any_fault_ = true;
  fired_.push_back(f.to_string() + " (fired at " + format_time(world_.elapsed()) + ")");
  auto a = slot_of(f.node);
  switch (f.kind) {
    case Fault::Kind::crash:
    case Fault::Kind::restart: end_process(a, f); break;
    case Fault::Kind::drain: {        // as SIGTERM: drain (from the worker's own node), then exit
      auto entry = fired_.size() - 1; // this fault's line: it says when the drain ended
      drain_worker(a, [this, a, f, entry] {
        fired_[entry] += ", drained and stopped at " + format_time(world_.elapsed());
        end_process(a, f);
      });
      break;
    }
    case Fault::Kind::partition: {
      auto b = slot_of(f.peer);
      world_.network().partition(a, b);
      partitions_.emplace_back(a, b);
      world_.after(f.duration, [this, a, b] { world_.network().heal(a, b); });
      break;
    }
    case Fault::Kind::disconnect: world_.network().disconnect(a, slot_of(f.peer)); break;
    case Fault::Kind::slow: {
      auto b = slot_of(f.peer);
      auto before = world_.network().link_config(a, b);
      auto slow = before;
      slow.latency *= 50;
      world_.network().set_link(a, b, slow);
      world_.after(f.duration, [this, a, b, before] { world_.network().set_link(a, b, before); });
      break;
    }
  }
}

void ClusterRun::drain_worker(std::size_t a, std::function<void()> then) {
  auto w = workers_.find(a);
  auto* node = world_.node(a);
  if (w == workers_.end() || node == nullptr)
    return;
  auto incarnation = node->incarnation();
  auto done = [this, a, incarnation, then = std::move(then)] {
    world_.after(std::chrono::microseconds{0}, [this, a, incarnation, then] {
      if (auto* n = world_.node(a); n != nullptr && n->incarnation() == incarnation)
        then();
    });
  };
  // The worker travels as a spawn argument, not a capture: CAF 0.17.6 dereferences a null
  // argument tuple when a function actor is spawned without arguments (UBSan reports it).
  node->system().spawn(
    [done](caf::event_based_actor* self, caf::actor worker) -> caf::behavior {
      self->request(worker, caf::infinite, msg::drain_atom_v)
        .then(
          [self, done](bool) {
            done();
            self->quit();
          },
          [self, done](caf::error&) {
            done();
            self->quit();
          });
      return {[](msg::tick_atom) {}};
    },
    w->second);
}

void ClusterRun::start_late_workers() {
  late_at_percent_ = 0;
  world_.after(microseconds{0}, [this] {
    for (int i = cfg_.workers - cfg_.late_workers; i < cfg_.workers; ++i)
      start_worker(i);
  });
}

void ClusterRun::end_process(std::size_t a, const Fault& f) {
  workers_.erase(a); // no handle outlives its node's actor system
  if (f.node.rfind("consumer-", 0) == 0) {
    auto index = std::stoi(f.node.substr(9));
    auto& sink = *sinks_[static_cast<std::size_t>(index)];
    if (f.kind == Fault::Kind::restart && !sink.stream.ended) {
      // A trainer killed and restarted from its checkpoint (DistributeOptions::resume_from).
      auto checkpoint = sink.restart();
      if (checkpoint.ok())
        resume_from_[index] = *checkpoint;
      else
        world_.violation(f.node + " cannot restart: " + checkpoint.status().message());
    } else if (!sink.stream.ended && !sink.stream.crashed) {
      sink.stream.crashed = true;
      ++ended_;
    }
    sink.consumer = nullptr;
  }
  world_.crash(a);
  if (late_at_percent_ > 0) {
    bool any_up = false;
    for (int i = 0; i < cfg_.workers - cfg_.late_workers; ++i)
      any_up = any_up || workers_.count(slot_of("worker-" + std::to_string(i))) > 0;
    if (!any_up)
      start_late_workers();
  }
  // What was not synced is lost with it (also records its actors made while dying).
  if (f.node == kDispatcher && journal_)
    journal_->crash();
  if (f.kind == Fault::Kind::restart || f.kind == Fault::Kind::drain) {
    world_.after(f.duration, [this, a, name = f.node] {
      if (world_.node(a) != nullptr)
        return;
      world_.restart(a);
      if (name == kDispatcher)
        start_dispatcher();
      else if (name.rfind("consumer-", 0) == 0)
        start_consumer(std::stoi(name.substr(9)));
      else
        start_worker(std::stoi(name.substr(7)));
    });
  }
}

std::vector<std::string> ClusterRun::leaks() {
  std::vector<std::string> out;
  for (std::size_t s = 0; s < world_.node_count(); ++s) {
    auto* n = world_.node(s);
    if (n == nullptr)
      continue;
    std::map<std::string, int> counts;
    for (const auto& name : n->live_actor_names())
      if (name == std::string{"conveyor.job"} || name == std::string{"conveyor.task"} ||
          name == std::string{"conveyor.consumer"})
        ++counts[name];
    for (const auto& [name, count] : counts)
      out.push_back(std::to_string(count) + " " + name + " actor(s) still alive on " + n->name() +
                    " after every stream ended and the job's GC time passed");
  }
  return out;
}

SimResult ClusterRun::run() {
  auto real_start = std::chrono::steady_clock::now();
  PlantBug bug{planted_bug_from_string(cfg_.plant_bug).value_or(PlantedBug::none)};
  // Installed after the planted bug's hooks (it forwards to them), removed before them.
  std::unique_ptr<ProductionCost> cost;
  if (cfg_.worker_rate)
    cost = std::make_unique<ProductionCost>(world_, *cfg_.worker_rate, cfg_.worker_rate_noise,
                                            cfg_.seed ^ 0xc057ULL);
  if (cfg_.autoscale)
    actuator_ =
      std::make_unique<ScaleActuator>(world_, actuator_nodes(), cfg_.workers, cfg_.register_min,
                                      cfg_.register_max, cfg_.seed ^ 0x5ca1eULL);
  trainer_free_.assign(static_cast<std::size_t>(cfg_.consumers), world_.now());
  LogCapture capture{world_};
  expected_ = static_cast<int64_t>(ref_.elements.size()) *
              (cfg_.options.policy == ShardingPolicy::off ? cfg_.workers : 1);
  if (cfg_.take > 0) // coordinated / cache reads: every consumer reads `take` elements
    expected_ = cfg_.take * cfg_.consumers;

  // Nodes: the dispatcher, then the workers, then the consumers (slots in that order).
  slots_[kDispatcher] = world_.add_node(kDispatcher);
  for (int i = 0; i < cfg_.workers; ++i) {
    auto name = "worker-" + std::to_string(i);
    slots_[name] = world_.add_node(name);
  }
  for (int i = 0; i < cfg_.consumers; ++i) {
    auto name = "consumer-" + std::to_string(i);
    slots_[name] = world_.add_node(name);
    sinks_.push_back(std::make_shared<RecordingSink>(*this, i));
    sinks_.back()->stream.consumer = name;
    sinks_.back()->take = cfg_.take; // -1 unless coordinated or cache reads
  }
  // DYNAMIC: every split that reaches a task, as the job's answers cross the network, less those
  // a task handed back (a task hands back the unstarted splits beyond its read-ahead window
  // without any fault: worker/split_feed.hpp; the job hands them out again).
  std::map<std::tuple<int64_t, int64_t, int64_t>, int64_t> splits, returned;
  world_.network().set_observer(
    [&splits, &returned](std::size_t, std::size_t, const caf::message& m) {
      if (m.match_elements<msg::splits_reply>()) {
        const auto& reply = m.get_as<msg::splits_reply>(0);
        for (const auto& s : reply.splits)
          ++splits[{s.source, s.epoch, s.index}];
      } else if (m.match_elements<msg::splits_update>()) {
        for (const auto& s : m.get_as<msg::splits_update>(0).returned)
          ++returned[{s.source, s.epoch, s.index}];
      }
    });
  start_dispatcher();
  // Late workers join the running job once the consumers received a share of what they expect
  // (10 .. 60 %, drawn from the seed).
  if (cfg_.late_workers > 0)
    late_at_percent_ = world_.user_rng().between(10, 60);
  for (int i = 0; i < cfg_.workers - cfg_.late_workers; ++i)
    start_worker(i);
  for (int i = 0; i < cfg_.consumers; ++i)
    world_.after(derived_.consumer_start[static_cast<std::size_t>(i)],
                 [this, i] { start_consumer(i); });
  for (const auto& f : derived_.faults)
    schedule_fault(f);

  auto deadline = world_.start_time() + cfg_.time_limit;
  auto stop = world_.run_until([this] { return ended_ == cfg_.consumers; }, deadline);
  int live_workers = 0;
  const int all_workers = actuator_ ? actuator_->next_index() : cfg_.workers;
  for (int i = 0; i < all_workers; ++i)
    if (world_.node(slot_of("worker-" + std::to_string(i))) != nullptr)
      ++live_workers;

  // Liveness phase: the faults are over; the cluster must clean up after the job.
  progress_faults_.clear();
  for (auto [a, b] : partitions_)
    world_.network().heal(a, b);
  // (A job a restarted dispatcher re-spawned waits client_timeout = 4 x job_gc_timeout for its
  // consumers to re-join, checked every job_gc_timeout.)
  auto settle = caf::timespan{5 * cfg_.job_gc_timeout + cfg_.worker_timeout +
                              4 * cfg_.heartbeat_interval + milliseconds{1000}};
  if (stop == StopReason::done)
    world_.run_until(nullptr, world_.now() + settle);

  Observation obs;
  obs.policy = cfg_.options.policy;
  obs.workers = all_workers;
  for (int i = cfg_.workers - cfg_.late_workers; i < cfg_.workers; ++i)
    obs.late_workers.push_back("worker-" + std::to_string(i));
  obs.reference = ref_.elements;
  obs.reference_ordered = ref_.ordered;
  obs.split_transparent = ref_.split_transparent;
  obs.per_split = ref_.per_split;
  // A scale-down drains workers as the drain fault does (their unstarted splits go out again).
  obs.faults = any_fault_ || (actuator_ && actuator_->stopped() > 0);
  if (cfg_.options.policy == ShardingPolicy::dynamic) {
    // Without faults a split a task handed back counts once less (the job hands it out again).
    // With faults a return may come for a split the job already took back (a restarted
    // trainer's job, a lost task), which the job ignores: there "reached a task" means at
    // least once, and the element checks catch a split that was never read.
    for (const auto& [key, n] : splits) {
      const auto back = returned.find(key);
      const int64_t kept = obs.faults || back == returned.end() ? n : n - back->second;
      if (kept > 0) // (handed back and never handed out again: not delivered)
        obs.splits_delivered[key] = kept;
    }
    obs.expected_splits = count_splits(dataset_, derived_.split_size);
  }
  obs.credits = derived_.credits;
  if (cfg_.options.num_consumers)
    obs.coordinated = *cfg_.options.num_consumers;
  obs.take = cfg_.take;
  obs.endless_period = cfg_.endless_period;
  obs.cross_trainer_cache = cfg_.options.cross_trainer_cache.has_value();
  obs.cache_whole_epoch = obs.cross_trainer_cache && cfg_.options.cross_trainer_cache->finite_epoch;
  obs.cache_evicts = derived_.cache_evicts();
  obs.one_iteration = cfg_.consumers > 1 && !cfg_.options.num_consumers && !obs.cross_trainer_cache;
  obs.violations = world_.violations();
  obs.time_limit = format_time(cfg_.time_limit);
  if (live_workers == 0)
    obs.time_limit += " (no worker was alive at the end: a job waits for workers to come back)";
  obs.timed_out = stop != StopReason::done;
  for (auto& s : sinks_)
    obs.streams.push_back(s->stream);
  if (stop == StopReason::done)
    obs.leaks = leaks();
  else if (stop == StopReason::step_limit)
    obs.violations.push_back(
      "the run exceeded its budget of processed messages (a message storm?)");

  SimResult r;
  r.seed = cfg_.seed;
  r.failures = check_invariants(obs);
  r.derived_config = derived_.describe();
  r.faults_injected = fired_;
  for (std::size_t i = 0; i < obs.streams.size(); ++i) {
    auto& s = obs.streams[i];
    SimConsumer c;
    c.ended_at = sinks_[i]->ended_at;
    c.elements = std::move(s.elements);
    c.sources = std::move(s.sources);
    c.status = s.crashed ? Status{ErrorCode::unavailable, "the consumer's node crashed"} : s.status;
    c.ended = s.ended || s.crashed;
    c.lost_tasks = s.lost_tasks;
    r.consumers.push_back(std::move(c));
  }
  r.virtual_time = world_.elapsed();
  r.steps = world_.steps();
  r.messages = world_.network().messages_delivered();
  r.trace_hash = world_.trace().hash_hex();
  if (cfg_.keep_trace) {
    r.trace = world_.trace().lines();
    if (world_.trace().truncated())
      r.trace.push_back("... (trace truncated)");
  }
  r.replay_command = replay_command(dataset_, cfg_);
  if (actuator_) {
    r.scale_targets = actuator_->targets();
    r.workers_started = actuator_->started();
    r.workers_drained = scale_drained_;
  }
  // Tear down while the log lines still go to the trace (actors log as they die).
  workers_.clear();
  world_.shut_down();
  world_.network().set_observer(nullptr);
  r.real_seconds =
    std::chrono::duration<double>(std::chrono::steady_clock::now() - real_start).count();
  return r;
}

} // namespace

SimResult run_cluster(const Dataset& dataset, const SimConfig& config, const Reference& reference,
                      const FaultSpec& spec) {
  ClusterRun run{dataset, config, reference, spec};
  return run.run();
}

} // namespace conveyor::sim
