// The blocking consumer API (conveyor/client.hpp): a client-side actor system, blocking
// requests to the dispatcher, and ElementStream over a consumer actor feeding a QueueSink.
#include "conveyor/client.hpp"

#include <deque>
#include <utility>
#include <vector>

#include <caf/actor_system.hpp>
#include <caf/scoped_actor.hpp>
#include <caf/send.hpp>

#include "consumer/consumer_actor.hpp"
#include "consumer/element_sink.hpp"
#include "consumer/ordered_reads.hpp"
#include "node/node_config.hpp"
#include "net/transport.hpp"
#include "messages/all.hpp"
#include "node/log.hpp"
#include "pipeline/graph/external_state.hpp"
#include "pipeline/graph/serialize.hpp"
#include "pipeline/io/snapshot_files.hpp"
#include "pipeline/sharding/read_cursor.hpp"

namespace conveyor {

namespace detail {

class ClientContext {
public:
  ClientContext(ClientConfig c, std::string a)
    : config(std::move(c)), address(std::move(a)), node(config.network), sys(node.get()),
      transport(actors::make_transport(sys, config.network)) {}

  // One blocking request to the dispatcher; `what` names it in errors.
  template <class Reply, class Request>
  Expected<Reply> ask(Request req, const std::string& what) {
    actors::ReleaseThreadLogger release{sys}; // declared first: it runs after ~scoped_actor
    caf::scoped_actor self{sys};
    Expected<Reply> result{Status{ErrorCode::internal, "no reply"}};
    self->request(dispatcher, caf::timespan{config.request_timeout}, std::move(req))
      .receive([&](Reply& r) { result = std::move(r); },
               [&](caf::error& err) { result = msg::to_status(err, what); });
    return result;
  }

  ClientConfig config;
  std::string address;
  actors::NodeSystem node;
  caf::actor_system& sys;
  std::shared_ptr<actors::Transport> transport;
  msg::dispatcher_actor dispatcher;
};

class StreamContext {
public:
  ~StreamContext() {
    // Leaving: the consumer actor quits (if it has not ended already) and the job notices.
    caf::anon_send(consumer, msg::cancel_atom_v);
  }

  void flush_acks() {
    if (pending_acks > 0) {
      caf::anon_send(consumer, msg::ack_atom_v, pending_acks);
      pending_acks = 0;
    }
  }

  std::shared_ptr<ClientContext> client; // keeps the actor system alive
  std::shared_ptr<actors::QueueSink> sink;
  msg::stream_actor consumer;
  msg::job_id_t job = 0;
  // Taken from the sink; handed out (and decoded) one element at a time.
  actors::ReadyElements ready;
  uint64_t pending_acks = 0;
  bool ended = false;
  Status final_status;
  // The read cursor (ElementStream::checkpoint), when the read can be resumed; otherwise why not.
  std::optional<ReadCursor> cursor;
  std::string no_cursor;
  // Deterministic reads (DistributeOptions::deterministic): the reorder, the splits the job saw
  // finished (handled once every element taken before them went through the reorder), the run
  // being handed out (next in order, decoded element by element into the caller's Element),
  // and what the reorder held when the read ended, in order.
  std::unique_ptr<actors::OrderedReads> order;
  std::vector<std::pair<int64_t, int64_t>> finished;
  actors::SplitRun current;
  std::deque<actors::SplitRun> draining;
  // DistributeOptions::deterministic_hold_bytes, and whether the hold is over it (told to the
  // consumer through the sink: it then asks only the task the order waits for).
  int64_t hold_budget = 0;
  bool hold_full = false;
  std::pair<int64_t, int64_t> waits_for{-1, -1}; // (the split it last told the sink)

