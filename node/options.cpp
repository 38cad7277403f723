// Validation of the consumer API's options (conveyor/options.hpp), worded after the
// reference's ValueErrors (003_3cbebc871b174894.txt).
#include "conveyor/options.hpp"

#include <cctype>
#include <charconv>
#include "pipeline/graph/external_state.hpp"
#include "pipeline/sharding/read_cursor.hpp"
#include "pipeline/sharding/read_order.hpp"

#include "pipeline/runtime/tenant.hpp"

namespace conveyor {

namespace {

std::string quoted(std::string_view s) { return "\"" + std::string{s} + "\""; }

std::string opt_to_string(const std::optional<int64_t>& v) {
  return v ? std::to_string(*v) : std::string{"None"};
}

} // namespace

Expected<ShardingPolicy> parse_processing_mode(std::string_view mode) {
  if (mode == "parallel_epochs")
    return ShardingPolicy::off;
  if (mode == "distributed_epoch")
    return ShardingPolicy::dynamic;
  if (auto policy = sharding_policy_from_string(mode))
    return *policy;
  return invalid_argument(
    "processing mode should be a ShardingPolicy (OFF, DYNAMIC, FILE, DATA, FILE_OR_DATA, HINT), "
    "\"parallel_epochs\", or \"distributed_epoch\". Got " +
    quoted(mode) + ".");
}

Status validate_compression(std::string_view compression) {
  if (compression == "AUTO" || compression == "NONE")
    return Status::OK();
  return invalid_argument("Invalid `compression` argument: " + quoted(compression) +
                          ". Must be one of [\"AUTO\", \"NONE\"].");
}

Status validate_on_worker_loss(std::string_view on_worker_loss) {
  if (on_worker_loss == "continue" || on_worker_loss == "fail")
    return Status::OK();
  return invalid_argument("Invalid `on_worker_loss` argument: " + quoted(on_worker_loss) +
                          ". Must be one of [\"continue\", \"fail\"].");
}

bool fail_on_worker_loss(const DistributeOptions& options) {
  return options.on_worker_loss && *options.on_worker_loss == "fail";
}

Status validate_data_transfer_protocol(std::string_view protocol) {
  if (protocol == "grpc" || protocol == "bulk" || protocol == "caf")
    return Status::OK();
  return invalid_argument("Invalid `data_transfer_protocol` argument: " + quoted(protocol) +
                          ". Must be one of [\"grpc\", \"bulk\", \"caf\"] (\"grpc\" and "
                          "\"bulk\": conveyor's default, messages and its bulk channel; \"caf\": "
                          "messages only).");
}

Status validate_external_state_policy(std::string_view policy) {
  return external_state_policy_from_string(policy).status();
}

bool uses_bulk_channel(const DistributeOptions& options) {
  return !options.data_transfer_protocol || *options.data_transfer_protocol != "caf";
}

Status validate(const DistributeOptions& o) {
  if (o.job_name && o.job_name->empty())
    return invalid_argument("`job_name` must not be empty");
  if (o.consumer_index.has_value() != o.num_consumers.has_value())
    return invalid_argument(
      "Must either set both `consumer_index` and `num_consumers`, or neither. consumer_index=" +
      opt_to_string(o.consumer_index) + ", num_consumers=" + opt_to_string(o.num_consumers));
  if (o.num_consumers && !o.job_name)
    return invalid_argument("`job_name` must be set when setting `num_consumers`. num_consumers "
                            "was set to " +
                            std::to_string(*o.num_consumers) + ".");
  if (o.expected_consumers) {
    if (*o.expected_consumers <= 0)
      return invalid_argument("`expected_consumers` must be positive, got " +
                              std::to_string(*o.expected_consumers));
    if (!o.job_name)
      return invalid_argument("`job_name` must be set when setting `expected_consumers` (only a "
                              "named job is shared). expected_consumers was set to " +
                              std::to_string(*o.expected_consumers) + ".");
    if (o.num_consumers)
      return invalid_argument("`expected_consumers` cannot be combined with `num_consumers`: a "
                              "coordinated read already waits for its num_consumers consumers");
  }
  if (auto s = validate_tenant(o.tenant, o.tenant_weight); !s.ok())
    return s;
  if (o.iteration < 0 && o.iteration != kNextIteration)
    return invalid_argument("`iteration` must be non-negative (or kNextIteration), got " +
                            std::to_string(o.iteration));
  if (o.iteration != 0 && !o.job_name)
    return invalid_argument("`job_name` must be set when setting `iteration` (only a named job "
                            "has iterations). iteration was set to " +
                            std::to_string(o.iteration) + ".");
  if (o.num_consumers && *o.num_consumers <= 0)
    return invalid_argument("`num_consumers` must be positive, got " +
                            std::to_string(*o.num_consumers));
  if (o.consumer_index && (*o.consumer_index < 0 || *o.consumer_index >= *o.num_consumers))
    return invalid_argument("`consumer_index` must be in [0, num_consumers) = [0, " +
                            std::to_string(*o.num_consumers) + "), got " +
                            std::to_string(*o.consumer_index));
  CONVEYOR_RETURN_IF_ERROR(validate_compression(o.compression));
  if (o.target_workers != "AUTO" && o.target_workers != "ANY" && o.target_workers != "LOCAL")
    return invalid_argument("Invalid `target_workers` argument: " + quoted(o.target_workers) +
                            ". Must be one of [\"AUTO\", \"ANY\", \"LOCAL\"].");
  if (o.max_outstanding_requests && *o.max_outstanding_requests <= 0)
    return invalid_argument("`max_outstanding_requests` must be positive, got " +
                            std::to_string(*o.max_outstanding_requests));
  if (o.deterministic_hold_bytes < 1)
    return invalid_argument("`deterministic_hold_bytes` must be at least 1 (bytes), got " +
                            std::to_string(o.deterministic_hold_bytes));
  if (o.max_buffered_bytes <= 0)
    return invalid_argument("`max_buffered_bytes` must be positive, got " +
                            std::to_string(o.max_buffered_bytes));
  if (o.request_timeout.count() <= 0)
    return invalid_argument("`request_timeout` must be positive, got " +
                            std::to_string(o.request_timeout.count()) + " ms");
  if (o.task_refresh_interval.count() <= 0)
    return invalid_argument("`task_refresh_interval` must be positive, got " +
                            std::to_string(o.task_refresh_interval.count()) + " ms");
  if (o.round_timeout.count() <= 0)
    return invalid_argument("`round_timeout` must be positive, got " +
                            std::to_string(o.round_timeout.count()) + " ms");
  if (o.cross_trainer_cache) {
    if (o.cross_trainer_cache->trainer_id.empty())
      return invalid_argument(
        "tf.data service cross-trainer cache requires a non-empty trainer ID.");
    if (!o.job_name)
      return invalid_argument("Cross-trainer caching requires named jobs. Got empty `job_name`.");
    if (o.num_consumers)
      return invalid_argument("Cross-trainer caching does not support coordinated reads. Got "
                              "number of coordinated consumers: " +
                              std::to_string(*o.num_consumers));
  }
  if (o.on_worker_loss) {
    CONVEYOR_RETURN_IF_ERROR(validate_on_worker_loss(*o.on_worker_loss));
    // Accepted and ignored would mislead: only OFF has a choice to make (see options.hpp).
    if (o.policy != ShardingPolicy::off)
      return invalid_argument(
        "`on_worker_loss` applies to the OFF processing mode only, got processing mode " +
        std::string{to_string(o.policy)} +
        (o.policy == ShardingPolicy::dynamic
           ? " (DYNAMIC hands a lost worker's splits to the other workers: nothing is lost)"
           : " (static sharding always fails the read: a lost shard is in no other copy)"));
  }
  if (o.data_transfer_protocol)
    CONVEYOR_RETURN_IF_ERROR(validate_data_transfer_protocol(*o.data_transfer_protocol));
  if (o.external_state_policy)
    CONVEYOR_RETURN_IF_ERROR(validate_external_state_policy(*o.external_state_policy));
  if (o.resume_from) {
    auto cursor = ReadCursor::decode(*o.resume_from, "`resume_from`");
    if (!cursor.ok())
      return cursor.status();
    if (auto why = resume_mode_refusal(cursor->mode(), o.policy); !why.empty())
      return invalid_argument(why);
    if (auto why = coordinated_resume_refusal(*cursor, o.num_consumers.value_or(0),
                                              o.consumer_index.value_or(0));
        !why.empty())
      return invalid_argument(why);
    // (Coordinated reads are named jobs: the N trainers' resumes meet in one new job.)
    if (o.job_name && !cursor->coordinated())
      return invalid_argument("`resume_from` creates a private job: `job_name` must not be set "
                              "(got \"" +
                              *o.job_name + "\")");
    if (o.cross_trainer_cache)
      return invalid_argument("`resume_from` cannot be used with the cross-trainer cache (each "
                              "trainer's position there is the cache's, not a cursor's)");
  }
  if (o.deterministic) {
    const char* why =
      deterministic_refusal(o.policy, o.job_name.has_value(), o.num_consumers.has_value(),
                            o.cross_trainer_cache.has_value());
    if (why)
      return invalid_argument(std::string{"`deterministic` "} + why +
                              (o.policy != ShardingPolicy::dynamic
                                 ? std::string{"; got processing mode "} + to_string(o.policy)
                                 : std::string{}));
  }
  if (o.num_consumers && o.target_workers == "LOCAL")
    return invalid_argument(
      "Coordinated reads require non-local workers, but `target_workers` is \"LOCAL\".");
  // The reference's static sharding policies require that "each client only reads from the
  // local tf.data service worker" (003, ShardingPolicy): ANY reads every worker's shard.
  if (o.policy != ShardingPolicy::off && o.policy != ShardingPolicy::dynamic &&
      o.target_workers == "ANY")
    return invalid_argument(std::string{"Static sharding policy <"} + to_string(o.policy) +
                            "> requires each client to read only from its local tf.data service "
                            "worker, but `target_workers` is \"ANY\": use \"LOCAL\" or \"AUTO\"");
  return Status::OK();
}

std::string HostPort::to_string() const {
  std::string h = host.find(':') != std::string::npos ? "[" + host + "]" : host;
  return h + ":" + std::to_string(port);
}

Expected<HostPort> parse_address(std::string_view address) {
  if (address.empty())
    return invalid_argument("address must not be empty; expected \"host:port\"");
  std::string_view rest = address;
  if (auto p = rest.find("://"); p != std::string_view::npos) {
    if (rest.find("://", p + 3) != std::string_view::npos)
      return invalid_argument("Malformed address " + quoted(address) + " has multiple '://'");
    std::string_view protocol = rest.substr(0, p);
    if (protocol != "conveyor" && protocol != "tcp")
      return invalid_argument("unsupported protocol " + quoted(protocol) + " in address " +
                              quoted(address) +
                              "; expected \"host:port\" or "
                              "\"conveyor://host:port\"");
    rest = rest.substr(p + 3);
  }
  std::string_view host, port;
  if (!rest.empty() && rest.front() == '[') { // [IPv6]:port
    auto close = rest.find(']');
    if (close == std::string_view::npos || close + 1 >= rest.size() || rest[close + 1] != ':')
      return invalid_argument("malformed address " + quoted(address) +
                              "; expected \"[ipv6]:port\"");
    host = rest.substr(1, close - 1);
    port = rest.substr(close + 2);
  } else {
    auto colon = rest.rfind(':');
    if (colon == std::string_view::npos)
      return invalid_argument("address " + quoted(address) +
                              " has no port; expected "
                              "\"host:port\"");
    host = rest.substr(0, colon);
    port = rest.substr(colon + 1);
    if (host.find(':') != std::string_view::npos)
      return invalid_argument("malformed address " + quoted(address) +
                              "; write IPv6 hosts in brackets: \"[::1]:port\"");
  }
  if (host.empty())
    return invalid_argument("address " + quoted(address) +
                            " has an empty host; expected "
                            "\"host:port\"");
  unsigned value = 0;
  auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
  if (port.empty() || ec != std::errc{} || end != port.data() + port.size() || value > 65535)
    return invalid_argument("address " + quoted(address) + " has a bad port " + quoted(port) +
                            "; expected a number in [0, 65535]");
  return HostPort{std::string{host}, static_cast<uint16_t>(value)};
}

} // namespace conveyor
