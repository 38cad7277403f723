#include "consumer/placement.hpp"

#include <algorithm>
#include <cctype>
#include <set>

namespace conveyor::actors {

Expected<TargetWorkers> parse_target_workers(std::string_view text) {
  if (text == "AUTO")
    return TargetWorkers::automatic;
  if (text == "ANY")
    return TargetWorkers::any;
  if (text == "LOCAL")
    return TargetWorkers::local;
  return invalid_argument("Invalid `target_workers` argument: \"" + std::string{text} +
                          "\". Must be one of [\"AUTO\", \"ANY\", \"LOCAL\"].");
}

const char* to_string(TargetWorkers target) {
  switch (target) {
    case TargetWorkers::automatic: return "AUTO";
    case TargetWorkers::any: return "ANY";
    case TargetWorkers::local: return "LOCAL";
  }
  return "?";
}

Status validate_worker_tags(const std::vector<std::string>& tags) {
  if (tags.size() > 32)
    return invalid_argument("a worker may have at most 32 tags, got " +
                            std::to_string(tags.size()));
  std::set<std::string> seen;
  for (const auto& tag : tags) {
    // tf.data takes any string as a tag (spaces and the empty tag included); only what would
    // garble a log line or a status table is refused here, and a bound on the size.
    if (tag.size() > 256)
      return invalid_argument("worker tag \"" + tag.substr(0, 32) + "...\" has " +
                              std::to_string(tag.size()) + " characters, more than 256");
    for (char c : tag)
      if (std::iscntrl(static_cast<unsigned char>(c)))
        return invalid_argument("worker tag \"" + tag + "\" contains a control character (byte " +
                                std::to_string(static_cast<unsigned char>(c)) + ")");
    if (!seen.insert(tag).second)
      return invalid_argument("worker tag \"" + tag + "\" is given twice");
  }
  return Status::OK();
}

Expected<std::vector<std::string>> parse_worker_tags(std::string_view text) {
  std::vector<std::string> tags;
  if (text.empty())
    return tags;
  for (std::size_t b = 0; b <= text.size();) {
    auto e = std::min(text.find(',', b), text.size());
    tags.emplace_back(text.substr(b, e - b));
    b = e + 1;
  }
  CONVEYOR_RETURN_IF_ERROR(validate_worker_tags(tags));
  return tags;
}

bool is_colocated(const std::vector<std::string>& worker_tags) {
  return std::find(worker_tags.begin(), worker_tags.end(), kColocatedWorkerTag) !=
         worker_tags.end();
}

bool should_read_from_task(TargetWorkers target, bool coordinated, bool local_task,
                           const std::vector<std::string>& worker_tags) {
  if (coordinated)
    return true;
  if (target == TargetWorkers::local && !local_task)
    return false;
  // Another host's trainer-side worker: AUTO leaves it to its own trainer.
  if (target == TargetWorkers::automatic && !local_task && is_colocated(worker_tags))
    return false;
  return true;
}

bool reader_may_skip(std::string_view target_workers, const std::vector<std::string>& worker_tags) {
  auto target = parse_target_workers(target_workers);
  if (!target.ok())
    return false;
  switch (*target) {
    case TargetWorkers::local: return true;
    case TargetWorkers::automatic: return is_colocated(worker_tags);
    case TargetWorkers::any: return false;
  }
  return false;
}

bool reads_in_process(TargetWorkers target, bool local_task) {
  return local_task && target != TargetWorkers::any;
}

Status check_target_workers(TargetWorkers target, bool have_local_workers, ShardingPolicy policy,
                            bool coordinated) {
  if (target != TargetWorkers::local)
    return Status::OK();
  if (!have_local_workers) {
    if (policy != ShardingPolicy::off && policy != ShardingPolicy::dynamic)
      return invalid_argument(
        std::string{"Static sharding policy <"} + to_string(policy) +
        "> requires local tf.data workers, but no local worker is found. You need to run local "
        "tf.data service workers in your training workers. Static sharding also requires a "
        "fixed worker pool and a list of worker addresses in the DispatcherConfig. See the "
        "\"Processing Modes\" section in the module doc for details.");
    return invalid_argument("Local reads require local tf.data workers, but no local worker is "
                            "found. You need to run local tf.data service workers in your "
                            "training workers.");
  }
  if (coordinated)
    return invalid_argument(
      "Coordinated reads require non-local workers, but `target_workers` is \"LOCAL\".");
  return Status::OK();
}

} // namespace conveyor::actors