  void check_hold() {
    const bool full = order && order->held_bytes() > hold_budget;
    if (full && order->next_split() != waits_for) {
      // Over budget, the consumer asks the task of this split (and no task past it): a new
      // one wakes it, so that it stops asking a task that has moved on (issue 36).
      waits_for = order->next_split();
      sink->set_hold_waits_for(waits_for);
      if (full == hold_full)
        caf::anon_send(consumer, msg::ack_atom_v, uint64_t{0});
    }
    if (full == hold_full)
      return;
    hold_full = full;
    sink->set_hold_full(full);
    if (!full) // (the consumer asks every task again at its next step: wake it now)
      caf::anon_send(consumer, msg::ack_atom_v, uint64_t{0});
  }
};

} // namespace detail

namespace {
constexpr uint64_t kAckEvery = 4096;

// A resumed read continues its `resume_from` cursor (validated before the job was asked for).
bool take_resumed_cursor(detail::StreamContext& sc, const DistributeOptions& options) {
  if (!options.resume_from)
    return false;
  auto cursor = ReadCursor::decode(*options.resume_from, "`resume_from`");
  if (!cursor.ok())
    return false;
  sc.cursor = std::move(cursor).value();
  return true;
}

// The stream's read cursor: from `resume_from`, or empty for the job's dataset and split size.
void set_up_cursor(detail::StreamContext& sc, const DistributeOptions& options) {
  const msg::job_info info = sc.sink->job_info();
  if (options.policy != ShardingPolicy::dynamic && options.policy != ShardingPolicy::off) {
    sc.no_cursor = std::string{"it is neither DYNAMIC (distributed_epoch) nor OFF "
                               "(parallel_epochs) but "} +
                   to_string(options.policy) +
                   ": only their elements can be counted per split or task";
    return;
  }
  if (options.num_consumers && options.policy == ShardingPolicy::off &&
      !options.cross_trainer_cache) {
    // Coordinated: this trainer's share of the rounds (its element of each), per task slot.
    if (!info.off_refusal.empty()) {
      sc.no_cursor = "its pipeline's output is not a function of the dataset: " + info.off_refusal;
      return;
    }
    if (!take_resumed_cursor(sc, options))
      sc.cursor = ReadCursor::coordinated(info.fingerprint, *options.num_consumers,
                                          options.consumer_index.value_or(0));
    return;
  }
  if (options.job_name) {
    sc.no_cursor = "it reads the named job \"" + *options.job_name +
                   "\", whose elements are shared among its consumers";
    return;
  }
  if (options.policy == ShardingPolicy::off) {
    if (options.cross_trainer_cache) {
      sc.no_cursor = "an OFF read with the cross-trainer cache has no per-task cursor";
      return;
    }
    if (!info.off_refusal.empty()) {
      sc.no_cursor = "its pipeline's output is not a function of the dataset: " + info.off_refusal;
      return;
    }
    if (!take_resumed_cursor(sc, options))
      sc.cursor = ReadCursor::off(info.fingerprint);
    return;
  }
  if (!info.per_split || info.split_size <= 0) {
    sc.no_cursor = "its pipeline mixes splits (only map without parallelism, filter, flat_map and "
                   "repeat may follow the source; shuffle and batch after distribute())";
    return;
  }
  if (!take_resumed_cursor(sc, options))
    sc.cursor.emplace(info.fingerprint, info.split_size, info.file_seed);
}

// Workers' end marks: the reorder may move past a split once its elements are in, and the
// cursor calls it complete once they were all consumed (both wait for the elements).
void apply_split_ends(detail::StreamContext& c) {
  if (!c.ready.has_split_ends())
    return;
  for (const auto& end : c.ready.take_split_ends()) {
    if (c.order)
      c.order->split_ended({end.epoch, end.index}, end.count);
    if (c.cursor)
      c.cursor->split_ended(end.epoch, end.index, end.count);
  }
}

// A deterministic read's next element in order, decoded into `out` (got = false: none is in
// hand). The run being handed out comes first, then held runs the order reached, then what the
// reorder held at the read's end, then runs taken in (consumer/ordered_reads.hpp): one that is
// next in order is handed out, any other held whole, still encoded.
Status next_in_order(detail::StreamContext& c, Element& out, bool& got,
                     actors::DeliveredOrigin& origin) {
  got = false;
  for (;;) {
    if (!c.current.done()) {
      if (Status status = c.current.next(out, origin); !status.ok())
        return status;
      got = true;
      return Status::OK();
    }
    if (auto held = c.order->pop()) {
      c.current = std::move(*held);
      c.check_hold();
      continue;
    }
    if (!c.draining.empty()) {
      c.current = std::move(c.draining.front());
      c.draining.pop_front();
      continue;
    }
    bool taken = false;
    if (Status status = c.ready.next_run(c.current, taken); !status.ok() || !taken)
      return status;
    c.pending_acks += c.current.count; // taken in: their credit goes back, handed out or held
    auto next = c.order->arrived(c.current);
    if (!next.ok())
      return next.status();
    if (!*next)
      c.current = actors::SplitRun{}; // held (moved from)
    c.check_hold();
    if (c.pending_acks >= kAckEvery || c.ready.empty())
      c.flush_acks();
  }
}

// The reorder of a deterministic read, after set_up_cursor (a resumed one starts where its
// cursor stands). The dispatcher refused a job that cannot be read in order.
void set_up_order(detail::StreamContext& sc, const DistributeOptions& options) {
  if (!options.deterministic)
    return;
  std::shared_ptr<const ReadCursor> resumed;
  if (options.resume_from && sc.cursor)
    resumed = std::make_shared<const ReadCursor>(*sc.cursor);
  sc.order = std::make_unique<actors::OrderedReads>(kDeterministicWindow, std::move(resumed));
  sc.hold_budget = options.deterministic_hold_bytes;
}
} // namespace

// --- ElementStream

ElementStream::ElementStream(std::unique_ptr<detail::StreamContext> ctx) : ctx_(std::move(ctx)) {}
ElementStream::ElementStream(ElementStream&&) noexcept = default;
ElementStream& ElementStream::operator=(ElementStream&&) noexcept = default;
ElementStream::~ElementStream() = default;

Status ElementStream::next(Element& out, bool& end_of_sequence, std::chrono::milliseconds timeout) {
  end_of_sequence = false;
  if (!ctx_)
    return failed_precondition("the stream was moved from");
  auto& c = *ctx_;
  if (c.sink->cancelled()) { // (cancel() from another thread: nothing more is handed out)
    c.ended = true;
    c.final_status = Status{ErrorCode::cancelled, "the stream was cancelled"};
    return c.final_status;
  }
  auto fail = [&](Status status) {
    // Final: the consumer stops fetching and leaves its job now.
    c.ended = true;
    c.final_status = status;
    caf::anon_send(c.consumer, msg::cancel_atom_v);
    return status;
  };
  for (;;) {
    bool got = false;
    actors::DeliveredOrigin origin;
    if (c.order) { // a deterministic read: runs of a split, in order
      if (Status status = next_in_order(c, out, got, origin); !status.ok())
        return fail(status);
    } else {
      // Decoded here, on the reader's thread, into the caller's element
      // (consumer/ready_elements.hpp).
      if (Status status = c.ready.next(out, got, c.cursor ? &origin : nullptr); !status.ok())
        return fail(status);
      if (got) {
        ++c.pending_acks; // taken in: its credit goes back
        if (c.pending_acks >= kAckEvery || c.ready.empty())
          c.flush_acks();
      }
    }
    if (got) {
      if (c.cursor) {
        if (origin.tagged()) {
          // A coordinated trainer resumed from a later step than the job's drops the rounds
          // its cursor has (the other trainers consume theirs).
          if (!c.cursor->consume(origin.epoch, origin.index, origin.seq, origin.split_end) &&
              c.cursor->coordinated())
            continue;
        } else { // (a per-split job tags every element: never expected)
          c.cursor.reset();
          c.no_cursor = "an element arrived without its split";
        }
      }
      return Status::OK();
    }
    // Nothing taken in is left: the finished splits now have all their elements in the order.
    if (c.order && !c.finished.empty()) {
      c.order->finished(std::exchange(c.finished, {}));
      continue;
    }
    if (c.ended) {
      if (c.order && c.final_status.ok() && c.order->held() > 0) {
        for (auto& run : c.order->drain()) // the end: nothing earlier can come any more
          c.draining.push_back(std::move(run));
        continue;
      }
      end_of_sequence = c.final_status.ok();
      if (end_of_sequence && c.cursor && c.cursor->mode() == ShardingPolicy::off &&
          !c.cursor->coordinated() && c.sink->stats().lost_tasks == 0)
        for (const auto& [slot, base] : c.sink->task_slots()) { // read to their ends
          c.cursor->add_slot(slot, base);
          c.cursor->end_slot(slot);
        }
      return c.final_status;
    }
    c.flush_acks();
    Status status;
    switch (c.sink->take_all(c.ready, timeout, status)) {
      case actors::QueueSink::Wait::elements:
        if (c.order)
          for (auto& f : c.ready.take_finished())
            c.finished.push_back(f);
        apply_split_ends(c);
        break;
      case actors::QueueSink::Wait::end:
        c.ended = true; // (a deterministic read hands out what it holds first)
        c.final_status = Status::OK();
        break;
      case actors::QueueSink::Wait::error:
        c.ended = true;
        c.final_status = status;
        return status;
      case actors::QueueSink::Wait::timeout:
        return Status{ErrorCode::deadline_exceeded,
                      "no element arrived within " + std::to_string(timeout.count()) + " ms"};
    }
  }
}

void ElementStream::cancel() {
  if (!ctx_)
    return;
  // The blocked reader wakes now; the consumer actor leaves the job (its cancel_atom handler
  // says so when it drops elements a named job's other consumers will not get).
  ctx_->sink->cancel();
  caf::anon_send(ctx_->consumer, msg::cancel_atom_v);
}

ElementStream::iterator& ElementStream::iterator::operator++() {
  if (!stream_)
    return *this;
  bool end = false;
  Status s = stream_->next(current_, end);
  if (!s.ok())
    stream_->status_ = s;
  if (!s.ok() || end)
    stream_ = nullptr;
  return *this;
}

Expected<std::string> ElementStream::checkpoint() const {
  if (!ctx_)
    return failed_precondition("the stream was moved from");
  if (!ctx_->cursor)
    return failed_precondition("checkpoint(): this read cannot be resumed: " + ctx_->no_cursor);
  auto& cursor = *ctx_->cursor;
  // With the slots nothing was taken from yet (coordinated: their base in rounds).
  const int64_t per_count = cursor.coordinated() ? cursor.num_consumers() : 1;
  if (cursor.mode() == ShardingPolicy::off)
    for (const auto& [slot, base] : ctx_->sink->task_slots())
      cursor.add_slot(slot, base / per_count);
  // An OFF task that ended while the read goes on: its slot ended once all it sent was consumed
  // (its last batch may not have said it was the last; the end came in an empty reply).
  if (cursor.mode() == ShardingPolicy::off && !cursor.coordinated())
    for (const auto& [slot, end] : ctx_->sink->task_slot_ends())
      if (auto s = cursor.slots().find(slot);
          s != cursor.slots().end() && s->second.consumed >= end)
        cursor.end_slot(slot);
  if (cursor.coordinated()) // the job its resume is keyed by (the N trainers meet in one)
    cursor.set_job(static_cast<int64_t>(ctx_->job));
  return cursor.encode();
}

int64_t ElementStream::consumed_total() const {
  return ctx_ && ctx_->cursor ? ctx_->cursor->consumed() : 0;
}

std::string ElementStream::job_id() const { return ctx_ ? std::to_string(ctx_->job) : ""; }

StreamStats ElementStream::stats() const {
  StreamStats out;
  if (!ctx_)
    return out;
  out = ctx_->sink->stats(); // the stream's part of msg::stream_stats
  if (ctx_->order) {
    out.order_held_peak = ctx_->order->peak_held();
    out.order_held_peak_bytes = ctx_->order->peak_held_bytes();
  }
  return out;
}

// --- Client

Client::Client(std::shared_ptr<detail::ClientContext> ctx) : ctx_(std::move(ctx)) {}

const std::string& Client::address() const { return ctx_->address; }

Expected<Client> Client::connect(const std::string& address, ClientConfig config) {
  auto addr = parse_address(address);
  if (!addr.ok())
    return addr.status().with_context("dispatcher address");
  if (config.connect_timeout.count() <= 0 || config.request_timeout.count() <= 0)
    return invalid_argument("`connect_timeout` and `request_timeout` must be positive");
  if (config.protocol_version == 0)
    config.protocol_version = msg::kProtocolVersion;
  CONVEYOR_RETURN_IF_ERROR(validate_security(config.network));
  auto ctx = std::make_shared<detail::ClientContext>(config, address);
  actors::ReleaseThreadLogger release{ctx->sys}; // this thread may not be the one to destroy it
  auto dispatcher = actors::connect_blocking<msg::dispatcher_actor>(
    ctx->sys, *ctx->transport, *addr, caf::timespan{config.connect_timeout}, "the dispatcher");
  if (!dispatcher.ok())
    return dispatcher.status();
  ctx->dispatcher = *dispatcher;
  // The handshake is bounded by connect_timeout too: a dispatcher that accepted the connection
  // but never answers must not hang us.
  caf::scoped_actor self{ctx->sys};
  Status hello = Status{ErrorCode::internal, "no reply"};
  self
    ->request(ctx->dispatcher, caf::timespan{config.connect_timeout},
              msg::client_hello{config.protocol_version, "client", config.network.auth_token})
    .receive([&](msg::dispatcher_hello&) { hello = Status::OK(); },
             [&](caf::error& err) {
               hello = msg::to_status(err, "handshake with the dispatcher at " + address);
             });
  if (!hello.ok())
    return hello;
  return Client{std::move(ctx)};
}

Expected<std::string>
Client::register_dataset(const Dataset& dataset, const std::string& compression,
                         const std::optional<std::string>& requested_id,
                         const std::optional<std::string>& external_state_policy) {
  CONVEYOR_RETURN_IF_ERROR(validate_compression(compression));
  if (requested_id && requested_id->empty())
    return invalid_argument("`dataset_id` must not be empty");
  CONVEYOR_RETURN_IF_ERROR(dataset.validate());
  auto policy = external_state_policy_from_string(external_state_policy.value_or("WARN"));
  if (!policy.ok())
    return policy.status();
  std::string warning;
  CONVEYOR_RETURN_IF_ERROR(check_external_state(dataset, *policy, &warning));
  if (!warning.empty())
    log::warning("conveyor.client", warning);
  msg::register_dataset req;
  req.definition = to_binary(dataset);
  req.compression = compression == "NONE" ? Compression::none : Compression::automatic;
  if (requested_id)
    req.requested_id = *requested_id;
  auto reply = ctx_->ask<msg::dataset_registered>(std::move(req), "registering the dataset");
  if (!reply.ok())
    return reply.status();
  return reply->dataset;
}

Status Client::start_snapshot(const std::string& dataset_id, const std::string& path,
                              const std::string& compression, int64_t chunk_bytes) {
  msg::start_snapshot req;
  req.path = path;
  req.dataset = dataset_id;
  if (compression == "lz4")
    req.compression = static_cast<uint8_t>(Compression::lz4);
  else if (compression == "none")
    req.compression = static_cast<uint8_t>(Compression::none);
  else
    return invalid_argument("`compression` must be \"lz4\" or \"none\", got \"" + compression +
                            "\"");
  req.chunk_bytes = chunk_bytes;
  auto reply = ctx_->ask<msg::snapshot_started>(std::move(req), "starting the snapshot");
  return reply.ok() ? Status::OK() : reply.status();
}

Expected<ElementStream> Client::distribute(const Dataset& dataset,
                                           const DistributeOptions& options) {
  CONVEYOR_RETURN_IF_ERROR(validate(options));
  auto id =
    register_dataset(dataset, options.compression, std::nullopt, options.external_state_policy);
  if (!id.ok())
    return id.status();
  return from_dataset_id(*id, options);
}

Expected<ElementSpec> Client::element_spec(const std::string& dataset_id) {
  if (dataset_id.empty())
    return invalid_argument("`dataset_id` must not be empty");
  auto reply = ctx_->ask<msg::element_spec_reply>(
    msg::get_element_spec{dataset_id}, "asking for the element spec of dataset " + dataset_id);
  if (!reply.ok())
    return reply.status();
  if (reply->spec.empty())
    return ElementSpec{};
  return snapshot::parse_spec_components(reply->spec);
}

Expected<ElementStream> Client::from_dataset_id(const std::string& dataset_id,
                                                const DistributeOptions& options) {
  CONVEYOR_RETURN_IF_ERROR(validate(options));
  if (dataset_id.empty())
    return invalid_argument("`dataset_id` must not be empty");
  // The stream is the async consumer actor feeding a queue: it creates or joins the job on the
  // dispatcher this client greeted, exactly as conveyor/async.hpp's streams do.
  auto sc = std::make_unique<detail::StreamContext>();
  sc->client = ctx_;
  sc->sink = std::make_shared<actors::QueueSink>();
  auto start = actors::consumer_start(options, ctx_->transport, ctx_->config.connect_timeout,
                                      ctx_->config.protocol_version);
  start.sink = sc->sink;
  start.auth_token = ctx_->config.network.auth_token;
  start.dispatcher = ctx_->dispatcher;
  start.dispatcher_address = ctx_->address;
  start.job_request.dataset = dataset_id;
  {
    actors::ReleaseThreadLogger release{ctx_->sys}; // spawning pins the system to this thread
    sc->consumer = actors::spawn_consumer(ctx_->sys, std::move(start));
  }
  // Errors of job creation (an unknown dataset id, conflicting options) belong to this call,
  // not to the first next(): wait until the consumer joined its job or failed. Both steps are
  // requests bounded by request_timeout.
  auto joined =
    sc->sink->wait_joined(2 * options.request_timeout + std::chrono::seconds(1), sc->job);
  if (!joined.ok())
    return joined;
  set_up_cursor(*sc, options);
  set_up_order(*sc, options);
  return ElementStream{std::move(sc)};
}

} // namespace conveyor
