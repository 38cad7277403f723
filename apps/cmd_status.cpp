// `conveyor status`: what a running dispatcher holds — workers, datasets, jobs with their
// progress and where their consumers' waiting went — as a table or as JSON.
#include <cinttypes>
#include <cstdio>
#include <string>
#include <vector>

#include "node/log.hpp"
#include "consumer/status_client.hpp"
#include "apps/cli_common.hpp"
#include "apps/subcommand.hpp"

namespace conveyor::apps {
namespace {

constexpr CommandInfo kInfo{
  "status", "--dispatcher HOST:PORT [--json]",
  "Asks a running dispatcher what it holds: its workers (address, tags, tasks, time since the\n"
  "last heartbeat), its datasets (id, fingerprint, element spec, cardinality) and its live jobs\n"
  "(mode, consumers, elements and bytes delivered, rate, epoch and splits, and the share of\n"
  "the consumers' time spent waiting, by cause), and the workers the jobs need for their readers\n"
  "not to wait on workers (the dispatcher's estimate; with --scale-command, the autoscaler's\n"
  "target)."};

std::string json_string(const std::string& s) {
  std::string out;
  log::append_json_string(out, s);
  return out;
}

std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

// A worker's thread time per tenant as shares of its total (0..1), in its order.
std::vector<double> tenant_shares(const std::vector<msg::tenant_usage>& tenants) {
  double total = 0;
  for (const auto& t : tenants)
    total += t.thread_seconds;
  std::vector<double> out;
  for (const auto& t : tenants)
    out.push_back(total > 0 ? t.thread_seconds / total : 0.0);
  return out;
}

// Share of the consumers' reading time spent waiting for `ns` (0..1).
double share(int64_t ns, int64_t elapsed_ns) {
  return elapsed_ns > 0 ? static_cast<double>(ns) / static_cast<double>(elapsed_ns) : 0.0;
}

// Each tenant's caps (0 = none), the workers its tasks are on and what they buffer.
std::string tenants_json(const std::vector<msg::tenant_status>& tenants) {
  std::string o = "[";
  for (std::size_t i = 0; i < tenants.size(); ++i) {
    const auto& t = tenants[i];
    o += std::string{i ? "," : ""} + "{\"tenant\":" + json_string(t.tenant) +
         ",\"max_workers\":" + std::to_string(t.max_workers) +
         ",\"workers\":" + std::to_string(t.workers) +
         ",\"max_buffer_bytes\":" + std::to_string(t.max_buffer_bytes) +
         ",\"buffered_bytes\":" + std::to_string(t.buffered_bytes) + "}";
  }
  return o + "]";
}

void print_tenants(const std::vector<msg::tenant_status>& tenants) {
  std::printf("\ntenants: %zu\n", tenants.size());
  if (!tenants.empty())
    std::printf("  %-20s %-8s %-10s %-16s %s\n", "TENANT", "WORKERS", "MAX", "BUFFERED",
                "MAX/WORKER");
  for (const auto& t : tenants)
    std::printf("  %-20s %-8" PRId64 " %-10s %-16" PRId64 " %s\n", t.tenant.c_str(), t.workers,
                t.max_workers > 0 ? std::to_string(t.max_workers).c_str() : "-", t.buffered_bytes,
                t.max_buffer_bytes > 0 ? std::to_string(t.max_buffer_bytes).c_str() : "-");
}

std::string to_json(const msg::cluster_status& s) {
  std::string o = "{\"dispatcher\":" + json_string(s.dispatcher) +
                  ",\"protocol_version\":" + std::to_string(s.protocol_version) +
                  ",\"uptime_ms\":" + std::to_string(s.uptime_ms) + ",\"workers\":[";
  for (std::size_t i = 0; i < s.workers.size(); ++i) {
    const auto& w = s.workers[i];
    o += i ? "," : "";
    o +=
      "{\"id\":" + std::to_string(w.id) + ",\"address\":" + json_string(w.address) + ",\"tags\":[";
    for (std::size_t t = 0; t < w.tags.size(); ++t)
      o += (t ? "," : "") + json_string(w.tags[t]);
    o += "],\"tasks\":" + std::to_string(w.tasks) +
         ",\"heartbeat_age_ms\":" + std::to_string(w.heartbeat_age_ms) + ",\"tenants\":[";
    const auto shares = tenant_shares(w.tenants);
    for (std::size_t t = 0; t < w.tenants.size(); ++t)
      o += std::string{t ? "," : ""} + "{\"tenant\":" + json_string(w.tenants[t].tenant) +
           ",\"weight\":" + std::to_string(w.tenants[t].weight) +
           ",\"thread_seconds\":" + num(w.tenants[t].thread_seconds) +
           ",\"share\":" + num(shares[t]) +
           ",\"buffered_bytes\":" + std::to_string(w.tenants[t].buffered_bytes) +
           ",\"max_buffer_bytes\":" + std::to_string(w.tenants[t].max_buffer_bytes) + "}";
    o += "]}";
  }
  o += "],\"datasets\":[";
  for (std::size_t i = 0; i < s.datasets.size(); ++i) {
    const auto& d = s.datasets[i];
    o += i ? "," : "";
    o += "{\"id\":" + json_string(d.id) + ",\"fingerprint\":" + json_string(d.fingerprint) +
         ",\"element_spec\":" + json_string(d.element_spec) +
         ",\"cardinality\":" + std::to_string(d.cardinality) +
         ",\"definition_bytes\":" + std::to_string(d.definition_bytes) +
         ",\"compression\":" + json_string(d.compression) + "}";
  }
  o += "],\"jobs\":[";
  for (std::size_t i = 0; i < s.jobs.size(); ++i) {
    const auto& j = s.jobs[i];
    const auto& w = j.waiting;
    o += i ? "," : "";
    o += "{\"id\":" + std::to_string(j.id) + ",\"name\":" + json_string(j.name) +
         ",\"dataset\":" + json_string(j.dataset) + ",\"mode\":" + json_string(j.mode) +
         ",\"finished\":" + (j.finished ? "true" : "false") +
         ",\"age_ms\":" + std::to_string(j.age_ms) +
         ",\"consumers\":" + std::to_string(j.consumers) + ",\"tasks\":" + std::to_string(j.tasks) +
         ",\"elements\":" + std::to_string(j.elements) + ",\"bytes\":" + std::to_string(j.bytes) +
         ",\"elements_per_s\":" + num(j.elements_per_s) + ",\"bytes_per_s\":" + num(j.bytes_per_s) +
         ",\"epoch\":" + std::to_string(j.epoch) +
         ",\"splits_handed_out\":" + std::to_string(j.splits_handed_out) +
         ",\"waiting\":{\"consumer_seconds\":" + num(w.elapsed_ns / 1e9) +
         ",\"worker\":" + num(share(w.wait_worker_ns, w.elapsed_ns)) +
         ",\"network\":" + num(share(w.wait_network_ns, w.elapsed_ns)) +
         ",\"split\":" + num(share(w.wait_split_ns, w.elapsed_ns)) +
         ",\"credit\":" + num(share(w.wait_credit_ns, w.elapsed_ns)) + "}" +
         ",\"waiting_for\":" + json_string(j.waiting_for) +
         ",\"desired_workers\":" + std::to_string(j.desired_workers) +
         ",\"recent_worker_wait\":" + num(j.recent_worker_wait) +
         ",\"tenant\":" + json_string(j.tenant) +
         ",\"tenant_weight\":" + std::to_string(j.tenant_weight) + "}";
  }
  o += "],\"snapshots\":[";
  for (std::size_t i = 0; i < s.snapshots.size(); ++i) {
    const auto& p = s.snapshots[i];
    o += i ? "," : "";
    o += "{\"path\":" + json_string(p.path) + ",\"dataset\":" + json_string(p.dataset) +
         ",\"state\":" + json_string(p.state) + ",\"streams\":" + std::to_string(p.streams) +
         ",\"streams_done\":" + std::to_string(p.streams_done) +
         ",\"chunks\":" + std::to_string(p.chunks) + ",\"elements\":" + std::to_string(p.elements) +
         ",\"bytes\":" + std::to_string(p.bytes) + ",\"elements_per_s\":" + num(p.elements_per_s) +
         ",\"bytes_per_s\":" + num(p.bytes_per_s) + ",\"age_ms\":" + std::to_string(p.age_ms) + "}";
  }
  return o + "],\"desired_workers\":" + std::to_string(s.desired_workers) +
         ",\"autoscale_target\":" + std::to_string(s.autoscale_target) +
         ",\"scale_commands\":" + std::to_string(s.scale_commands) +
         ",\"scale_command_failures\":" + std::to_string(s.scale_command_failures) +
         ",\"tenants\":" + tenants_json(s.tenants) + "}";
}

void print_table(const msg::cluster_status& s) {
  std::printf("dispatcher %s (protocol %u, up %.1f s)\n\n", s.dispatcher.c_str(),
              s.protocol_version, s.uptime_ms / 1e3);
  std::printf("workers: %zu\n", s.workers.size());
  if (!s.workers.empty())
    std::printf("  %-6s %-28s %-6s %-14s %s\n", "ID", "ADDRESS", "TASKS", "HEARTBEAT", "TAGS");
  for (const auto& w : s.workers) {
    std::string tags;
    for (const auto& t : w.tags)
      tags += (tags.empty() ? "" : ",") + t;
    std::printf("  %-6" PRIu64 " %-28s %-6" PRId64 " %-14s %s\n", static_cast<uint64_t>(w.id),
                w.address.c_str(), w.tasks,
                (std::to_string(w.heartbeat_age_ms) + " ms ago").c_str(),
                tags.empty() ? "-" : tags.c_str());
    if (!w.tenants.empty()) { // its executor's thread time since it started, per tenant
      const auto shares = tenant_shares(w.tenants);
      std::string line;
      for (std::size_t t = 0; t < w.tenants.size(); ++t) {
        char part[160];
        std::snprintf(part, sizeof part, "%s%s (weight %" PRId64 ") %.0f%% of %.1f s",
                      t ? ", " : "", w.tenants[t].tenant.c_str(), w.tenants[t].weight,
                      100 * shares[t], w.tenants[t].thread_seconds);
        line += part;
      }
      std::printf("         thread share: %s\n", line.c_str());
    }
  }
  std::printf("\ndatasets: %zu\n", s.datasets.size());
  if (!s.datasets.empty())
    std::printf("  %-8s %-17s %-12s %s\n", "ID", "FINGERPRINT", "CARDINALITY", "ELEMENT SPEC");
  for (const auto& d : s.datasets) {
    std::string card = d.cardinality == -1   ? "infinite"
                       : d.cardinality == -2 ? "unknown"
                                             : std::to_string(d.cardinality);
    std::printf("  %-8s %-17s %-12s %s\n", d.id.c_str(), d.fingerprint.c_str(), card.c_str(),
                d.element_spec.empty() ? "-" : d.element_spec.c_str());
  }
  std::printf("\njobs: %zu\n", s.jobs.size());
  if (!s.jobs.empty())
    std::printf("  %-5s %-14s %-8s %-8s %-5s %-5s %-12s %-12s %-12s %-14s %s\n", "ID", "NAME",
                "DATASET", "MODE", "CONS", "TASKS", "ELEMENTS", "BYTES", "ELEM/S", "EPOCH/SPLITS",
                "WAITING (worker/network/split/credit)");
  for (const auto& j : s.jobs) {
    const auto& w = j.waiting;
    std::string progress = j.splits_handed_out >= 0
                             ? std::to_string(j.epoch) + "/" + std::to_string(j.splits_handed_out)
                             : "-";
    char waiting[96];
    std::snprintf(
      waiting, sizeof waiting, "%.0f%% / %.0f%% / %.0f%% / %.0f%%",
      100 * share(w.wait_worker_ns, w.elapsed_ns), 100 * share(w.wait_network_ns, w.elapsed_ns),
      100 * share(w.wait_split_ns, w.elapsed_ns), 100 * share(w.wait_credit_ns, w.elapsed_ns));
    std::printf("  %-5" PRIu64 " %-14s %-8s %-8s %-5" PRId64 " %-5" PRId64 " %-12" PRId64
                " %-12" PRId64 " %-12.0f %-14s %s%s\n",
                static_cast<uint64_t>(j.id), j.name.empty() ? "(private)" : j.name.c_str(),
                j.dataset.c_str(), j.mode.c_str(), j.consumers, j.tasks, j.elements, j.bytes,
                j.elements_per_s, progress.c_str(), waiting, j.finished ? "  finished" : "");
    std::printf("        tenant %s, weight %" PRId64 "\n", j.tenant.c_str(), j.tenant_weight);
    if (!j.waiting_for.empty())
      std::printf("        waits for %s\n", j.waiting_for.c_str());
    if (j.desired_workers >= 0)
      std::printf("        needs %" PRId64 " worker(s): its readers waited on workers %.0f%% of "
                  "the last interval\n",
                  j.desired_workers, 100 * j.recent_worker_wait);
  }
  print_tenants(s.tenants);
  std::printf("\nsnapshots: %zu\n", s.snapshots.size());
  if (!s.snapshots.empty())
    std::printf("  %-10s %-8s %-12s %-8s %-12s %-14s %-12s %s\n", "STATE", "DATASET", "STREAMS",
                "CHUNKS", "ELEMENTS", "BYTES", "ELEM/S", "PATH");
  for (const auto& p : s.snapshots) {
    const bool failed = p.state.rfind("failed", 0) == 0;
    const std::string streams =
      std::to_string(p.streams_done) + "/" + std::to_string(p.streams) + " done";
    std::printf("  %-10s %-8s %-12s %-8" PRId64 " %-12" PRId64 " %-14" PRId64 " %-12.0f %s\n",
                failed ? "failed" : p.state.c_str(), p.dataset.c_str(), streams.c_str(), p.chunks,
                p.elements, p.bytes, p.elements_per_s, p.path.c_str());
    if (failed)
      std::printf("        %s\n", p.state.c_str());
  }
  std::printf("\nworkers needed: %s", s.desired_workers < 0 ? "not estimated yet"
                                      : s.desired_workers == 0
                                        ? "0 (no job has readers)"
                                        : std::to_string(s.desired_workers).c_str());
  if (s.autoscale_target >= 0)
    std::printf("; autoscaler target %" PRId64 " (%" PRId64 " scale command(s) run, %" PRId64
                " failed)",
                s.autoscale_target, s.scale_commands, s.scale_command_failures);
  std::printf("\n");
}

int run_status(const std::vector<std::string>& args) {
  int64_t timeout_ms = 0;
  po::options_description options("status options");
  // clang-format off
  options.add_options()
      ("dispatcher,d", po::value<std::string>()->required()->value_name("HOST:PORT"),
       "address of the dispatcher")
      ("json", "print one JSON object instead of tables")
      ("timeout-ms", po::value(&timeout_ms)->default_value(5000)->value_name("MS"),
       "give up connecting or waiting for the answer after this long");
  // clang-format on
  add_security_options(options); // a secured dispatcher answers only with its TLS and token
  po::variables_map vm;
  if (auto stop = parse_command_line(kInfo, options, args, vm))
    return *stop;
  auto address = parse_address_flag("--dispatcher", vm["dispatcher"].as<std::string>());
  if (!address.ok())
    return report_status(kInfo.name, address.status());
  auto timeout = check_millis("--timeout-ms", timeout_ms);
  if (!timeout.ok())
    return report_status(kInfo.name, timeout.status());
  NetworkConfig network;
  if (auto st = apply_security_options(vm, network); !st.ok())
    return report_status(kInfo.name, st);
  auto status =
    actors::fetch_status(address->to_string(), *timeout, /*include_jobs=*/true, network);
  if (!status.ok())
    return report_error(kInfo.name,
                        "cannot get the status of dispatcher " + address->to_string() + ": " +
                          status.status().to_string(),
                        exit_code_for(status.status()));
  if (vm.count("json"))
    std::printf("%s\n", to_json(*status).c_str());
  else
    print_table(*status);
  return kExitOk;
}

const Subcommand reg{"status", "show a dispatcher's workers, datasets and jobs", run_status};

} // namespace
} // namespace conveyor::apps
