// Protocol-wide constants and id types shared by every message header. No CAF here.
#pragma once

#include <cstdint>
#include <string>

namespace conveyor::msg {

// Version of the node-to-node protocol. Every handshake (worker registration, client hello)
// carries it; a peer speaking another version is refused with version_mismatch on both sides.
// Bump it whenever a message changes shape or meaning.
inline constexpr uint32_t kProtocolVersion =
  32; // 2: bulk frames, job lifecycle (acks, origins, repetitions); 3: re-join with the old consumer id; 4: coordinated reads (rounds in get_elements, task_info, task_list, get_tasks, join_job, task_def); 5: a restarted coordinated consumer rejoins (get_elements.round_resume, element_batch.round_next); 6: the worker admits by token too (auth_token in assign_task, stop_task, get_elements, leave_job); 7: coordinated reads retire a draining worker's task (worker_heartbeat.draining, end_rounds, task_info.end_round, task_list.retired_rounds); 8: coordinated reads survive a lost task (get_tasks.lost_reports, task_list.lost_rounds, round_span.served_rounds, get_elements.round_committed_known, element_batch.round_committed); 9: coordinated reads survive a dispatcher restart (join_job.known_active/gone/lost, task_list.rounds_recovering); 10: OFF consumers acknowledge batches too, and an endless OFF task of a draining worker retires (element_batch.retired); 11: a DYNAMIC task cut short by its worker's drain says so (task_done.drained); the cross-trainer cache's sharing mode (get_or_create_job and task_def .cross_trainer_cache: none, window or whole_epoch), and whole-epoch trainers registered by the job (join_job.trainer_id, cache_trainers); 12: status requests carry the admission token (get_status.auth_token), a job's status says what it waits for (job_status.waiting_for); 13: consumers report the OFF tasks they read on without (consumer_progress.lost_tasks); a named job is keyed by the consumer's iteration index (get_or_create_job.iteration); a consumer says which tasks it reads (get_tasks.reading); a job's error carries its code (task_list.error_code); 14: status carries the worker estimate and the autoscaler's state (job_status.desired_workers/recent_worker_wait, cluster_status.desired_workers/autoscale_target/scale_commands/scale_command_failures); 15: elements may carry the dtypes int8..uint64, float16, bfloat16, complex64/128 (element codec dtype codes 6..15); 16: dataset graphs' from_tensors/from_tensor_slices carry a `structure` attribute (nested elements); 17: jobs carry a tenant and its weight (get_or_create_job, task_def, job_status .tenant/.tenant_weight), workers report their executor's thread time per tenant (worker_heartbeat.tenant_usage, worker_status.tenants); 18: interleave carries num_parallel_calls and deterministic (dataset graphs); 19: per-tenant caps (task_def.tenant_max_buffer_bytes, tenant_usage.buffered_bytes/max_buffer_bytes, cluster_status.tenants); 20: resumable DYNAMIC reads (get_or_create_job.resume_cursor; job_info .fingerprint/.split_size/.per_split; origin_run.split_end; Split.skip); 21: a registered dataset's element spec (get_element_spec, element_spec_reply); 22: workers write distributed snapshots (start_snapshot, get_snapshot_splits, worker_heartbeat/heartbeat_ack .snapshot_streams, cluster_status.snapshots); 23: deterministic DYNAMIC reads (get_or_create_job.deterministic_window, get_tasks.finished_known, task_list.finished_splits/finished_next); 24: DYNAMIC over several splittable sources (get_splits.source, Split.source, splits_update.finished keys (source, epoch, index)); 25: the dispatcher nudges workers when snapshot streams wait for them (snapshot_nudge); 26: a DYNAMIC job says its file order seed (job_info.file_seed); 27: resumable OFF reads (task_def.skip, add_task and task_info .off_slot/.off_skip, job_info.off_refusal); 28: a deterministic job names the task of its lowest unfinished split (task_list.lowest_split_tasks); 29: element origins name their source (origin_run.source): a concatenation of sources is per-split; 30: consumers acknowledge an endless OFF task's `retired` mark, and a draining worker waits for it (get_elements.retired_ack); 31: a split's end travels on its own (a zero-count origin_run with split_end) when its last element went out before the worker's pipeline moved past it; 32: element batches of format version 2 (numeric payloads 8-aligned, pipeline/tensor/codec.cpp), so that a consumer views them instead of copying each

using dataset_id_t = std::string; // generated ("1000", "1001", ...) or requested by the user
using job_id_t = uint64_t;
using task_id_t = uint64_t;
using worker_id_t = uint64_t;
using consumer_id_t = uint64_t;

// CAF's remote messaging slows down sharply past a few MiB per message (CAF_NOTES §4), so an
// encoded batch larger than this crosses the network in chunks of at most this size.
inline constexpr std::size_t kMaxChunkBytes = 4u << 20;
// Upper bound on the elements one get_elements request may ask for.
inline constexpr uint32_t kMaxElementsPerRequest = 16384;

// Coordinated reads: the global rounds [start_round, end_round) of a task that is gone (its
// worker drained and left, or was lost). Consumers keep them in their schedule: a restarted
// consumer walks the schedule from round 0 to find where it rejoins. A lost task served only
// its first `served_rounds` local rounds (every consumer received those); its later rounds in
// the span are skipped by every consumer alike (-1: it served them all). Its inspect is in
// messages/job_consumer.hpp; coordinated/round_robin.hpp calls it RoundSpan.
struct round_span {
  task_id_t task = 0;
  int64_t start_round = 0;
  int64_t end_round = 0; // -1: not settled yet (lost_rounds only)
  int64_t served_rounds = -1;
};

// How the trainers of a job read with the cross-trainer cache share its tasks' output
// (worker/cross_trainer_cache.hpp).
enum class CacheSharing : unsigned char {
  none,        // no cache: the job's consumers split its elements
  window,      // the reference's: an infinite dataset; a trainer behind the window skips ahead
  whole_epoch, // beyond the reference: a finite dataset; each trainer reads every element once
};
inline const char* to_string(CacheSharing s) {
  switch (s) {
    case CacheSharing::none: return "off";
    case CacheSharing::window: return "on";
    case CacheSharing::whole_epoch: return "on, whole epoch";
  }
  return "?";
}

} // namespace conveyor::msg
