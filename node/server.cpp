#include <caf/scoped_actor.hpp>
// DispatchServer and WorkerServer (conveyor/server.hpp): each owns an actor system, spawns its
// node's entry actor and publishes it through the transport.
#include "conveyor/server.hpp"

#include <algorithm>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <future>
#include <mutex>
#include <thread>

#include <caf/actor_system.hpp>
#include <caf/scoped_actor.hpp>
#include <caf/send.hpp>

#include "dispatcher/dispatcher_actor.hpp"
#include "dispatcher/dispatcher_state.hpp"
#include "worker/executor_scheduled.hpp"
#include "net/frame_guard.hpp"
#include "dispatcher/journal.hpp"
#include "dispatcher/scale_command.hpp"
#include "worker/local_workers.hpp"
#include "node/log.hpp"
#include "node/metrics.hpp"
#include "node/node_config.hpp"
#include "consumer/placement.hpp"
#include "net/transport.hpp"
#include "worker/worker_actor.hpp"
#include "messages/all.hpp"
#include "pipeline/functions/functions.hpp"
#include "pipeline/io/http.hpp"
#include "pipeline/io/path_policy.hpp"
#include "pipeline/runtime/tenant.hpp"

namespace conveyor {

namespace detail {

// What every server node holds: its actor system and a stop flag join() waits for.
class NodeContext {
public:
  explicit NodeContext(const NetworkConfig& network)
    : node(network), sys(node.get()), transport(actors::make_transport(sys, network)) {}

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

