// What a consumer does, without actors: tracks the job's tasks, decides which task to ask for
// how many elements (credit-based flow control), reassembles chunked batches, decodes them, and
// decides when the stream has ended.
//
// Credits: at most `max_outstanding` elements are ever requested-but-not-received, plus
// received-but-not-acknowledged by the sink (the caller). A request reserves its max_elements;
// its reply releases the reservation and adds what arrived as unacknowledged; an ack from the
// sink releases those. Bytes are bounded the same way by `max_bytes` (each request reserves
// its max_bytes; delivered bytes count until acknowledged), and an element larger than a
// message travels in chunks that are always fetched, whatever the credits.
//
// End: the job said every task's pipeline ended, and every task the consumer knows reached
// end_of_sequence. A task the job no longer lists (its worker was removed): DYNAMIC — the job
// hands its unfinished splits out again, so the task is dropped; OFF — its remaining elements
// cannot be read elsewhere (unless the task had reached its end, or retired: an endless OFF task
// of a draining worker, which told this consumer that it serves nothing more and everything it
// sent was acknowledged). What OFF does then is ConsumerLimits::fail_on_worker_loss: the read
// FAILS, or (the default, as tf.data) it reads on with the tasks left, and the task counts as
// lost (lost_tasks(), a warning in take_warnings()) — once per task actor, whichever way its
// elements went (task unlisted, re-created after it served some, connection broken with
// elements in flight, late reply, bulk channel lost). The static policies always fail (a
// lost shard is in no other copy).
//
// Every batch received is acknowledged to its task with the next request (acks): DYNAMIC tasks
// learn which splits are safe, and a draining worker which batches arrived (OFF too). Batches of per-split pipelines carry
// their elements' origin (source, split, sequence); the core drops any element whose origin
// it already received — repeats of a split that was handed out again.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "messages/job_consumer.hpp"
#include "consumer/ready_elements.hpp"
#include "messages/worker_consumer.hpp"
#include "pipeline/tensor/element.hpp"
#include "pipeline/sharding/read_cursor.hpp"
#include "pipeline/sharding/sharding.hpp"
#include "pipeline/runtime/status.hpp"

namespace conveyor::actors {

struct ConsumerLimits {
  int64_t max_outstanding = 65536; // elements
  int64_t max_bytes = 64 << 20;
  uint32_t max_in_flight_per_task = 2;
  uint32_t max_elements_per_request = msg::kMaxElementsPerRequest;
  uint64_t max_bytes_per_request = msg::kMaxChunkBytes;
  // A request on a bulk channel (no 4 MiB messages there) may ask for this many bytes (a
  // quarter of the default byte budget, so that two requests per task stay in flight).
  uint64_t max_bytes_per_bulk_request = 16u << 20;
  // Whole-epoch cross-trainer sharing: greet each task with an empty request as soon as it is
  // connected, whatever the credits, so that its cache keeps what this trainer has not read
  // (a trainer a task first hears of after its cache evicted is refused).
  bool greet_tasks = false;
  // OFF only (DistributeOptions::on_worker_loss): a task lost before its end fails the read
  // (true) or is counted and warned about while the read goes on (false).
  bool fail_on_worker_loss = false;
};

class ConsumerCore {
public:
  explicit ConsumerCore(ConsumerLimits limits);

  struct Request {
    uint64_t id = 0; // unique per consumer: replies of a lost task's requests are ignored
    msg::task_id_t task = 0;
    uint32_t max_elements = 0;
    uint64_t max_bytes = 0;
    std::vector<uint64_t> acks; // batches of this task received since the last request
    bool reconnected = false;   // first request after a reconnection to the task's worker
    bool retired_ack = false;   // acknowledges the task's `retired` mark (asks for nothing)
  };

  // The job's sharding policy: DYNAMIC re-reads a lost task's splits elsewhere; every other
  // policy fails the read when a task is lost before its end, naming the policy.
  void set_policy(ShardingPolicy policy) {
    policy_ = policy;
    dynamic_ = policy == ShardingPolicy::dynamic;
  }
  void set_dynamic(bool dynamic) {
    set_policy(dynamic ? ShardingPolicy::dynamic : ShardingPolicy::off);
  }

