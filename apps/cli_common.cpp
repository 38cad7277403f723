#include "apps/cli_common.hpp"

#include "apps/config_file.hpp"

#include "net/admission.hpp"
#include "node/log.hpp"
#include "pipeline/functions/functions.hpp"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>

namespace conveyor::apps {

namespace {
const char* g_single_command_program = nullptr; // set_single_command_program
} // namespace

void set_single_command_program(const char* program) { g_single_command_program = program; }

std::string command_label(const char* command) {
  if (g_single_command_program != nullptr)
    return g_single_command_program;
  return std::string{"conveyor "} + command;
}

std::optional<int> parse_command_line(const CommandInfo& info,
                                      const po::options_description& options,
                                      const std::vector<std::string>& args, po::variables_map& vm,
                                      const po::options_description* hidden) {
  po::options_description common("common options");
  // clang-format off
  common.add_options()
      ("help,h", "print this help and exit")
      ("config", po::value<std::string>()->value_name("FILE"),
       "read flags from FILE: one `name = value` per line, names as the long flags without "
       "`--`; flags given on the command line win");
  // clang-format on
  log::set_node(info.name);
  po::options_description visible;
  visible.add(options).add(common);
  po::options_description all;
  all.add(visible);
  if (hidden)
    all.add(*hidden);

  try {
    // Command line first: po::store never overwrites a value that is already stored, so the
    // config file stored afterwards only fills in what the flags left out.
    const auto parsed = po::command_line_parser(args).options(all).run();
    // Without a positional description boost keeps words that belong to no flag as nameless
    // options, which po::store then drops: `conveyor worker ... stray` would run as if the word
    // were not there. No command here takes positional arguments, so any such word is refused.
    for (const auto& option : parsed.options)
      if (option.position_key >= 0 || option.string_key.empty()) {
        const std::string word =
          option.original_tokens.empty() ? std::string{} : option.original_tokens.front();
        return report_error(info.name,
                            "unexpected argument \"" + word +
                              "\": every argument is a `--flag` "
                              "or the value of one (see " +
                              command_label(info.name) + " --help)",
                            kExitBadArguments);
      }
    po::store(parsed, vm);
    if (vm.count("help")) {
      std::cout << "usage: " << command_label(info.name) << " " << info.synopsis << "\n\n"
                << info.summary << "\n\n"
                << options << "\n"
                << common << std::flush;
      return kExitOk;
    }
    if (vm.count("config")) {
      const auto path = vm["config"].as<std::string>();
      auto text = read_config_file(path);
      if (!text.ok())
        return report_error(info.name, text.status().message(), kExitBadArguments);
      std::istringstream in(*text);
      po::store(po::parse_config_file(in, all, /*allow_unregistered=*/false), vm);
    }
    po::notify(vm);
  } catch (const po::error& e) {
    return report_error(info.name,
                        std::string(e.what()) + " (see " + command_label(info.name) + " --help)",
                        kExitBadArguments);
  }
  return std::nullopt;
}

std::FILE* take_stdout_for_data() {
  std::fflush(stdout);
  const int data_fd = ::fcntl(STDOUT_FILENO, F_DUPFD_CLOEXEC, 3);
  if (data_fd < 0)
    return stdout;
  std::FILE* data = ::fdopen(data_fd, "w");
  if (data == nullptr || ::dup2(STDERR_FILENO, STDOUT_FILENO) < 0) {
    if (data != nullptr)
      std::fclose(data);
    else
      ::close(data_fd);
    return stdout;
  }
  return data;
}

int report_error(const char* command, const std::string& message, int exit_code) {
  // Under `--log-format json` (or CONVEYOR_LOG_FORMAT=json) a collector reads stderr as one JSON
  // object per line: the final error is one of them, not a plain line among them.
  if (log::format() == log::Format::json)
    log::error(command, message);
  else
    std::fprintf(stderr, "%s: %s\n", command_label(command).c_str(), message.c_str());
  return exit_code;
}

int exit_code_for(const Status& status) {
  switch (status.code()) {
    case ErrorCode::invalid_argument:
    case ErrorCode::out_of_range:
    case ErrorCode::unimplemented:
    case ErrorCode::not_found:      // e.g. an unknown function (an unknown `read --dataset-id` is
                                    // the dispatcher's answer: cmd_read.cpp exits 1 for it)
    case ErrorCode::already_exists: // e.g. a requested dataset id naming another definition
      return kExitBadArguments;
    default: return kExitFailure;
  }
}

int report_status(const char* command, const Status& status) {
  return report_error(command, status.to_string(), exit_code_for(status));
}

Status check_host(const std::string& flag, const std::string& host) {
  if (host.empty())
    return invalid_argument("`" + flag + "` needs a host name or address, got an empty one");
  if (host.find_first_of(" \t\n/[]") != std::string::npos)
    return invalid_argument("`" + flag + "` host \"" + host + "\" is not a host name or address");
  return Status::OK();
}

Expected<uint16_t> check_port(const std::string& flag, int64_t value) {
  if (value < 0 || value > 65535)
    return invalid_argument("`" + flag + "` must be a port in 0..65535, got " +
                            std::to_string(value));
  return static_cast<uint16_t>(value);
}

void add_log_level_option(po::options_description& options, const char* default_level) {
  // clang-format off
  options.add_options()
      ("log-level", po::value<std::string>()->default_value(default_level)->value_name("LEVEL"),
       "what the node logs to stderr: error, warning, info or debug (the environment variable "
       "CONVEYOR_LOG_LEVEL sets it when this flag is not given)")
      ("log-format", po::value<std::string>()->default_value("text")->value_name("FORMAT"),
       "log line format: text (timestamp, level, node, pid, message) or json (one object per "
       "line, for log collectors; CONVEYOR_LOG_FORMAT sets it when this flag is not given)");
  // clang-format on
}

Status load_plugin_flags(const po::variables_map& vm) {
  if (vm.count("plugin") == 0)
    return Status::OK();
  for (const auto& lib : vm["plugin"].as<std::vector<std::string>>())
    if (auto st = FunctionRegistry::global().load_plugin(lib); !st.ok())
      return Status(st.code(), "`--plugin` " + lib + ": " + st.message());
  return Status::OK();
}

Status apply_log_level(const po::variables_map& vm) {
  // CONVEYOR_LOG_LEVEL / CONVEYOR_LOG_FORMAT (read by the logger) win over the defaults, not
  // over an explicit flag. A bad environment value is an error too, not silently ignored.
  if (const char* env = std::getenv("CONVEYOR_LOG_LEVEL"); env && !log::level_from_string(env))
    return invalid_argument(
      std::string{"CONVEYOR_LOG_LEVEL must be error, warning, info or debug, got \""} + env + "\"");
  if (const char* env = std::getenv("CONVEYOR_LOG_FORMAT"); env && !log::format_from_string(env))
    return invalid_argument(std::string{"CONVEYOR_LOG_FORMAT must be text or json, got \""} + env +
                            "\"");
  if (vm.count("log-level") &&
      !(vm["log-level"].defaulted() && std::getenv("CONVEYOR_LOG_LEVEL"))) {
    const auto& name = vm["log-level"].as<std::string>();
    const auto level = log::level_from_string(name);
    if (!level)
      return invalid_argument("`--log-level` must be error, warning, info or debug, got \"" + name +
                              "\"");
    log::set_level(*level);
  }
  if (vm.count("log-format") &&
      !(vm["log-format"].defaulted() && std::getenv("CONVEYOR_LOG_FORMAT"))) {
    const auto& name = vm["log-format"].as<std::string>();
    const auto format = log::format_from_string(name);
    if (!format)
      return invalid_argument("`--log-format` must be text or json, got \"" + name + "\"");
    log::set_format(*format);
  }
  return Status::OK();
}

void add_metrics_options(po::options_description& options) {
  // clang-format off
  options.add_options()
      ("metrics-port", po::value<int64_t>()->default_value(-1)->value_name("PORT"),
       "serve Prometheus metrics at http://HOST:PORT/metrics (-1 = off, 0 = a free port; the "
       "chosen one is logged as `metrics on http://...`)")
      ("metrics-host", po::value<std::string>()->default_value("")->value_name("HOST"),
       "address the metrics endpoint binds (default: the same as `--host`)");
  // clang-format on
}

Status apply_metrics_options(const po::variables_map& vm, int& port, std::string& host) {
  const int64_t p = vm["metrics-port"].as<int64_t>();
  if (p < -1 || p > 65535)
    return invalid_argument("`--metrics-port` must be -1 (off) or a port in 0..65535, got " +
                            std::to_string(p));
  host = vm["metrics-host"].as<std::string>();
  if (!host.empty())
    CONVEYOR_RETURN_IF_ERROR(check_host("--metrics-host", host));
  else if (!vm["metrics-host"].defaulted())
    return invalid_argument("`--metrics-host` needs a host name or address, got an empty one");
  if (p == -1 && !vm["metrics-host"].defaulted())
    return invalid_argument("`--metrics-host` needs `--metrics-port`");
  port = static_cast<int>(p);
  return Status::OK();
}

void add_security_options(po::options_description& options) {
  // clang-format off
  options.add_options()
      ("tls-cert", po::value<std::string>()->value_name("PEM"),
       "this node's certificate (signed by --tls-ca); with --tls-key and --tls-ca every connection "
       "is mutual TLS")
      ("tls-key", po::value<std::string>()->value_name("PEM"), "this node's private key")
      ("tls-ca", po::value<std::string>()->value_name("PEM"),
       "the CA certificate every peer's certificate must be signed by")
      ("auth-token", po::value<std::string>()->value_name("TOKEN"),
       "admission token: the dispatcher requires it, workers and clients present it (visible in "
       "the process list: prefer --token-file or CONVEYOR_AUTH_TOKEN)")
      ("token-file", po::value<std::string>()->value_name("FILE"),
       "read the admission token from the first line of FILE (mode 600)");
  // clang-format on
}

Status apply_security_options(const po::variables_map& vm, NetworkConfig& network) {
  auto get = [&](const char* name) {
    return vm.count(name) ? vm[name].as<std::string>() : std::string{};
  };
  network.tls_cert = get("tls-cert");
  network.tls_key = get("tls-key");
  network.tls_ca = get("tls-ca");
  CONVEYOR_RETURN_IF_ERROR(validate_security(network));
  // An empty value would read as "no token" and quietly leave the cluster open.
  if (vm.count("auth-token") && get("auth-token").empty())
    return invalid_argument("`--auth-token` is empty: give the token, or leave the flag out to run "
                            "without an admission token");
  if (vm.count("token-file") && get("token-file").empty())
    return invalid_argument("`--token-file` needs a file name, got an empty one");
  auto token = actors::load_auth_token(get("auth-token"), get("token-file"));
  if (!token.ok())
    return token.status();
  network.auth_token = *token;
  return Status::OK();
}

void add_scheduler_option(po::options_description& options) {
  // clang-format off
  options.add_options()
      ("scheduler-threads", po::value<int64_t>()->default_value(0)->value_name("N"),
       "threads of this node's actor scheduler, which handles messages (pipelines have their own "
       "threads); 0 = CAF's default: one per core, at least 4");
  // clang-format on
}

Status apply_scheduler_option(const po::variables_map& vm, NetworkConfig& network) {
  const int64_t n = vm["scheduler-threads"].as<int64_t>();
  if (n < 0 || n > 1024)
    return invalid_argument("`--scheduler-threads` must be in 0..1024 (0 = CAF's default: one per "
                            "core, at least 4), got " +
                            std::to_string(n));
  network.scheduler_threads = static_cast<std::size_t>(n);
  return Status::OK();
}

std::optional<int> parse_bench_command_line(const CommandInfo& info,
                                            po::options_description& options,
                                            const std::vector<std::string>& args,
                                            po::variables_map& vm, const char* log_level,
                                            NetworkConfig* network) {
  if (network)
    add_scheduler_option(options);
  add_log_level_option(options, log_level);
  if (auto stop = parse_command_line(info, options, args, vm))
    return stop;
  Status st = apply_log_level(vm);
  if (st.ok() && network)
    st = apply_scheduler_option(vm, *network);
  if (!st.ok())
    return report_status(info.name, st);
  return std::nullopt;
}

void add_guard_options(po::options_description& options) {
  GuardConfig d;
  // clang-format off
  options.add_options()
      ("no-frame-guard", po::bool_switch(),
       "let CAF accept connections on the public port itself (no frame-size check in front of it, "
       "no connection cap, idle connections kept)")
      ("max-frame-bytes", po::value<int64_t>()->default_value(d.max_frame_bytes)->value_name("BYTES"),
       "largest BASP frame a peer may send; a larger announced length closes its connection "
       "before anything is allocated (plain connections only: the guard cannot read TLS "
       "frames, so it is refused with --tls-*)")
      ("max-connections", po::value<int64_t>()->default_value(d.max_connections)->value_name("N"),
       "open connections accepted at once; more are closed at once (a warning says so, at most "
       "once per 5 s; TLS too)")
      ("max-connections-per-address", po::value<int64_t>()->default_value(d.max_connections_per_address)->value_name("N"),
       "open connections accepted at once from one peer IP; more are closed at once (a warning "
       "names the address, at most once per 5 s; TLS too)")
      ("idle-timeout", po::value<int64_t>()->default_value(d.idle_timeout.count())->value_name("MS"),
       "close a connection silent in both directions for this long (TLS too)");
  // clang-format on
}

Status apply_guard_options(const po::variables_map& vm, GuardConfig& guard,
                           const NetworkConfig& network) {
  guard.enabled = !vm["no-frame-guard"].as<bool>();
  // Given explicitly (command line or config file), not just the default.
  const auto given = [&](const char* name) { return vm.count(name) && !vm[name].defaulted(); };
  // Each limit is the guard's: without the guard nothing would apply it.
  if (!guard.enabled)
    for (const char* name :
         {"max-frame-bytes", "max-connections", "max-connections-per-address", "idle-timeout"})
      if (given(name))
        return invalid_argument(std::string{"`--"} + name +
                                "` is a limit of the frame guard, which "
                                "`--no-frame-guard` turns off: give one of the two, not both");
  // Under TLS the guard forwards encrypted bytes and cannot see BASP frames (net/frame_guard.hpp):
  // it still caps connections and closes idle ones, but checks no frame size.
  if (guard.enabled && network.tls() && given("max-frame-bytes"))
    return invalid_argument(
      "`--max-frame-bytes` has no effect with TLS (`--tls-*`): the frame guard "
      "cannot read encrypted frames, so it only applies `--max-connections` "
      "and `--idle-timeout` there; leave `--max-frame-bytes` out");
  const int64_t frame = vm["max-frame-bytes"].as<int64_t>();
  if (frame < 1024 || frame > int64_t{UINT32_MAX})
    return invalid_argument("`--max-frame-bytes` must be in 1024..4294967295, got " +
                            std::to_string(frame));
  guard.max_frame_bytes = static_cast<uint32_t>(frame);
  const int64_t conns = vm["max-connections"].as<int64_t>();
  if (conns < 1 || conns > 100000)
    return invalid_argument("`--max-connections` must be in 1..100000, got " +
                            std::to_string(conns));
  guard.max_connections = static_cast<int>(conns);
  const int64_t per_address = vm["max-connections-per-address"].as<int64_t>();
  if (per_address < 1 || per_address > 100000)
    return invalid_argument("`--max-connections-per-address` must be in 1..100000, got " +
                            std::to_string(per_address));
  guard.max_connections_per_address = static_cast<int>(per_address);
  auto idle = check_millis("--idle-timeout", vm["idle-timeout"].as<int64_t>());
  if (!idle.ok())
    return idle.status();
  guard.idle_timeout = *idle;
  return Status::OK();
}

Expected<HostPort> parse_address_flag(const std::string& flag, const std::string& text) {
  auto address = parse_address(text);
  if (!address.ok())
    return Status(address.status().code(), "`" + flag + "`: " + address.status().message());
  return address;
}

Expected<std::chrono::milliseconds> check_millis(const std::string& flag, int64_t value,
                                                 bool allow_zero) {
  if (value < 0 || (value == 0 && !allow_zero))
    return invalid_argument("`" + flag + "` must be " + (allow_zero ? "at least 0" : "positive") +
                            " (milliseconds), got " + std::to_string(value));
  return std::chrono::milliseconds{value};
}

Status check_at_least(const std::string& flag, int64_t value, int64_t minimum) {
  if (value < minimum)
    return invalid_argument("`" + flag + "` must be at least " + std::to_string(minimum) +
                            ", got " + std::to_string(value));
  return Status::OK();
}

// --- stop signals: a flag plus a self-pipe, so that waiting needs no polling.
namespace {

std::atomic<bool> g_stop{false};
int g_stop_pipe[2] = {-1, -1};

extern "C" void on_stop_signal(int sig) {
  g_stop.store(true);
  // A second Ctrl-C should not be ignored while a shutdown hangs: back to the default action.
  std::signal(sig, SIG_DFL);
  if (g_stop_pipe[1] >= 0) {
    const char byte = 1;
    [[maybe_unused]] auto n = ::write(g_stop_pipe[1], &byte, 1);
  }
}

} // namespace

void install_stop_signals() {
  if (g_stop_pipe[0] < 0 && ::pipe2(g_stop_pipe, O_CLOEXEC | O_NONBLOCK) != 0)
    g_stop_pipe[0] = g_stop_pipe[1] = -1;
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
}

bool stop_requested() { return g_stop.load(); }

bool wait_for_stop_signal(std::optional<std::chrono::steady_clock::time_point> deadline) {
  using namespace std::chrono;
  while (!g_stop.load()) {
    int timeout_ms = -1;
    if (deadline) {
      const auto left = duration_cast<milliseconds>(*deadline - steady_clock::now()).count();
      if (left <= 0)
        return false;
      timeout_ms = static_cast<int>(std::min<long long>(left, 60'000));
    } else if (g_stop_pipe[0] < 0) {
      timeout_ms = 50; // no pipe: fall back to checking the flag
    }
    pollfd p{g_stop_pipe[0], POLLIN, 0};
    ::poll(&p, g_stop_pipe[0] >= 0 ? 1 : 0, timeout_ms);
  }
  return true;
}

} // namespace conveyor::apps
