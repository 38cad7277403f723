#include "test/integration/stranger.hpp"

#include <caf/actor_system.hpp>
#include <caf/scoped_actor.hpp>

#include "node/node_config.hpp"
#include "net/transport.hpp"
#include "messages/all.hpp"
#include "pipeline/graph/serialize.hpp"
#include "pipeline/graph/text_form.hpp"

namespace conveyor::testing {

namespace {
constexpr auto kTimeout = std::chrono::seconds(10);
} // namespace

struct Stranger::Impl {
  actors::NodeConfig cfg;
  caf::actor_system sys{cfg};
  std::shared_ptr<actors::Transport> transport = actors::make_tcp_transport(sys);
  msg::worker_actor worker;
  msg::task_actor task;
  uint64_t task_id = 0;
};

Stranger::Stranger() : impl_(std::make_unique<Impl>()) {}
Stranger::~Stranger() = default;

Status Stranger::connect(uint16_t worker_port) {
  auto w = actors::connect_blocking<msg::worker_actor>(impl_->sys, *impl_->transport,
                                                       HostPort{"127.0.0.1", worker_port},
                                                       caf::timespan{kTimeout}, "the worker");
  if (!w.ok())
    return w.status();
  impl_->worker = *w;
  return Status::OK();
}

Status Stranger::assign(uint64_t task, const std::string& dataset, const std::string& token) {
  auto ds = parse_dataset(dataset);
  if (!ds.ok())
    return ds.status();
  msg::assign_task req;
  req.def.task = task;
  req.def.job = task;
  req.def.dataset = "stranger";
  req.def.definition = to_binary(*ds);
  req.def.policy = ShardingPolicy::off;
  req.auth_token = token;
  Status result{ErrorCode::internal, "no reply"};
  caf::scoped_actor self{impl_->sys};
  self->request(impl_->worker, caf::timespan{kTimeout}, std::move(req))
    .receive(
      [&](msg::task_assigned& r) {
        impl_->task = r.handle;
        impl_->task_id = r.task;
        result = Status::OK();
      },
      [&](caf::error& err) { result = msg::to_status(err, "assign_task"); });
  return result;
}

Expected<uint32_t> Stranger::get_elements(uint64_t consumer, const std::string& token) {
  if (!impl_->task)
    return Status{ErrorCode::failed_precondition, "no task assigned"};
  msg::get_elements req;
  req.consumer = consumer;
  req.max_elements = 100;
  req.hold_ns = std::chrono::nanoseconds(std::chrono::seconds(1)).count();
  req.auth_token = token;
  Expected<uint32_t> result{Status{ErrorCode::internal, "no reply"}};
  caf::scoped_actor self{impl_->sys};
  self->request(impl_->task, caf::timespan{kTimeout}, std::move(req))
    .receive([&](msg::element_batch& b) { result = b.num_elements; },
             [&](caf::error& err) { result = msg::to_status(err, "get_elements"); });
  return result;
}

void Stranger::stop(const std::string& token) {
  caf::scoped_actor self{impl_->sys};
  self->send(impl_->worker, msg::stop_task{impl_->task_id, token});
}

Expected<bool> Stranger::drain() {
  Expected<bool> result{Status{ErrorCode::internal, "no reply"}};
  caf::scoped_actor self{impl_->sys};
  self
    ->request(caf::actor_cast<caf::actor>(impl_->worker), caf::timespan{kTimeout},
              msg::drain_atom_v)
    .receive([&](bool drained) { result = drained; },
             [&](caf::error& err) { result = msg::to_status(err, "drain"); });
  return result;
}

Expected<bool> Stranger::send_local_only() {
  if (!impl_->task)
    return Status{ErrorCode::failed_precondition, "no task assigned"};
  caf::scoped_actor self{impl_->sys};
  auto worker = caf::actor_cast<caf::actor>(impl_->worker);
  self->send(worker, msg::tick_atom_v);
  self->send(worker, msg::drained_atom_v);
  self->send(worker, caf::connect_atom_v, std::string{"127.0.0.1:1"});
  auto task = caf::actor_cast<caf::actor>(impl_->task);
  self->send(task, msg::produce_atom_v);
  Expected<bool> result{Status{ErrorCode::internal, "no reply"}};
  self->request(task, caf::timespan{kTimeout}, msg::drained_atom_v)
    .receive([&](bool drained) { result = drained; },
             [&](caf::error& err) { result = msg::to_status(err, "drained_atom"); });
  return result;
}

Status Stranger::tick_dispatcher(uint16_t port) {
  auto d = actors::connect_blocking<msg::dispatcher_actor>(
    impl_->sys, *impl_->transport, HostPort{"127.0.0.1", port}, caf::timespan{kTimeout},
    "the dispatcher");
  if (!d.ok())
    return d.status();
  caf::scoped_actor self{impl_->sys};
  self->send(caf::actor_cast<caf::actor>(*d), msg::tick_atom_v);
  return Status::OK();
}

} // namespace conveyor::testing