  // A read resumed from `cursor` (DistributeOptions::resume_from): elements it covers are dropped
  // as repeats. The job's workers skip them already; this keeps the guarantee where they cannot
  // (a restarted dispatcher's job does not know the cursor).
  void resume_from(std::shared_ptr<const ReadCursor> cursor) { resumed_ = std::move(cursor); }
  // A new task list from the job. Returns the tasks the consumer has not seen before: the
  // caller connects to their workers and calls on_connected() (or on_task_lost()).
  // A task that disappears from the list is dropped (DYNAMIC) or fails the read (OFF, see
  // above): error() says why, and the caller ends the stream with it. A list carrying an error
  // fails the read too.
  std::vector<msg::task_info> on_task_list(const msg::task_list& list);
  // Coordinated reads: a retired task served every round it owed this consumer (the planner
  // checked): it is at its end, so its leaving the list is no loss.
  void task_ended(msg::task_id_t task);
  const Status& error() const { return error_; }
  // The connection to the task's worker broke: its in-flight requests are released; the task
  // is asked again (with reconnected = true) once the caller reconnected (on_connected).
  void on_disconnected(msg::task_id_t task);
  bool connected(msg::task_id_t task) const;
  // Elements dropped as repeats of a re-issued split.
  int64_t duplicates_dropped() const { return duplicates_; }
  uint64_t known_version() const { return version_; }
  // Re-joined the job after the connection to the dispatcher broke. `restarted`: it is served
  // by a restarted dispatcher now (a new job actor): its task lists start over, and a known
  // task it does not list yet (its worker has not registered again) is kept until a list names
  // every known task again or says production is over — or the task ends or is lost on its own. The same job actor (only
  // the connection broke): its lists are complete, so a task it no longer lists is gone.
  void on_job_rejoined(bool restarted);
  bool job_finished() const { return job_finished_; }

  void on_connected(msg::task_id_t task);
  // The task's worker is gone or unreachable: forget the task, release its reservations.
  void on_task_lost(msg::task_id_t task);
  // The task's worker could not be reached for longer than the request timeout while the job
  // still lists it (`why` says what failed). OFF with on_worker_loss "continue": counted as
  // lost (once per task actor, however often it happens) and forgotten — a later task list
  // that still names it brings it back, read on from where its actor is; returns true. Otherwise
  // false: the caller fails the read.
  bool give_up(msg::task_id_t task, const std::string& why);

  // Deterministic reads over their hold budget: only these tasks are asked for elements (the
  // task of the split the reader waits for first); others get only their acknowledgements.
  // None of them connected, or none named, with `waits_for`: the tasks that have not moved past
  // that split are asked (every task when all have); without: every task. `waits_for`: the split the reader's
  // order waits for. The job names its tasks only at its next task list, so a task it named
  // that has moved past that split since (its last batch ended it or holds a later one: what it
  // sends now is only held) is not asked; the tasks that have not moved past it are, one of
  // them serves it. When every task has moved past it, the named ones are asked (a split
  // handed out again goes to a task that had moved on).
  void focus_on(std::vector<msg::task_id_t> tasks,
                std::optional<std::pair<int64_t, int64_t>> waits_for = std::nullopt) {
    focus_ = std::move(tasks);
    focus_split_ = waits_for;
  }

  // The requests to send now (each already reserved).
  std::vector<Request> next_requests();

  // A reply to `request`. The elements of every batch this reply completed are appended to
  // `out`, still encoded (the reader decodes them: a corrupt batch is data_loss there).
  Status on_reply(const Request& request, msg::element_batch batch, ReadyElements& out);
  // --- the bulk path (net/bulk.hpp)
  // Requests to `task` go on an open bulk channel (true) or get inline payloads (false).
  void set_bulk(msg::task_id_t task, bool on);
  bool bulk(msg::task_id_t task) const;
  // Frame `index` of `count` of (task, batch_seq); `frame` (which `owner` keeps alive) is the
  // element's encoding and becomes its storage. Completed batches are decoded into `out` in
  // order (a frame decodes into a view of itself: no allocation per element to defer). A frame
  // may arrive before or after the reply that announces it.
  Status on_frame(msg::task_id_t task, uint64_t batch_seq, uint32_t index, uint32_t count,
                  StorageOwner owner, std::string_view frame, ReadyElements& out);
  // The bulk channel of these tasks broke: batches announced or partly received on it are
  // lost. OFF: data_loss (never silent). DYNAMIC: OK — they were never acknowledged, so the
  // tasks are told `reconnected` and their splits are read again. With nothing in flight it is
  // OK; the tasks go back to inline payloads until a channel is open again.
  Status on_bulk_lost(const std::vector<msg::task_id_t>& tasks, const std::string& why);
  // Batches announced on the bulk path whose frames have not all arrived.
  std::size_t bulk_batches_waiting() const;

