// `conveyor read`: reads a dataset through the service and prints one element per line.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <optional>
#include <string>

#include "node/log.hpp"
#include "consumer/status_client.hpp"
#include "apps/cli_common.hpp"
#include "apps/read_checkpoint.hpp"
#include "apps/read_progress.hpp"
#include "apps/subcommand.hpp"
#include "conveyor/client.hpp"
#include "pipeline/tensor/codec.hpp"
#include "pipeline/functions/functions.hpp"
#include "pipeline/graph/text_form.hpp"
#include "pipeline/io/tfrecord.hpp"

namespace conveyor::apps {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr CommandInfo kInfo{
  "read", "--dispatcher HOST:PORT --dataset EXPR [--mode MODE] [--job-name NAME] [flags]",
  "Registers the dataset EXPR (the pipeline text form, e.g. 'range(10).map(square)') with the\n"
  "dispatcher, reads it through the workers and prints one element per line (stdout carries "
  "elements\n"
  "only; every diagnostic goes to stderr). Exit codes:\n"
  "0 done, 1 the service failed, 2 bad arguments."};

// How each element is printed.
enum class PrintMode { text, digest, none };

std::optional<PrintMode> print_mode_from(const std::string& s) {
  if (s == "text")
    return PrintMode::text;
  if (s == "digest")
    return PrintMode::digest;
  if (s == "none")
    return PrintMode::none;
  return std::nullopt;
}

// "<byte size> <crc32c of the element's encoding, 8 hex digits>": compares large elements
// without printing megabytes.
std::string digest_of(const Element& e) {
  std::string encoded;
  encode_element(e, encoded);
  char buf[64];
  std::snprintf(buf, sizeof buf, "%zu %08x", e.byte_size(), crc32c(encoded.data(), encoded.size()));
  return buf;
}

struct ReadFlags {
  std::string dispatcher;
  std::string dataset_text;
  std::string dataset_id;
  std::string mode = "off";
  int64_t take = -1;
  int64_t timeout_ms = 60000;
  int64_t connect_timeout_ms = 5000;
  PrintMode print = PrintMode::text;
  bool stats = false;
  std::string checkpoint_to;
  int64_t checkpoint_every = 0;
  bool deterministic = false;
  int64_t deterministic_hold_bytes = kDefaultDeterministicHoldBytes;
};

// What the dispatcher says job `job_id` waits for (job_status.waiting_for), or empty (also
// when it cannot be asked).
std::string job_waits_for(const std::string& address, std::chrono::milliseconds timeout,
                          const NetworkConfig& network, const std::string& job_id) {
  auto status = actors::fetch_status(address, timeout, /*include_jobs=*/true, network);
  if (!status.ok())
    return {};
  for (const auto& j : status->jobs)
    if (std::to_string(j.id) == job_id)
      return j.waiting_for;
  return {};
}

// True only when the dispatcher answered and has no worker (an unreachable one says nothing).
bool dispatcher_has_no_workers(const std::string& address, std::chrono::milliseconds timeout,
                               const NetworkConfig& network) {
  auto status = actors::fetch_status(address, timeout, /*include_jobs=*/false, network);
  return status.ok() && status->workers.empty();
}

int run_read(const std::vector<std::string>& args) {
  ReadFlags f;
  po::options_description options("read options");
  // clang-format off
  options.add_options()
      ("dispatcher,d", po::value(&f.dispatcher)->required()->value_name("HOST:PORT"),
       "address of the dispatcher")
      ("dataset", po::value(&f.dataset_text)->value_name("EXPR"),
       "the dataset, in the pipeline text form, e.g. 'range(10).map(square)'")
      ("dataset-id", po::value(&f.dataset_id)->value_name("ID"),
       "read an already registered dataset instead of --dataset")
      ("mode,m", po::value(&f.mode)->default_value("off")->value_name("MODE"),
       "processing mode (sharding policy): off, dynamic, file, data, file_or_data or hint "
       "(case-insensitive). off (= parallel_epochs): every worker produces the whole dataset; "
       "dynamic (= distributed_epoch): each element once across the workers, handed out in "
       "splits; the static ones need the dispatcher's --worker-addresses: file: each worker reads "
       "its share of the files; data: worker i of n keeps elements i, i+n, ...; file_or_data: file "
       "when it can, else data; hint: fills the dataset's shard(SHARD_HINT, SHARD_HINT) "
       "placeholders")
      ("job-name", po::value<std::string>()->value_name("NAME"),
       "share the job NAME with every consumer naming it (default: a private job)")
      ("iteration", po::value<int64_t>()->value_name("N"),
       "with --job-name: read iteration N of the named job (default 0; as in tf.data, a reader "
       "of an iteration that already ended reads nothing; N+1 reads the data again)")
      ("tenant", po::value<std::string>()->default_value("default")->value_name("NAME"),
       "the tenant whose share of the workers' threads this job uses (1 to 64 characters of "
       "[A-Za-z0-9_.-])")
      ("tenant-weight", po::value<int64_t>()->default_value(1)->value_name("W"),
       "the tenant's weight (>= 1): a saturated worker's threads go to tenants in proportion to "
       "their weights")
      ("num-consumers", po::value<int64_t>()->value_name("K"), "coordinated reads: number of consumers")
      ("consumer-index", po::value<int64_t>()->value_name("I"), "coordinated reads: this consumer's index")
      ("round-timeout-ms", po::value<int64_t>()->default_value(60000)->value_name("T"),
       "coordinated reads: fail when a round waits more than T milliseconds for the other consumers")
      ("max-outstanding", po::value<int64_t>()->value_name("M"),
       "at most M elements requested ahead (default: automatic)")
      ("on-worker-loss", po::value<std::string>()->value_name("continue|fail"),
       "--mode off: when a worker leaves before its task's end, read on with the workers left "
       "(continue, the default: a warning names the worker, --stats counts the lost tasks) or "
       "fail the read (fail)")
      ("take", po::value(&f.take)->default_value(-1)->value_name("N"), "stop after N elements (-1 = all)")
      ("target-workers", po::value<std::string>()->default_value("AUTO")->value_name("AUTO|ANY|LOCAL"),
       "which workers to read from: ANY; LOCAL (only workers in this process: none in a `conveyor "
       "read`, so it fails as the reference does); AUTO (ANY, but skipping other processes' "
       "workers tagged COLOCATED)")
      ("cross-trainer-cache", po::bool_switch(),
       "share the named job's elements with other trainers through the workers' cache (needs "
       "--job-name, an infinite dataset and --trainer-id)")
      ("trainer-id", po::value<std::string>()->value_name("ID"),
       "this reader's trainer with --cross-trainer-cache (readers of one id share its position)")
      ("cross-trainer-finite-epoch", po::bool_switch(),
       "with --cross-trainer-cache: share one epoch of a finite dataset instead; each trainer "
       "reads every element once and the slowest paces the others (start all trainers before a "
       "worker's cache fills)")
      ("compression", po::value<std::string>()->default_value("AUTO")->value_name("AUTO|NONE"),
       "wire compression of the elements")
      ("data-transfer-protocol", po::value<std::string>()->value_name("grpc|bulk|caf"),
       "how elements travel: grpc and bulk mean conveyor's default (messages, large elements on "
       "the workers' bulk channel); caf keeps every element in messages (no bulk connection)")
      ("external-state-policy", po::value<std::string>()->value_name("WARN|IGNORE|FAIL"),
       "a dataset with an op with external state (random): register it with a warning (WARN, "
       "the default), silently (IGNORE), or refuse it (FAIL)")
      ("timeout-ms", po::value(&f.timeout_ms)->default_value(60000)->value_name("T"),
       "fail when no element arrives for T milliseconds")
      ("connect-timeout", po::value(&f.connect_timeout_ms)->default_value(5000)->value_name("MS"),
       "fail when the dispatcher does not answer within MS milliseconds")
      ("print", po::value<std::string>()->default_value("text")->value_name("text|digest|none"),
       "per element: its text form, its size and crc32c, or nothing")
      ("plugin", po::value<std::vector<std::string>>()->composing()->value_name("LIB.so"),
       "load dataset functions from a plugin, as the workers do (the dataset is checked here "
       "before it is registered; repeatable)")
      ("resume-from", po::value<std::string>()->value_name("FILE"),
       "--mode dynamic or off: continue a read from the cursor in FILE (written by "
       "--checkpoint-to in the same mode), in a new job: prints only the elements that cursor "
       "does not cover (with --num-consumers: this trainer's share of the rounds; all N trainers "
       "resume from their cursors of the same step)")
      ("deterministic", po::bool_switch(&f.deterministic),
       "--mode dynamic: print the elements in the order one worker gives (splits in order, each "
       "split's elements in order), whatever the number of workers, their speed or failures")
      ("deterministic-hold-bytes", po::value(&f.deterministic_hold_bytes)->value_name("N"),
       "--deterministic: once the reorder holds more than N bytes ahead of the element it waits "
       "for, ask only the worker of the split it waits for (default 64 MiB)")
      ("checkpoint-to", po::value(&f.checkpoint_to)->value_name("FILE"),
       "--mode dynamic or off (also with --num-consumers: this trainer's share): write the read "
       "cursor (which elements were printed) to FILE, replaced "
       "atomically, every --checkpoint-every elements and at the end; the elements are flushed "
       "to stdout before the cursor that covers them is written")
      ("checkpoint-every", po::value(&f.checkpoint_every)->value_name("N"),
       "with --checkpoint-to: write the cursor after every N elements (default 1000)")
      ("stats", po::bool_switch(&f.stats), "print elements, bytes and per-worker counts to stderr at the end")
      ("progress", po::value<std::string>()->default_value("auto")->implicit_value("on")->value_name("on|off|auto"),
       "a progress line on stderr every second (elements, bytes, rate, waiting by cause, ETA "
       "when the total is known): --progress or --progress=on always, --progress=off never, auto "
       "(the default) when stderr is a terminal");
  // clang-format on
  po::options_description hidden;
  // clang-format off
  hidden.add_options()("protocol-version", po::value<uint32_t>()->default_value(0),
                       "speak another protocol version (tests of the version check)");
  // clang-format on
  add_security_options(options);
  add_scheduler_option(options);
  add_log_level_option(options, "warning");
  po::variables_map vm;
  if (auto stop = parse_command_line(kInfo, options, args, vm, &hidden))
    return *stop;
  if (auto st = apply_log_level(vm); !st.ok())
    return report_status(kInfo.name, st);

  // --- every argument is checked before anything touches the network
  const auto bad = [](const Status& st) { return report_status(kInfo.name, st); };
  auto address = parse_address_flag("--dispatcher", f.dispatcher);
  if (!address.ok())
    return bad(address.status());
  if (auto st = load_plugin_flags(vm); !st.ok())
    return bad(st);
  if (f.dataset_text.empty() == f.dataset_id.empty())
    return bad(invalid_argument("give exactly one of `--dataset EXPR` and `--dataset-id ID`"));
  std::optional<Dataset> dataset;
  if (!f.dataset_text.empty()) {
    auto parsed = parse_dataset(f.dataset_text);
    if (!parsed.ok())
      return bad(Status(parsed.status().code(), "`--dataset`: " + parsed.status().message()));
    dataset = std::move(parsed).value();
  }
  DistributeOptions opts;
  auto policy = parse_processing_mode(f.mode);
  if (!policy.ok())
    return bad(Status(policy.status().code(), "`--mode`: " + policy.status().message()));
  opts.policy = *policy;
  if (vm.count("job-name"))
    opts.job_name = vm["job-name"].as<std::string>();
  if (vm.count("iteration")) {
    if (!opts.job_name)
      return bad(
        invalid_argument("`--iteration` needs `--job-name` (only a named job has iterations)"));
    const int64_t n = vm["iteration"].as<int64_t>();
    if (auto st = check_at_least("--iteration", n, 0); !st.ok())
      return bad(st);
    opts.iteration = n;
  }
  opts.tenant = vm["tenant"].as<std::string>();
  opts.tenant_weight = vm["tenant-weight"].as<int64_t>();
  if (auto st = check_at_least("--tenant-weight", opts.tenant_weight, 1); !st.ok())
    return bad(st);
  if (vm.count("num-consumers"))
    opts.num_consumers = vm["num-consumers"].as<int64_t>();
  if (vm.count("consumer-index"))
    opts.consumer_index = vm["consumer-index"].as<int64_t>();
  if (vm.count("max-outstanding")) {
    // Checked here so that the error names the flag, not the API field.
    const int64_t m = vm["max-outstanding"].as<int64_t>();
    if (auto st = check_at_least("--max-outstanding", m, 1); !st.ok())
      return bad(st);
    opts.max_outstanding_requests = m;
  }
  // The round timeout bounds the wait for the other consumers of a coordinated read: without
  // one it would be accepted and never used.
  if (!vm["round-timeout-ms"].defaulted() && !opts.num_consumers)
    return bad(invalid_argument("`--round-timeout-ms` is used only with a coordinated read "
                                "(`--num-consumers` and `--consumer-index`)"));
  auto round_timeout = check_millis("--round-timeout-ms", vm["round-timeout-ms"].as<int64_t>());
  if (!round_timeout.ok())
    return bad(round_timeout.status());
  opts.round_timeout = *round_timeout;
  if (vm.count("on-worker-loss")) {
    auto loss = vm["on-worker-loss"].as<std::string>();
    if (auto st = validate_on_worker_loss(loss); !st.ok())
      return bad(
        invalid_argument("`--on-worker-loss` must be continue or fail, got \"" + loss + "\""));
    if (opts.policy != ShardingPolicy::off)
      return bad(invalid_argument("`--on-worker-loss` applies to `--mode off` only, got `--mode " +
                                  f.mode + "`"));
    opts.on_worker_loss = std::move(loss);
  }
  opts.compression = vm["compression"].as<std::string>();
  if (vm.count("data-transfer-protocol")) {
    auto protocol = vm["data-transfer-protocol"].as<std::string>();
    if (!validate_data_transfer_protocol(protocol).ok())
      return bad(invalid_argument("`--data-transfer-protocol` must be grpc, bulk or caf, got \"" +
                                  protocol + "\""));
    opts.data_transfer_protocol = std::move(protocol);
  }
  if (vm.count("external-state-policy")) {
    auto policy = vm["external-state-policy"].as<std::string>();
    if (!validate_external_state_policy(policy).ok())
      return bad(invalid_argument("`--external-state-policy` must be WARN, IGNORE or FAIL, got \"" +
                                  policy + "\""));
    opts.external_state_policy = std::move(policy);
  }
  opts.target_workers = vm["target-workers"].as<std::string>();
  if (vm["cross-trainer-cache"].as<bool>())
    opts.cross_trainer_cache =
      CrossTrainerCacheOptions{vm.count("trainer-id") ? vm["trainer-id"].as<std::string>() : "",
                               vm["cross-trainer-finite-epoch"].as<bool>()};
  else if (vm.count("trainer-id"))
    return bad(invalid_argument("`--trainer-id` is used only with `--cross-trainer-cache`"));
  else if (vm["cross-trainer-finite-epoch"].as<bool>())
    return bad(
      invalid_argument("`--cross-trainer-finite-epoch` is used only with `--cross-trainer-cache`"));
  if (vm.count("resume-from")) {
    auto blob = load_cursor_file("--resume-from", vm["resume-from"].as<std::string>());
    if (!blob.ok())
      return bad(blob.status());
    opts.resume_from = std::move(blob).value();
  }
  opts.deterministic = f.deterministic;
  if (vm.count("deterministic-hold-bytes") && !f.deterministic)
    return bad(
      invalid_argument("`--deterministic-hold-bytes` is used only with `--deterministic`"));
  opts.deterministic_hold_bytes = f.deterministic_hold_bytes;
  if (vm.count("checkpoint-every") && f.checkpoint_to.empty())
    return bad(invalid_argument("`--checkpoint-every` is used only with `--checkpoint-to`"));
  if (!f.checkpoint_to.empty()) {
    if (opts.policy != ShardingPolicy::dynamic && opts.policy != ShardingPolicy::off)
      return bad(invalid_argument("`--checkpoint-to` needs `--mode dynamic` or `--mode off` (only "
                                  "their elements can be counted per split or task), got `--mode " +
                                  f.mode + "`"));
    if (!vm.count("checkpoint-every"))
      f.checkpoint_every = 1000;
    if (auto st = check_at_least("--checkpoint-every", f.checkpoint_every, 1); !st.ok())
      return bad(st);
  }
  if (auto st = validate(opts); !st.ok()) {
    if (opts.resume_from && st.message().find("`resume_from`") != std::string::npos)
      return bad(Status(st.code(), "`--resume-from`: " + st.message()));
    if (st.message().find("`deterministic_hold_bytes`") != std::string::npos)
      return bad(Status(st.code(), "`--deterministic-hold-bytes`: " + st.message()));
    if (opts.deterministic && st.message().find("`deterministic`") != std::string::npos)
      return bad(Status(st.code(), "`--deterministic`: " + st.message()));
    return bad(st);
  }
  if (f.take < -1)
    return bad(
      invalid_argument("`--take` must be -1 (all) or at least 0, got " + std::to_string(f.take)));
  auto timeout = check_millis("--timeout-ms", f.timeout_ms);
  if (!timeout.ok())
    return bad(timeout.status());
  auto connect_timeout = check_millis("--connect-timeout", f.connect_timeout_ms);
  if (!connect_timeout.ok())
    return bad(connect_timeout.status());
  auto print = print_mode_from(vm["print"].as<std::string>());
  if (!print)
    return bad(invalid_argument("`--print` must be text, digest or none, got \"" +
                                vm["print"].as<std::string>() + "\""));
  f.print = *print;
  const std::string progress_flag = vm["progress"].as<std::string>();
  if (progress_flag != "on" && progress_flag != "off" && progress_flag != "auto")
    return bad(
      invalid_argument("`--progress` must be on, off or auto, got \"" + progress_flag + "\""));
  const bool stderr_terminal = ::isatty(STDERR_FILENO) == 1;
  const bool show_progress = progress_flag == "on" || (progress_flag == "auto" && stderr_terminal);
  // The total, for the ETA: --take, or the dataset's cardinality where each element is read once.
  int64_t total = f.take;
  if (total < 0 && dataset && opts.policy == ShardingPolicy::dynamic && !opts.num_consumers)
    total = dataset->cardinality() >= 0 ? dataset->cardinality() : -1;

  // --- the service
  install_stop_signals();
  ClientConfig client_config;
  client_config.connect_timeout = *connect_timeout;
  client_config.protocol_version = vm["protocol-version"].as<uint32_t>();
  if (auto st = apply_security_options(vm, client_config.network); !st.ok())
    return report_status(kInfo.name, st);
  if (auto st = apply_scheduler_option(vm, client_config.network); !st.ok())
    return report_status(kInfo.name, st);
  // Elements go to `out`; whatever else writes to stdout (CAF) goes to stderr.
  std::FILE* out = take_stdout_for_data();
  auto client = Client::connect(address->to_string(), client_config);
  if (!client.ok())
    return report_error(kInfo.name,
                        "cannot connect to dispatcher " + address->to_string() + ": " +
                          client.status().to_string(),
                        exit_code_for(client.status()));
  auto stream =
    dataset ? client->distribute(*dataset, opts) : client->from_dataset_id(f.dataset_id, opts);
  if (!stream.ok()) {
    // An id the dispatcher does not know is the service's answer, not a malformed argument:
    // a runtime failure (exit 1), like the other errors that come back from the service.
    if (!dataset && stream.status().code() == ErrorCode::not_found)
      return report_error(kInfo.name, stream.status().to_string(), kExitFailure);
    return report_status(kInfo.name, stream.status());
  }

  if (opts.resume_from)
    std::fprintf(stderr, "read: resuming job %s after %lld consumed element(s)\n",
                 stream->job_id().c_str(), static_cast<long long>(stream->consumed_total()));
  // The cursor covers what was printed: stdout is flushed first, so a reader killed between the
  // two has printed more than its last cursor covers, never less.
  const auto save_checkpoint = [&]() -> Status {
    std::fflush(out);
    auto blob = stream->checkpoint();
    if (!blob.ok())
      return blob.status().with_context("`--checkpoint-to`");
    return save_cursor_file(f.checkpoint_to, *blob);
  };
  if (!f.checkpoint_to.empty())
    if (Status st = stream->checkpoint().status(); !st.ok())
      return report_status(kInfo.name, st.with_context("`--checkpoint-to`"));
  // Lines are flushed whenever the stream has to wait, and at least every kFlushEvery, so a
  // slow job shows its elements as they come while a fast one is written in big blocks.
  static char out_buf[1 << 16];
  std::setvbuf(out, out_buf, _IOFBF, sizeof out_buf);
  // A coordinated cursor names the job it was saved in, which its next resume is keyed by: a
  // trainer killed before its first --checkpoint-every still resumes with the others.
  if (!f.checkpoint_to.empty() && opts.num_consumers)
    if (Status st = save_checkpoint(); !st.ok())
      return report_status(kInfo.name, st);
  constexpr milliseconds kSlice{50}; // how often a wait checks for Ctrl-C and flushes
  constexpr milliseconds kFlushEvery{100};
  auto last_flush = Clock::now();
  int64_t count = 0;
  std::optional<ReadProgress> progress;
  if (show_progress)
    progress.emplace(stderr, stderr_terminal, total, Clock::now());
  Status failure;
  auto last_element = Clock::now();
  bool warned_no_workers = false;
  bool no_workers = false;
  while ((f.take < 0 || count < f.take) && !stop_requested()) {
    Element element;
    bool end = false;
    Status st = stream->next(element, end, kSlice);
    if (progress)
      progress->tick(Clock::now(), count, *stream);
    if (st.code() == ErrorCode::deadline_exceeded) {
      std::fflush(out);
      last_flush = Clock::now();
      const auto waited = Clock::now() - last_element;
      // Nothing for a while: is anyone serving? Asked once, and again at the timeout.
      if (count == 0 && !warned_no_workers &&
          (waited >= milliseconds{1000} || waited >= *timeout)) {
        warned_no_workers = true;
        no_workers =
          dispatcher_has_no_workers(address->to_string(), *connect_timeout, client_config.network);
        if (no_workers)
          log::warning("read", "no workers are registered with the dispatcher at " +
                                 address->to_string() + "; waiting for one (up to `--timeout-ms` " +
                                 std::to_string(f.timeout_ms) + " ms)");
      }
      if (waited >= *timeout) {
        if (count == 0 && no_workers &&
            dispatcher_has_no_workers(address->to_string(), *connect_timeout,
                                      client_config.network))
          failure =
            Status(ErrorCode::unavailable,
                   "no workers are registered with the dispatcher at " + address->to_string() +
                     " (start one with `conveyor worker --dispatcher " + address->to_string() +
                     " --port 0`); no element arrived within " + std::to_string(f.timeout_ms) +
                     " ms (`--timeout-ms`)");
        else {
          std::string why = job_waits_for(address->to_string(), *connect_timeout,
                                          client_config.network, stream->job_id());
          failure = Status(ErrorCode::deadline_exceeded,
                           "no element arrived within " + std::to_string(f.timeout_ms) +
                             " ms (`--timeout-ms`)" +
                             (why.empty() ? std::string{} : "; the job waits for " + why));
        }
        break;
      }
      continue;
    }
    if (!st.ok()) {
      failure = st;
      break;
    }
    if (end)
      break;
    last_element = Clock::now();
    if (last_element - last_flush >= kFlushEvery) { // (what came before this element)
      std::fflush(out);
      last_flush = last_element;
    }
    ++count;
    switch (f.print) {
      case PrintMode::text: {
        const std::string line = element.to_string();
        std::fwrite(line.data(), 1, line.size(), out);
        std::fputc('\n', out);
        break;
      }
      case PrintMode::digest: std::fprintf(out, "%s\n", digest_of(element).c_str()); break;
      case PrintMode::none: break;
    }
    if (!f.checkpoint_to.empty() && count % f.checkpoint_every == 0)
      if (Status st = save_checkpoint(); !st.ok()) {
        failure = st;
        break;
      }
  }
  std::fflush(out);
  if (!f.checkpoint_to.empty() && failure.ok())
    failure = save_checkpoint();
  if (progress)
    progress->finish();
  if (f.stats) {
    const StreamStats s = stream->stats();
    // What the reader printed, then what arrived: with --take the stream has prefetched more
    // than it hands out, and those are received, not read.
    std::fprintf(stderr,
                 "read: %lld elements read; received %lld elements, %lld bytes in %lld messages "
                 "from job %s\n",
                 static_cast<long long>(count), static_cast<long long>(s.elements),
                 static_cast<long long>(s.bytes), static_cast<long long>(s.messages),
                 stream->job_id().c_str());
    if (s.elements > count)
      std::fprintf(stderr,
                   "read: %lld received elements were not read (prefetched beyond --take)\n",
                   static_cast<long long>(s.elements - count));
    for (const auto& [worker, n] : s.per_worker)
      std::fprintf(stderr, "read:   %s: %lld elements received\n", worker.c_str(),
                   static_cast<long long>(n));
    if (opts.deterministic)
      std::fprintf(stderr,
                   "read: the deterministic order held at most %lld element(s), %lld bytes, at "
                   "once\n",
                   static_cast<long long>(s.order_held_peak),
                   static_cast<long long>(s.order_held_peak_bytes));
    if (opts.policy == ShardingPolicy::off)
      std::fprintf(stderr, "read: %lld task(s) lost before their end (their copy is short)\n",
                   static_cast<long long>(s.lost_tasks));
    // "Why is my trainer waiting": the reader's blocked time by cause (consumer/wait_stats.hpp).
    const double elapsed = static_cast<double>(s.elapsed_ns) / 1e9;
    const double waited = static_cast<double>(s.wait_worker_ns + s.wait_network_ns +
                                              s.wait_split_ns + s.wait_credit_ns) /
                          1e9;
    const auto pct = [&](int64_t ns) { return elapsed > 0 ? 100.0 * (ns / 1e9) / elapsed : 0.0; };
    std::fprintf(stderr,
                 "read: waiting %.3f s of %.3f s (%.0f%%): worker %.0f%%, network %.0f%%, "
                 "split hand-out %.0f%%, credit limits %.0f%%\n",
                 waited, elapsed, elapsed > 0 ? 100.0 * waited / elapsed : 0.0,
                 pct(s.wait_worker_ns), pct(s.wait_network_ns), pct(s.wait_split_ns),
                 pct(s.wait_credit_ns));
  }
  if (!failure.ok())
    return report_error(kInfo.name,
                        "reading failed after " + std::to_string(count) +
                          " elements: " + failure.to_string(),
                        kExitFailure);
  if (stop_requested())
    return 130; // the shell's convention for "ended by SIGINT"
  return kExitOk;
}

const Subcommand reg{"read", "read a dataset through the service, one element per line", run_read};

} // namespace
} // namespace conveyor::apps