  actors::NodeSystem node;
  caf::actor_system& sys;
  std::shared_ptr<actors::Transport> transport;
  uint16_t port = 0;     // the public port (the guard's when there is one)
  uint16_t caf_port = 0; // where CAF listens
  std::string host;
  std::unique_ptr<metrics::Endpoint> metrics; // destroyed before the actor system (declared after)
  std::unique_ptr<actors::FrameGuard> guard;  // closed before the actor system goes

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
  // Registered with the dispatcher (its first registration succeeded): the worker's /readyz.
  std::shared_ptr<std::atomic<bool>> registered = std::make_shared<std::atomic<bool>>(false);
  // The worker's task actors, which run on the process's Executor (worker/executor_scheduled.hpp)
  // and end with the worker: stop() waits for them (bounded), and this waits for the rest (a task
  // that was inside a user function) before the actor system goes, as CAF waits for its own.
  std::shared_ptr<actors::ExecutorActors> task_actors = std::make_shared<actors::ExecutorActors>();
  ~WorkerContext() {
    while (task_actors->live.load() > 0)
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
};

} // namespace detail

namespace {

uint32_t version_or_default(uint32_t v) { return v == 0 ? msg::kProtocolVersion : v; }

// A node's file confinement (--allow-path): null when allow_all_paths (not confined).
Expected<std::shared_ptr<const PathPolicy>> confinement(const std::vector<std::string>& roots,
                                                        bool allow_all, const char* node) {
  if (allow_all)
    return std::shared_ptr<const PathPolicy>{};
  return PathPolicy::make(roots, node);
}

// Logs what `what` may do with files under `paths` (`verb`: "read or write", "list").
void log_confinement(const char* node, const PathPolicy* paths, const std::string& what,
                     const std::string& verb) {
  if (!paths)
    log::warning(node, "file access is not confined (allow_all_paths)");
  else if (paths->roots().empty())
    log::info(node, what + " may not " + verb + " files (no --allow-path given)");
  else
    for (const auto& root : paths->roots())
      log::info(node, what + " may " + verb + " files under " + root);
  if (paths)
    for (const auto& prefix : paths->url_prefixes())
      log::info(node, what + " may read URLs under " + redact_url(prefix));
}

Status positive(std::chrono::milliseconds d, const char* name) {
  if (d.count() > 0)
    return Status::OK();
  return invalid_argument(std::string{"`"} + name + "` must be positive, got " +
                          std::to_string(d.count()) + " ms");
}

// CAF reports every bind failure as `cannot_open_port` with a raw text; binding a probe socket
// the same way tells the common causes apart so the message says what to do.
Status listen_error(caf::actor_system& sys, const caf::error& err, const std::string& who,
                    const std::string& host, uint16_t port, const std::string& flag = "--port") {
  const std::string where = HostPort{host, port}.to_string();
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* found = nullptr;
  std::string bare = host;
  if (bare.size() > 2 && bare.front() == '[' && bare.back() == ']')
    bare = bare.substr(1, bare.size() - 2);
  if (::getaddrinfo(bare.c_str(), std::to_string(port).c_str(), &hints, &found) != 0 || !found)
    return invalid_argument(who + " cannot listen on " + where + ": `--host` " + host +
                            " does not resolve to an address of this machine");
  int probe_errno = 0;
  int fd = ::socket(found->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd >= 0) {
    int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one); // as CAF does
    if (::bind(fd, found->ai_addr, found->ai_addrlen) != 0)
      probe_errno = errno;
    ::close(fd);
  }
  ::freeaddrinfo(found);
  if (probe_errno == EADDRINUSE)
    return io_error(who + " cannot listen on " + where + ": port " + std::to_string(port) +
                    " is already in use by another process (choose another `" + flag +
                    "`, or 0 for a free one)");
  if (probe_errno == EADDRNOTAVAIL)
    return invalid_argument(who + " cannot listen on " + where + ": `--host` " + host +
                            " is not an address of this machine");
  if (probe_errno == EACCES)
    return io_error(who + " cannot listen on " + where +
                    ": permission denied (ports below "
                    "1024 need privileges)");
  return io_error(who + " cannot listen on " + where + ": " + sys.render(err));
}

bool is_wildcard(const std::string& host) {
  return host == "0.0.0.0" || host == "::" || host == "[::]" || host == "0:0:0:0:0:0:0:0";
}

// Publishes through the transport: directly on host:port, or behind the frame guard (CAF on
// 127.0.0.1, the guard on host:port). Sets ctx.port / ctx.caf_port.
template <class Handle>
Status publish_node(detail::NodeContext& ctx, const Handle& whom, const std::string& host,
                    uint16_t port, const GuardConfig& guard, const NetworkConfig& network,
                    const std::string& who) {
  if (!guard.enabled) {
    auto bound = ctx.transport->publish(whom, host, port);
    if (!bound)
      return listen_error(ctx.sys, bound.error(), who, host, port);
    ctx.port = ctx.caf_port = *bound;
    return Status::OK();
  }
  if (guard.max_connections < 1 || guard.max_connections_per_address < 1 ||
      guard.idle_timeout.count() <= 0 || guard.max_frame_bytes < 1024)
    return invalid_argument("the frame guard needs max_connections >= 1, "
                            "max_connections_per_address >= 1, a positive idle_timeout "
                            "and max_frame_bytes >= 1024");
  auto bound = ctx.transport->publish(whom, "127.0.0.1", 0);
  if (!bound)
    return listen_error(ctx.sys, bound.error(), who, "127.0.0.1", 0);
  actors::GuardLimits limits;
  limits.parse_basp = !network.tls();
  limits.max_frame_bytes = guard.max_frame_bytes;
  // Until a peer's node has shown the token, nothing over the small pre-auth cap reaches CAF
  // (which reserves a frame's announced size before any actor checks a token).
  limits.require_admission = !network.auth_token.empty();
  limits.max_connections = guard.max_connections;
  limits.max_connections_per_address = guard.max_connections_per_address;
  limits.idle_timeout = guard.idle_timeout;
  auto g = actors::FrameGuard::start(host, port, *bound, limits, who);
  if (!g.ok()) {
    ctx.transport->unpublish(caf::actor_cast<caf::actor>(whom), *bound);
    return Status{g.status().code(), who + " " + g.status().message()};
  }
  ctx.guard = std::move(*g);
  ctx.caf_port = *bound;
  ctx.port = ctx.guard->port();
  return Status::OK();
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
  CONVEYOR_RETURN_IF_ERROR(validate_security(config_.network));
  CONVEYOR_RETURN_IF_ERROR(positive(config_.worker_timeout, "worker_timeout"));
  CONVEYOR_RETURN_IF_ERROR(positive(config_.job_gc_timeout, "job_gc_timeout"));
  CONVEYOR_RETURN_IF_ERROR(positive(config_.client_timeout, "client_timeout"));
  if (config_.range_split_size <= 0)
    return invalid_argument("`range_split_size` must be positive, got " +
                            std::to_string(config_.range_split_size));
  actors::DispatcherStart start;
  CONVEYOR_RETURN_IF_ERROR(positive(config_.autoscale_interval, "autoscale_interval"));
  start.autoscale_interval = config_.autoscale_interval;
  start.autoscale.min_workers = config_.min_workers;
  start.autoscale.max_workers = config_.max_workers;
  start.autoscale.cooldown_s = std::chrono::duration<double>(config_.scale_cooldown).count();
  if (!config_.scale_command.empty()) {
    CONVEYOR_RETURN_IF_ERROR(actors::ScaleCommand::validate(config_.scale_command));
    CONVEYOR_RETURN_IF_ERROR(actors::validate(start.autoscale));
    start.scale_command = config_.scale_command;
  }
  CONVEYOR_RETURN_IF_ERROR(validate_tenant_caps(config_.tenant_max_workers, "tenant_max_workers"));
  CONVEYOR_RETURN_IF_ERROR(
    validate_tenant_caps(config_.tenant_max_buffer_bytes, "tenant_max_buffer_bytes"));
  start.tenant_max_workers = config_.tenant_max_workers;
  start.tenant_max_buffer_bytes = config_.tenant_max_buffer_bytes;
  auto paths = confinement(config_.allowed_paths, config_.allow_all_paths, "dispatcher");
  if (!paths.ok())
    return paths.status();
  start.paths = std::move(*paths);
  log_confinement("dispatcher", start.paths.get(), "DYNAMIC file sources", "list");
  for (const auto& dir : config_.snapshot_reuse) {
    if (auto allowed =
          check_path(start.paths.get(), dir, PathPolicy::Access::list, "`--snapshot-reuse`");
        !allowed.ok())
      return allowed.with_context("a reused snapshot's chunks are listed by the dispatcher");
    start.snapshot_reuse.push_back(dir);
  }
  for (const auto& a : config_.worker_addresses) {
    // tf.data's template: "host:%port%" matches a worker of that host on any port (one worker
    // per entry; list it as often as the host runs workers).
    static constexpr std::string_view kAnyPort = ":%port%";
    const bool any_port = a.size() > kAnyPort.size() &&
                          a.compare(a.size() - kAnyPort.size(), kAnyPort.size(), kAnyPort) == 0;
    auto addr = parse_address(any_port ? a.substr(0, a.size() - kAnyPort.size()) + ":1" : a);
    if (!addr.ok())
      return addr.status().with_context("`worker_addresses` entry \"" + a + "\"");
    auto normal = addr->to_string();
    if (any_port) {
      start.worker_addresses.push_back(normal.substr(0, normal.rfind(':')) + std::string{kAnyPort});
      continue;
    }
    if (std::find(start.worker_addresses.begin(), start.worker_addresses.end(), normal) !=
        start.worker_addresses.end())
      return invalid_argument("`worker_addresses` names " + normal + " twice");
    start.worker_addresses.push_back(std::move(normal));
  }
  if (!config_.work_dir.empty()) {
    auto restored = std::make_shared<actors::DispatcherState>();
    actors::JournalReplay replay;
    actors::JournalOptions options;
    options.dir = config_.work_dir;
    if (config_.journal_compact_after > 0)
      options.compact_after_records = config_.journal_compact_after;
    options.recover = config_.journal_recover;
    auto journal = actors::Journal::open(options, *restored, &replay);
    if (!journal.ok())
      return journal.status().with_context("opening the journal in --work-dir " + config_.work_dir);
    start.journal = std::shared_ptr<actors::Journal>(std::move(journal).value());
    start.restored = restored;
    log::info("dispatcher", "state is journaled in " + config_.work_dir + " (" +
                              (replay.snapshot_loaded ? "snapshot + " : "") +
                              std::to_string(replay.records) + " record(s) replayed in " +
                              std::to_string(static_cast<int64_t>(replay.seconds * 1000)) + " ms)");
  } else {
    log::info("dispatcher", "state is in memory only (no --work-dir): a restarted dispatcher "
                            "forgets every dataset and job");
  }
  auto ctx = std::make_shared<detail::DispatcherContext>(config_.network);
  actors::ReleaseThreadLogger release{ctx->sys}; // stop() and the destructor may run elsewhere
  start.worker_timeout = config_.worker_timeout;
  start.job_gc_timeout = config_.job_gc_timeout;
  start.client_timeout = config_.client_timeout;
  start.range_split_size = config_.range_split_size;
  start.protocol_version = version_or_default(config_.protocol_version);
  start.auth_token = config_.network.auth_token;
  ctx->dispatcher = actors::spawn_dispatcher(ctx->sys, start);
  if (auto st = publish_node(*ctx, msg::dispatcher_actor{ctx->dispatcher}, config_.bind_host,
                             config_.port, config_.guard, config_.network, "the dispatcher");
      !st.ok()) {
    caf::anon_send_exit(ctx->dispatcher, caf::exit_reason::user_shutdown);
    return st;
  }
  ctx->host = config_.bind_host;
  if (config_.metrics_port >= 0) {
    auto* sys = &ctx->sys;
    auto dispatcher = ctx->dispatcher;
    const std::string token = config_.network.auth_token;
    const std::string mhost =
      config_.metrics_host.empty() ? config_.bind_host : config_.metrics_host;
    auto endpoint = metrics::Endpoint::start(
      mhost, static_cast<uint16_t>(config_.metrics_port),
      [sys, dispatcher, token] {
        // Runs on the exposer's thread at each scrape: one status request, bounded.
        std::vector<metrics::Sample> out;
        caf::scoped_actor self{*sys};
        self->request(dispatcher, std::chrono::seconds(5), msg::get_status{true, token})
          .receive([&](msg::cluster_status& s) { out = metrics::status_samples(s); },
                   [&](caf::error& err) {
                     log::warning("dispatcher", "metrics scrape: " + sys->render(err));
                   });
        return out;
      },
      // Ready: the journal is replayed (before the endpoint starts) and the dispatcher answers.
      [sys, dispatcher, token]() -> std::string {
        std::string why;
        caf::scoped_actor self{*sys};
        self->request(dispatcher, std::chrono::seconds(2), msg::get_status{false, token})
          .receive(
            [](msg::cluster_status&) {},
            [&](caf::error& err) { why = "the dispatcher does not answer: " + sys->render(err); });
        return why;
      });
    if (!endpoint.ok()) {
      ctx->guard.reset();
      ctx->transport->unpublish(caf::actor_cast<caf::actor>(ctx->dispatcher), ctx->caf_port);
      caf::anon_send_exit(ctx->dispatcher, caf::exit_reason::user_shutdown);
      return endpoint.status();
    }
    ctx->metrics = std::move(endpoint).value();
    log::info("dispatcher", "metrics on http://" +
                              HostPort{mhost, ctx->metrics->port()}.to_string() + "/metrics");
  }
  ctx_ = std::move(ctx);
  log::info("dispatcher", "listening on " + target());
  log::info("dispatcher", std::string{"security: "} +
                            (config_.network.tls() ? "mutual TLS" : "plain TCP (no TLS)") + ", " +
                            (config_.network.auth_token.empty() ? "no admission token"
                                                                : "admission token required"));
  return Status::OK();
}

uint16_t DispatchServer::bound_port() const { return ctx_ ? ctx_->port : 0; }

uint16_t DispatchServer::metrics_port() const {
  return ctx_ && ctx_->metrics ? ctx_->metrics->port() : 0;
}

uint16_t WorkerServer::metrics_port() const {
  return ctx_ && ctx_->metrics ? ctx_->metrics->port() : 0;
}

std::string DispatchServer::target() const {
  return ctx_ ? HostPort{ctx_->host, ctx_->port}.to_string() : std::string{};
}

void DispatchServer::stop() {
  if (!ctx_ || ctx_->is_stopped())
    return;
  ctx_->metrics.reset(); // no scrape may wait on a dispatcher that is going away
  ctx_->guard.reset();
  ctx_->transport->unpublish(caf::actor_cast<caf::actor>(ctx_->dispatcher), ctx_->caf_port);
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
  if (is_wildcard(config_.bind_host) && config_.advertised_address.empty())
    return invalid_argument("the worker binds the wildcard address " + config_.bind_host +
                            " but has no advertised address: consumers cannot connect to " +
                            config_.bind_host +
                            "; give `--advertise HOST:PORT` (e.g. the pod IP and \"%port%\") or "
                            "bind a concrete `--host`");
  CONVEYOR_RETURN_IF_ERROR(validate_security(config_.network));
  if (config_.job_memory_limit < 0)
    return invalid_argument("`job_memory_limit` must be at least 0 (0 = none), got " +
                            std::to_string(config_.job_memory_limit));
  if (config_.memory_limit < 0)
    return invalid_argument("`memory_limit` must be at least 0 (0 = none), got " +
                            std::to_string(config_.memory_limit));
  if (config_.max_concurrent_snapshots < 0)
    return invalid_argument("`max_concurrent_snapshots` must be at least 0 (0 = no limit), got " +
                            std::to_string(config_.max_concurrent_snapshots));
  CONVEYOR_RETURN_IF_ERROR(positive(config_.heartbeat_interval, "heartbeat_interval"));
  CONVEYOR_RETURN_IF_ERROR(positive(config_.connect_timeout, "connect_timeout"));
  CONVEYOR_RETURN_IF_ERROR(positive(config_.dispatcher_timeout, "dispatcher_timeout"));
  if (config_.task_buffer_elements <= 0 || config_.task_buffer_bytes <= 0)
    return invalid_argument("`task_buffer_elements` and `task_buffer_bytes` must be positive");
  CONVEYOR_RETURN_IF_ERROR(
    actors::validate_worker_tags(config_.worker_tags).with_context("`worker_tags`"));
  if (config_.cross_trainer_cache_size_bytes <= 0)
    return invalid_argument("`cross_trainer_cache_size_bytes` must be positive, got " +
                            std::to_string(config_.cross_trainer_cache_size_bytes));
  for (const auto& plugin : config_.plugins)
    CONVEYOR_RETURN_IF_ERROR(
      FunctionRegistry::global().load_plugin(plugin).with_context("loading plugin " + plugin));

  auto confined = confinement(config_.allowed_paths, config_.allow_all_paths, "worker");
  if (!confined.ok())
    return confined.status();
  const std::shared_ptr<const PathPolicy> paths = std::move(*confined);

  auto ctx = std::make_shared<detail::WorkerContext>(config_.network);
  actors::ReleaseThreadLogger release{ctx->sys}; // stop() and the destructor may run elsewhere
  auto registered = std::make_shared<std::promise<Status>>();
  auto outcome = registered->get_future();
  actors::WorkerStart start;
  start.transport = ctx->transport;
  start.dispatcher = *dispatcher;
  start.heartbeat_interval = config_.heartbeat_interval;
  start.connect_timeout = config_.connect_timeout;
  start.dispatcher_timeout = config_.dispatcher_timeout;
  start.task_limits.buffer_elements = config_.task_buffer_elements;
  start.task_limits.buffer_bytes = config_.task_buffer_bytes;
  start.task_limits.paths = paths;
  start.task_limits.memory_limit = config_.job_memory_limit;
  start.max_snapshot_streams = config_.max_concurrent_snapshots;
  if (config_.memory_limit > 0) // one budget for the worker, the parent of every job's
    start.task_limits.process_memory = std::make_shared<MemoryBudget>(
      config_.memory_limit, nullptr, "--memory-limit", "the worker's (all jobs together)");
  start.task_limits.cross_trainer_cache_bytes = config_.cross_trainer_cache_size_bytes;
  start.auth_token = config_.network.auth_token;
  start.task_executor = ctx->task_actors;
  start.tags = config_.worker_tags;
  start.local_registry = config_.in_process_reads; // consumers here read it in-process
  start.protocol_version = version_or_default(config_.protocol_version);
  start.on_first_registration = [registered, ready = ctx->registered](Status s) {
    if (s.ok())
      ready->store(true);
    registered->set_value(std::move(s));
  };
  // The bulk data path's server (net/bulk.hpp); without one, elements travel inline.
  if (auto bulk = ctx->transport->serve_bulk(config_.bind_host, config_.bulk_port); bulk) {
    start.bulk = *bulk;
    log::info("worker", "bulk data path on " + config_.bind_host + ":" +
                          std::to_string(bulk->port) +
                          (config_.network.tls() ? " (mutual TLS)" : " (plain TCP)"));
  } else if (config_.bulk_port != 0) {
    return listen_error(ctx->sys, bulk.error(), "the worker's bulk data path", config_.bind_host,
                        config_.bulk_port, "--bulk-port");
  } else
    log::warning("worker",
                 "no bulk data path (elements travel inline): " + ctx->sys.render(bulk.error()));
  caf::actor bulk_actor = start.bulk.actor;
  ctx->worker = actors::spawn_worker(ctx->sys, std::move(start));
  bool listed_local = false;
  auto fail = [&](Status s) {
    if (listed_local)
      actors::LocalWorkers::remove(ctx->advertised);
    caf::anon_send_exit(ctx->worker, caf::exit_reason::user_shutdown);
    return s;
  };
  if (auto st = publish_node(*ctx, msg::worker_actor{ctx->worker}, config_.bind_host, config_.port,
                             config_.guard, config_.network, "the worker");
      !st.ok())
    return fail(st);
  ctx->host = config_.bind_host;
  ctx->advertised = config_.advertised_address;
  if (ctx->advertised.empty())
    ctx->advertised = HostPort{ctx->host, ctx->port}.to_string();
  if (auto p = ctx->advertised.find("%port%"); p != std::string::npos)
    ctx->advertised.replace(p, 6, std::to_string(ctx->port));
  if (auto a = parse_address(ctx->advertised); !a.ok())
    return fail(a.status().with_context("`advertised_address`"));
  log::info("worker", "listening on " + HostPort{ctx->host, ctx->port}.to_string());
  if (config_.metrics_port >= 0) {
    const std::string mhost =
      config_.metrics_host.empty() ? config_.bind_host : config_.metrics_host;
    auto endpoint = metrics::Endpoint::start(
      mhost, static_cast<uint16_t>(config_.metrics_port), [] { return metrics::task_samples(); },
      [ready = ctx->registered, d = dispatcher->to_string()]() -> std::string {
        return ready->load() ? std::string{}
                             : "not registered with the dispatcher at " + d + " yet";
      });
    if (!endpoint.ok())
      return fail(endpoint.status());
    ctx->metrics = std::move(endpoint).value();
    log::info("worker", "metrics on http://" + HostPort{mhost, ctx->metrics->port()}.to_string() +
                          "/metrics");
  }
  log_confinement("worker", paths.get(), "datasets", "read or write");
  if (config_.in_process_reads) {
    if (actors::LocalWorkers::contains(ctx->advertised))
      return fail(Status(ErrorCode::already_exists, "a worker advertising " + ctx->advertised +
                                                      " already runs in this process"));
    actors::LocalWorkers::add(ctx->advertised, bulk_actor);
    listed_local = true;
  }
  // As the worker itself: connect_atom is accepted only from an actor of this node.
  caf::send_as(caf::actor_cast<caf::actor>(ctx->worker), caf::actor_cast<caf::actor>(ctx->worker),
               caf::connect_atom_v, ctx->advertised);
  // The worker actor retries for dispatcher_timeout, each attempt bounded by connect_timeout.
  auto limit = config_.dispatcher_timeout + 2 * config_.connect_timeout + std::chrono::seconds(1);
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

Status WorkerServer::drain(std::chrono::milliseconds timeout) {
  if (!ctx_ || ctx_->is_stopped())
    return failed_precondition("the worker is not running");
  actors::ReleaseThreadLogger release{ctx_->sys}; // declared first: it runs after ~scoped_actor
  caf::scoped_actor self{ctx_->sys};
  Status result;
  self->request(ctx_->worker, timeout, msg::drain_atom_v)
    .receive([](bool) {},
             [&](caf::error& err) {
               result = msg::to_status(err, "draining the worker")
                          .with_context("waited " + std::to_string(timeout.count()) + " ms");
             });
  // (An endless OFF task's `retired` mark is acknowledged by its consumers before its drain
  // completes: stop() right after cannot close the connection under the mark.)
  return result;
}

void WorkerServer::stop() {
  if (!ctx_ || ctx_->is_stopped())
    return;
  if (config_.in_process_reads)
    actors::LocalWorkers::remove(ctx_->advertised);
  ctx_->metrics.reset();
  ctx_->guard.reset();
  ctx_->transport->unpublish(caf::actor_cast<caf::actor>(ctx_->worker), ctx_->caf_port);
  caf::anon_send_exit(ctx_->worker, caf::exit_reason::user_shutdown);
  // Tasks (on the Executor) end with the worker. Their last messages must leave through the
  // middleman while it still runs: a message stuck in a stopped middleman keeps its sender
  // alive, and the actor system's destructor then waits forever for that task. A task blocked
  // inside a user function is waited for only this long here (the actor system's destructor
  // waits for it to terminate anyway; ~WorkerContext for its last resume to return).
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (ctx_->task_actors->live.load() > 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  log::info("worker", "stopped");
  ctx_->mark_stopped();
}

void WorkerServer::join() {
  if (ctx_)
    ctx_->wait_stopped();
}

} // namespace conveyor