  // A request that failed without a verdict on the task (e.g. timed out): release it; the task
  // is asked again. Its reply may still come: DYNAMIC drops it (the task hands the batch's
  // splits out again); OFF cannot ask for its elements again, so a late reply that holds any
  // is data_loss (on_reply), never a silent gap.
  void on_request_failed(const Request& request);
  // Whether `request` still counts (false once its task was lost).
  bool in_flight(const Request& request) const { return in_flight_.count(request.id) > 0; }
  // Which actor serves `task` ("id@node"; empty when not known).
  std::string incarnation(msg::task_id_t task) const {
    auto t = tasks_.find(task);
    return t == tasks_.end() ? std::string{} : t->second.incarnation;
  }
  // The sink took `n` elements.
  void on_ack(uint64_t n);

  bool finished() const;
  // OFF: the tasks whose every element came in (end of sequence, no batch partial) since the
  // last call: (slot, the number after the slot's last element). Lost and retired tasks never.
  std::vector<std::pair<int64_t, int64_t>> take_ended_slots();
  bool knows_task(msg::task_id_t task) const { return tasks_.count(task) > 0; }
  // The task retired (element_batch.retired): its worker drains, and losing it loses nothing.
  // The mark is acknowledged with one more request (retired_ack): the worker leaves only then.
  bool retired(msg::task_id_t task) const {
    auto t = tasks_.find(task);
    return t != tasks_.end() && t->second.retired;
  }

  // OFF tasks whose copy of the dataset came short (on_worker_loss "continue"), and the
  // warnings that say which (each once; the caller logs them).
  int64_t lost_tasks() const { return lost_tasks_; }
  std::vector<std::string> take_warnings() { return std::exchange(warnings_, {}); }

  // Counters.
  int64_t elements_received() const { return elements_; }
  int64_t bytes_received() const { return bytes_; }
  int64_t messages_received() const { return messages_; }
  const std::map<std::string, int64_t>& per_worker() const { return per_worker_; }
  int64_t outstanding() const { return reserved_elements_ + unacked_elements_; }
  int64_t unacked_elements() const { return unacked_elements_; }
  std::size_t requests_in_flight() const { return in_flight_.size(); }

private:
  struct Partial {
    uint32_t num_chunks = 0;
    uint32_t num_elements = 0;
    uint32_t received = 0;
    std::vector<std::string> chunks;
    std::vector<msg::origin_run> origins;
  };
  struct BulkBatch {
    uint32_t count = 0;
    bool announced = false; // the reply arrived (elements reserved until complete)
    uint32_t received = 0;
    std::vector<std::pair<StorageOwner, std::string_view>> frames;
    std::vector<msg::origin_run> origins; // from the announcing reply
  };
  struct TaskSlot {
    std::string worker_address;
    std::string incarnation; // which actor serves the task (see on_task_list); empty: not known yet
    bool bulk = false;
    std::map<uint64_t, BulkBatch> bulk_batches; // by batch_seq
    bool connected = false;
    bool end_of_sequence = false;
    bool retired = false;         // served all it will and was acknowledged (element_batch.retired)
    bool retired_ack_due = false; // `retired` came and is not acknowledged yet (retired_ack)
    bool short_copy = false;      // lost elements and was counted in lost_tasks_ (OFF, continue)
    bool reconnected = false;
    bool greeted = false; // (ConsumerLimits::greet_tasks)
    uint32_t in_flight = 0;
    int64_t delivered = 0; // elements handed on from this actor
    // Per-split pipelines: the highest split (epoch, index) its batches tagged so far, and
    // whether they ended it (focus_on: has the task moved past the split the reader waits for?)
    std::optional<std::pair<int64_t, int64_t>> at_split;
    bool at_split_ended = false;
    // OFF: the read-cursor slot the task serves and the number its next element has there;
    // whether the reply being delivered is the task's last (its last element ends the slot).
    int64_t off_slot = -1;
    int64_t off_next = 0;
    bool off_last = false;
    bool off_end_taken = false; // take_ended_slots() named it
    std::vector<uint64_t> acks;
    std::map<uint64_t, Partial> partials; // by batch_seq
  };
  // Releases an in-flight request's reservation; false if it no longer counted.
  bool release(const Request& request);
  // Releases the reservations of every request in flight to `task` and of its partial batches.
  void release_task_requests(msg::task_id_t task, const TaskSlot& slot);
  // Frames of batches whose reply this consumer will never take (the request failed, timed
  // out, or went to the task's previous actor, whose late frames may still come) wait for
  // nothing: once no request to the task is in flight, they are dropped with their buffers.
  // (The task hands the splits of batches never acknowledged out again.)
  void drop_unannounced(TaskSlot& slot);
  // An inline batch buffer holding `num_elements`: handed on encoded (less those of re-issued
  // splits already received).
  Status deliver(TaskSlot& slot, std::string payload, uint32_t num_elements,
                 const std::vector<msg::origin_run>& origins, ReadyElements& out);
  // One bulk frame (one element), decoded as a view of the frame.
  Status deliver_frame(TaskSlot& slot, StorageOwner owner, std::string_view frame,
                       const std::vector<msg::origin_run>& origin, ReadyElements& out);
  // Which of `count` elements with these origins are new (DYNAMIC: a re-issued split repeats
  // some); marks them received. Empty: all (no origins). data_loss when the origins tag another
  // number of elements.
  Expected<std::vector<bool>>
  keep_unseen(const TaskSlot& slot, const std::vector<msg::origin_run>& origins, uint32_t count);
  void count_delivered(TaskSlot& slot, std::size_t bytes, std::size_t n);
  // A worker's end marks (count-0 runs, msg::origin_run) leave `origins` for `out`'s reader.
  static void take_end_marks(std::vector<msg::origin_run>& origins, ReadyElements& out);
  // OFF: tags the task's next `n` elements with their slot and numbers (the read cursor counts
  // them); empty for other policies. `last`: they end the task's output.
  std::vector<msg::origin_run> off_origins(TaskSlot& slot, uint32_t n, bool last);
  Status complete_bulk(TaskSlot& slot, uint64_t batch_seq, ReadyElements& out);
  // Completes the task's announced bulk batches whose frames are all in, in batch order.
  Status complete_bulk_in_order(TaskSlot& slot, ReadyElements& out);
  // Which (split, sequence) were received: a contiguous prefix plus the ones beyond it.
  struct Seen {
    int64_t prefix = 0;
    std::set<int64_t> beyond;
    bool insert(int64_t seq);
  };

