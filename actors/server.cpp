// DispatchServer and WorkerServer (conveyor/server.hpp): each owns an actor system, spawns its
// node's entry actor and publishes it through the transport.
#include "conveyor/server.hpp"

#include <algorithm>
#include <condition_variable>
#include <future>
#include <mutex>

#include <caf/actor_system.hpp>
#include <caf/send.hpp>

#include "actors/dispatcher_actor.hpp"
#include "actors/log.hpp"
#include "actors/node_config.hpp"
#include "actors/transport.hpp"
#include "actors/worker_actor.hpp"
#include "messages/all.hpp"
#include "pipeline/functions.hpp"

namespace conveyor {

namespace detail {

// What every server node holds: its actor system (declared after its config, which it reads)
// and a stop flag join() waits for.
class NodeContext {
public:
  explicit NodeContext(const NetworkConfig& network)
    : cfg(network), sys(cfg), transport(actors::make_tcp_transport(sys)) {}

  void mark_stopped() {
    {
      std::lock_guard<std::mutex> guard{mu};
      stopped = true;
    }
    cv.notify_all();
  }
  bool is_stopped() {
    std::lock_guard<std::mutex> guard{mu};
    return stopped;
  }
  void wait_stopped() {
    std::unique_lock<std::mutex> lock{mu};
    cv.wait(lock, [this] { return stopped; });
  }

