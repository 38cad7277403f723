// Shared command-line plumbing for the `conveyor` subcommands: boost.program_options parsing with
// `--help` and `--config FILE` on every command, HOST:PORT and duration validation with messages
// naming the flag, and the exit-code convention (0 ok, 1 runtime failure, 2 bad arguments).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include <boost/program_options.hpp>

#include "conveyor/options.hpp"
#include "conveyor/server.hpp"
#include "pipeline/runtime/status.hpp"

namespace conveyor::apps {

namespace po = boost::program_options;

inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;      // the command ran and something failed
inline constexpr int kExitBadArguments = 2; // the command line or config file was wrong

// Describes one subcommand for --help: "conveyor <name> <synopsis>" then `summary`, then options.
struct CommandInfo {
  const char* name;     // e.g. "worker"
  const char* synopsis; // e.g. "--dispatcher HOST:PORT --port PORT [flags]"
  const char* summary;  // one or two sentences
};

// How messages and --help name the command: "conveyor <command>" in the `conveyor` binary; a
// program that is one command (conveyor-sim, apps/sim/) calls set_single_command_program at
// start-up and is named by its program name alone.
void set_single_command_program(const char* program);
std::string command_label(const char* command);

// Parses `args` against `options` plus the common `--help` and `--config FILE`. Flags win over
// the config file (INI-style `key = value` lines with the long flag names; `#` comments).
// `hidden` options are accepted but not listed by --help. A word that is neither a flag nor a
// flag's value (`conveyor worker ... stray`) is refused, naming it: no command takes positional
// arguments.
// Returns the exit code to stop with (0 after --help; 2 after a bad flag, already reported on
// stderr as "<command_label(name)>: ..."), or nullopt to go on with `vm`.
std::optional<int> parse_command_line(const CommandInfo& info,
                                      const po::options_description& options,
                                      const std::vector<std::string>& args, po::variables_map& vm,
                                      const po::options_description* hidden = nullptr);

// For commands whose stdout is data (`conveyor read`): returns a stream on a private copy of
// descriptor 1 and points descriptor 1 at stderr. CAF 0.17 prints diagnostics to std::cout
// (e.g. "*** unexpected message ..." when a reconnect answers a handshake twice); they then land
// on stderr instead of between the elements. Falls back to stdout if the descriptor cannot be
// copied.
std::FILE* take_stdout_for_data();

// Prints "<command_label(command)>: <message>" to stderr and returns `exit_code`; with the json log
// format (--log-format json / CONVEYOR_LOG_FORMAT=json) an error-level JSON log line instead
// (component <command>, msg <message>).
int report_error(const char* command, const std::string& message, int exit_code);
// Same for a Status: argument errors (invalid_argument, out_of_range, unimplemented, not_found,
// already_exists) exit 2, runtime failures (unavailable, version_mismatch, ...) exit 1.
int report_status(const char* command, const Status& status);
int exit_code_for(const Status& status);

// `--log-level error|warning|info|debug` (default `default_level`, or CONVEYOR_LOG_LEVEL) and
// `--log-format text|json` (default text, or CONVEYOR_LOG_FORMAT) for node logs (node/log.hpp).
// parse_command_line() names the node after the command.
void add_log_level_option(po::options_description& options, const char* default_level);
// Applies them; invalid_argument naming `--log-level` / `--log-format` (or the environment
// variable) for an unknown value.
Status apply_log_level(const po::variables_map& vm);

// Loads every `--plugin LIB.so` into the global function registry; the error names the flag and
// the library.
Status load_plugin_flags(const po::variables_map& vm);

// For the benchmarks: adds `--log-level`/`--log-format` (default `log_level`) and, when
// `network` is given, `--scheduler-threads`; parses (parse_command_line) and applies them.
// The exit code to stop with (--help, or a bad argument, reported), or nullopt to go on.
std::optional<int> parse_bench_command_line(const CommandInfo& info,
                                            po::options_description& options,
                                            const std::vector<std::string>& args,
                                            po::variables_map& vm, const char* log_level,
                                            NetworkConfig* network = nullptr);

// `--metrics-port PORT` (Prometheus text endpoint; -1 = none, 0 = a free port) and
// `--metrics-host HOST` (default: the node's `--host`).
void add_metrics_options(po::options_description& options);
Status apply_metrics_options(const po::variables_map& vm, int& port, std::string& host);

// `--tls-cert/--tls-key/--tls-ca` (mutual TLS) and `--auth-token/--token-file` (admission;
// CONVEYOR_AUTH_TOKEN when neither is given) — the same on every node command.
void add_security_options(po::options_description& options);
// Fills `network` from them; invalid_argument naming the flag (files checked with OpenSSL).
Status apply_security_options(const po::variables_map& vm, NetworkConfig& network);

// `--scheduler-threads N`: the node's CAF scheduler threads (NetworkConfig::scheduler_threads;
// 0 = CAF's default: one per core, at least 4). Pipelines run on their own threads, so a
// many-core machine running several nodes may want fewer than one per core each.
void add_scheduler_option(po::options_description& options);
Status apply_scheduler_option(const po::variables_map& vm, NetworkConfig& network);

// `--no-frame-guard`, `--max-frame-bytes`, `--max-connections`, `--idle-timeout` for server
// nodes (conveyor/server.hpp GuardConfig; on by default from the command line).
void add_guard_options(po::options_description& options);
// invalid_argument naming the flag for a value out of range, for a limit given together with
// `--no-frame-guard` (nothing would apply it), and for `--max-frame-bytes` with TLS (`network`
// after apply_security_options: the guard cannot read encrypted frames).
Status apply_guard_options(const po::variables_map& vm, GuardConfig& guard,
                           const NetworkConfig& network);

// A "host:port" flag value, checked with conveyor::parse_address (conveyor/options.hpp); the
// error names the flag: "`--dispatcher`: ...".
Expected<HostPort> parse_address_flag(const std::string& flag, const std::string& text);
// A port flag value: 0..65535 (0 = pick a free port).
Expected<uint16_t> check_port(const std::string& flag, int64_t value);
// A non-empty host name or address, without spaces.
Status check_host(const std::string& flag, const std::string& host);
// A duration flag given in milliseconds: must be > 0 (or >= 0 when `allow_zero`).
Expected<std::chrono::milliseconds> check_millis(const std::string& flag, int64_t value,
                                                 bool allow_zero = false);
// A count flag: must be >= `minimum`.
Status check_at_least(const std::string& flag, int64_t value, int64_t minimum);

// SIGINT/SIGTERM handling for long-running commands: after install_stop_signals(), the first
// signal sets stop_requested(); the command then shuts down in order. A second signal kills the
// process at once (the default action is restored by the first).
void install_stop_signals();
bool stop_requested();
// Blocks until a stop signal arrives or `deadline` passes (if given). Returns true on a signal.
bool wait_for_stop_signal(
  std::optional<std::chrono::steady_clock::time_point> deadline = std::nullopt);

} // namespace conveyor::apps
