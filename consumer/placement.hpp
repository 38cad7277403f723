// Placement (issue 10): worker tags and which workers a consumer reads from — the reference's
// `target_workers` (003_3cbebc871b174894.txt) with the rules of tf.data's client
// (ShouldReadFromTask, ValidateLocalWorkers). CAF-free: the consumer actor asks it per task.
//
//   ANY    read every task of the job, wherever its worker runs, always over the network
//          (also a worker of this process: the path a remote worker takes).
//   LOCAL  read only tasks of workers running in this process (an in-process WorkerServer,
//          found in worker/local_workers.hpp); there the elements go worker -> consumer as
//          in-process messages (no socket, no serialization). No local worker = an error.
//   AUTO   every task, as ANY, but a worker of this process is read in-process (as LOCAL), and
//          a worker tagged COLOCATED (it runs beside a trainer) is read only by a consumer in
//          its own process: reading another trainer's colocated worker would compete with that
//          trainer for its host.
// Coordinated reads (num_consumers) read every task whatever the target (the reference's
// rule), and cannot be combined with LOCAL.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "pipeline/sharding/sharding.hpp"
#include "pipeline/runtime/status.hpp"

namespace conveyor::actors {

// The tag of a worker that runs beside a trainer (the reference's kColocatedWorkerTag).
inline constexpr std::string_view kColocatedWorkerTag = "COLOCATED";

enum class TargetWorkers { automatic, any, local };

// "AUTO", "ANY", "LOCAL" (case-sensitive, as the reference); invalid_argument otherwise.
Expected<TargetWorkers> parse_target_workers(std::string_view text);
const char* to_string(TargetWorkers target);

// Worker tags as a worker announces them: any strings, as in tf.data (spaces, the empty tag),
// at most 256 characters each and no control characters, at most 32, no duplicates
// (invalid_argument naming the bad tag). "a,b" splits on commas ("a,,b" has an empty tag).
Status validate_worker_tags(const std::vector<std::string>& tags);
Expected<std::vector<std::string>> parse_worker_tags(std::string_view comma_separated);

bool is_colocated(const std::vector<std::string>& worker_tags);

// Whether a consumer reads the task of a worker with `worker_tags`; `local_task`: the worker
// runs in the consumer's process.
bool should_read_from_task(TargetWorkers target, bool coordinated, bool local_task,
                           const std::vector<std::string>& worker_tags);

// Whether some consumer of a job read with `target_workers` may leave the task of a worker with
// `worker_tags` unread (LOCAL: every worker outside the consumers' processes; AUTO: COLOCATED
// workers; ANY, or an invalid target: none). The job hands such a task DYNAMIC splits only once
// a consumer says it reads it (dispatcher/job_core.hpp require_reader).
bool reader_may_skip(std::string_view target_workers, const std::vector<std::string>& worker_tags);

// Whether a task's elements take the in-process path (LOCAL or AUTO reads of a local worker).
bool reads_in_process(TargetWorkers target, bool local_task);

// The checks the reference makes when a consumer starts: LOCAL needs a worker in this process
// (its two messages, static sharding named), and excludes coordinated reads.
Status check_target_workers(TargetWorkers target, bool have_local_workers, ShardingPolicy policy,
                            bool coordinated);

} // namespace conveyor::actors