  actors::NodeConfig cfg;
  caf::actor_system sys;
  std::shared_ptr<actors::Transport> transport;
  uint16_t port = 0;
  std::string host;

private:
  std::mutex mu;
  std::condition_variable cv;
  bool stopped = false;
};

class DispatcherContext : public NodeContext {
public:
  using NodeContext::NodeContext;
  actors::dispatcher_full_actor dispatcher;
};

class WorkerContext : public NodeContext {
public:
  using NodeContext::NodeContext;
  actors::worker_full_actor worker;
  std::string advertised;
};

} // namespace detail

namespace {

uint32_t version_or_default(uint32_t v) { return v == 0 ? msg::kProtocolVersion : v; }

Status positive(std::chrono::milliseconds d, const char* name) {
  if (d.count() > 0)
    return Status::OK();
  return invalid_argument(std::string{"`"} + name + "` must be positive, got " +
                          std::to_string(d.count()) + " ms");
}

Status listen_error(caf::actor_system& sys, const caf::error& err, const std::string& who,
                    const std::string& host, uint16_t port) {
  return io_error(who + " cannot listen on " + HostPort{host, port}.to_string() + ": " +
                  sys.render(err));
}

} // namespace

// --- DispatchServer

DispatchServer::DispatchServer(DispatcherConfig config) : config_(std::move(config)) {}

DispatchServer::~DispatchServer() {
  stop();
  ctx_.reset(); // ~actor_system waits for the (exiting) actors
}

Status DispatchServer::start() {
  if (ctx_)
    return failed_precondition("the dispatcher was already started");
  if (config_.bind_host.empty())
    return invalid_argument("`bind_host` must not be empty");
  CONVEYOR_RETURN_IF_ERROR(positive(config_.worker_timeout, "worker_timeout"));
  CONVEYOR_RETURN_IF_ERROR(positive(config_.job_gc_timeout, "job_gc_timeout"));
  if (config_.range_split_size <= 0)
    return invalid_argument("`range_split_size` must be positive, got " +
                            std::to_string(config_.range_split_size));
  actors::DispatcherStart start;
  for (const auto& a : config_.worker_addresses) {
    auto addr = parse_address(a);
    if (!addr.ok())
      return addr.status().with_context("`worker_addresses` entry \"" + a + "\"");
    auto normal = addr->to_string();
    if (std::find(start.worker_addresses.begin(), start.worker_addresses.end(), normal) !=
        start.worker_addresses.end())
      return invalid_argument("`worker_addresses` names " + normal + " twice");
    start.worker_addresses.push_back(std::move(normal));
  }
  auto ctx = std::make_shared<detail::DispatcherContext>(config_.network);
  start.worker_timeout = config_.worker_timeout;
  start.job_gc_timeout = config_.job_gc_timeout;
  start.range_split_size = config_.range_split_size;
  start.protocol_version = version_or_default(config_.protocol_version);
  ctx->dispatcher = actors::spawn_dispatcher(ctx->sys, start);
  auto port = ctx->transport->publish(msg::dispatcher_actor{ctx->dispatcher}, config_.bind_host,
                                      config_.port);
  if (!port) {
    caf::anon_send_exit(ctx->dispatcher, caf::exit_reason::user_shutdown);
    return listen_error(ctx->sys, port.error(), "the dispatcher", config_.bind_host, config_.port);
  }
  ctx->port = *port;
  ctx->host = config_.bind_host;
  ctx_ = std::move(ctx);
  if (!config_.work_dir.empty())
    log::info("dispatcher", "work_dir " + config_.work_dir +
                              " accepted; journaling is not implemented yet");
  log::info("dispatcher", "listening on " + target());
  return Status::OK();
}

uint16_t DispatchServer::bound_port() const { return ctx_ ? ctx_->port : 0; }

std::string DispatchServer::target() const {
  return ctx_ ? HostPort{ctx_->host, ctx_->port}.to_string() : std::string{};
}

void DispatchServer::stop() {
  if (!ctx_ || ctx_->is_stopped())
    return;
  ctx_->transport->unpublish(caf::actor_cast<caf::actor>(ctx_->dispatcher), ctx_->port);
  caf::anon_send_exit(ctx_->dispatcher, caf::exit_reason::user_shutdown);
  log::info("dispatcher", "stopped");
  ctx_->mark_stopped();
}

void DispatchServer::join() {
  if (ctx_)
    ctx_->wait_stopped();
}

// --- WorkerServer

WorkerServer::WorkerServer(WorkerConfig config) : config_(std::move(config)) {}

WorkerServer::~WorkerServer() {
  stop();
  ctx_.reset();
}

Status WorkerServer::start() {
  if (ctx_)
    return failed_precondition("the worker was already started");
  auto dispatcher = parse_address(config_.dispatcher_address);
  if (!dispatcher.ok())
    return dispatcher.status().with_context("`dispatcher_address`");
  if (config_.bind_host.empty())
    return invalid_argument("`bind_host` must not be empty");
  CONVEYOR_RETURN_IF_ERROR(positive(config_.heartbeat_interval, "heartbeat_interval"));
  CONVEYOR_RETURN_IF_ERROR(positive(config_.connect_timeout, "connect_timeout"));
  if (config_.task_buffer_elements <= 0 || config_.task_buffer_bytes <= 0)
    return invalid_argument("`task_buffer_elements` and `task_buffer_bytes` must be positive");
  for (const auto& plugin : config_.plugins)
    CONVEYOR_RETURN_IF_ERROR(
      FunctionRegistry::global().load_plugin(plugin).with_context("loading plugin " + plugin));

  auto ctx = std::make_shared<detail::WorkerContext>(config_.network);
  auto registered = std::make_shared<std::promise<Status>>();
  auto outcome = registered->get_future();
  actors::WorkerStart start;
  start.transport = ctx->transport;
  start.dispatcher = *dispatcher;
  start.heartbeat_interval = config_.heartbeat_interval;
  start.connect_timeout = config_.connect_timeout;
  start.task_limits.buffer_elements = config_.task_buffer_elements;
  start.task_limits.buffer_bytes = config_.task_buffer_bytes;
  start.detached_tasks = config_.detached_tasks;
  start.protocol_version = version_or_default(config_.protocol_version);
  start.on_first_registration = [registered](Status s) { registered->set_value(std::move(s)); };
  ctx->worker = actors::spawn_worker(ctx->sys, std::move(start));
  auto fail = [&](Status s) {
    caf::anon_send_exit(ctx->worker, caf::exit_reason::user_shutdown);
    return s;
  };
  auto port = ctx->transport->publish(msg::worker_actor{ctx->worker}, config_.bind_host,
                                      config_.port);
  if (!port)
    return fail(listen_error(ctx->sys, port.error(), "the worker", config_.bind_host,
                             config_.port));
  ctx->port = *port;
  ctx->host = config_.bind_host;
  ctx->advertised = config_.advertised_address;
  if (ctx->advertised.empty())
    ctx->advertised = HostPort{ctx->host, ctx->port}.to_string();
  if (auto p = ctx->advertised.find("%port%"); p != std::string::npos)
    ctx->advertised.replace(p, 6, std::to_string(ctx->port));
  if (auto a = parse_address(ctx->advertised); !a.ok())
    return fail(a.status().with_context("`advertised_address`"));
  log::info("worker", "listening on " + HostPort{ctx->host, ctx->port}.to_string());
  caf::anon_send(ctx->worker, caf::connect_atom_v, ctx->advertised);
  // Connecting and registering are each bounded by connect_timeout in the worker actor.
  auto limit = 2 * config_.connect_timeout + std::chrono::seconds(1);
  if (outcome.wait_for(limit) != std::future_status::ready)
    return fail(Status{ErrorCode::deadline_exceeded,
                       "registering with the dispatcher at " + dispatcher->to_string() +
                         " did not finish within " + std::to_string(limit.count()) + " ms"});
  Status s = outcome.get();
  if (!s.ok())
    return fail(s);
  ctx_ = std::move(ctx);
  return Status::OK();
}

uint16_t WorkerServer::bound_port() const { return ctx_ ? ctx_->port : 0; }

std::string WorkerServer::worker_address() const { return ctx_ ? ctx_->advertised : std::string{}; }

void WorkerServer::stop() {
  if (!ctx_ || ctx_->is_stopped())
    return;
  ctx_->transport->unpublish(caf::actor_cast<caf::actor>(ctx_->worker), ctx_->port);
  caf::anon_send_exit(ctx_->worker, caf::exit_reason::user_shutdown);
  log::info("worker", "stopped");
  ctx_->mark_stopped();
}

void WorkerServer::join() {
  if (ctx_)
    ctx_->wait_stopped();
}

} // namespace conveyor