  ConsumerLimits limits_;
  bool dynamic_ = false;
  ShardingPolicy policy_ = ShardingPolicy::off;
  // Why a lost task's elements are gone: "OFF: each worker serves its own copy of the dataset",
  // "DATA: each worker serves its own shard of the dataset", ...
  std::string lost_for_good() const;
  // The task lost elements for good (`why` says how). OFF with on_worker_loss "continue": counted
  // once per task actor and warned about, the read goes on; otherwise the read fails with `why`.
  void lose(msg::task_id_t id, TaskSlot& slot, Status why);
  Status error_;
  int64_t lost_tasks_ = 0;
  std::set<std::pair<msg::task_id_t, std::string>> counted_; // (task, incarnation) counted lost
  std::vector<std::string> warnings_;
  std::map<std::tuple<int64_t, int64_t, int64_t>, Seen> seen_; // (source, epoch, index)
  std::shared_ptr<const ReadCursor> resumed_;
  int64_t duplicates_ = 0;
  std::map<msg::task_id_t, TaskSlot> tasks_;
  std::map<uint64_t, Request> in_flight_;
  std::map<uint64_t, msg::task_id_t> given_up_; // OFF: failed requests whose reply may come late
  uint64_t next_request_id_ = 1;
  uint64_t version_ = 0;
  bool job_finished_ = false;
  bool keep_unlisted_ = false;    // after on_job_rejoined()
  int64_t reserved_elements_ = 0; // in-flight requests + incomplete chunked batches
  int64_t reserved_bytes_ = 0;
  int64_t unacked_elements_ = 0;
  int64_t unacked_bytes_ = 0;
  // Delivered, unacknowledged batches: {elements left, bytes per element} in delivery order.
  std::deque<std::pair<int64_t, double>> unacked_batches_;
  std::size_t rotation_ = 0;          // fairness: the task asked first rotates
  std::vector<msg::task_id_t> focus_; // (focus_on)
  std::optional<std::pair<int64_t, int64_t>> focus_split_;
  // The tasks of `order` to ask while focused (focus_on).
  std::vector<msg::task_id_t> focused(const std::vector<msg::task_id_t>& order) const;
  // Notes the splits a task's batch tags (TaskSlot::at_split).
  static void note_splits(TaskSlot& slot, const std::vector<msg::origin_run>& origins);
  int64_t elements_ = 0;
  int64_t bytes_ = 0;
  int64_t messages_ = 0;
  std::map<std::string, int64_t> per_worker_;
};

} // namespace conveyor::actors
