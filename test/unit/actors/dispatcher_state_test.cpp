// DispatcherState: update records applied one by one, no actors, no clock.
#include <doctest/doctest.h>

#include "dispatcher/dispatcher_state.hpp"

using namespace conveyor;
using namespace conveyor::actors;
using namespace conveyor::msg;

namespace {

Status add_dataset(DispatcherState& s, const std::string& id, const std::string& fp) {
  return s.apply(RegisterDatasetRecord{id, fp, "def-" + fp, 0, 1});
}

} // namespace

TEST_CASE("datasets are found by id and by fingerprint") {
  DispatcherState s;
  CHECK(s.next_dataset_id() == "1000");
  REQUIRE(add_dataset(s, s.next_dataset_id(), "aaaa").ok());
  CHECK(s.next_dataset_id() == "1001");
  REQUIRE(s.dataset("1000"));
  CHECK(s.dataset("1000")->definition == "def-aaaa");
  // (add_dataset registers with compression 0, NONE: the index is keyed by both.)
  REQUIRE(s.dataset_by_fingerprint("aaaa", Compression::none));
  CHECK(s.dataset_by_fingerprint("aaaa", Compression::none)->id == "1000");
  CHECK(s.dataset_by_fingerprint("aaaa") == nullptr); // AUTO: another dataset
  CHECK(s.dataset("1001") == nullptr);
  // A requested id is a new id for the same definition; the fingerprint keeps its first id.
  REQUIRE(add_dataset(s, "mine", "aaaa").ok());
  CHECK(s.dataset_by_fingerprint("aaaa", Compression::none)->id == "1000");
  // The same definition registered with AUTO is found under AUTO only.
  REQUIRE(s.apply(RegisterDatasetRecord{"auto", "aaaa", "def-aaaa",
                                        static_cast<uint8_t>(Compression::automatic), 1})
            .ok());
  CHECK(s.dataset_by_fingerprint("aaaa")->id == "auto");
  CHECK(s.dataset_by_fingerprint("aaaa", Compression::none)->id == "1000");
  auto dup = add_dataset(s, "mine", "bbbb");
  CHECK(dup.code() == ErrorCode::failed_precondition);
  CHECK(dup.message() == "dataset id \"mine\" is already registered");
  // A requested numeric id moves the generator past it.
  REQUIRE(add_dataset(s, "1005", "cccc").ok());
  CHECK(s.next_dataset_id() == "1006");
}

TEST_CASE("workers, jobs and tasks") {
  DispatcherState s;
  REQUIRE(add_dataset(s, "1000", "f").ok());
  REQUIRE(s.apply(RegisterWorkerRecord{s.next_worker_id(), "h:1", 10}).ok());
  REQUIRE(s.apply(RegisterWorkerRecord{s.next_worker_id(), "h:2", 11}).ok());
  CHECK(s.workers().size() == 2);
  CHECK(s.worker_by_address("h:2")->id == 2);
  CHECK(s.apply(RegisterWorkerRecord{3, "h:2", 12}).code() == ErrorCode::failed_precondition);

  REQUIRE(s.apply(CreateNamedJobRecord{
                    CreateJobRecord{s.next_job_id(), "1000", "shared", 1, -1, "AUTO", 20}, 0})
            .ok());
  REQUIRE(s.job(1));
  CHECK(s.job(1)->policy == ShardingPolicy::dynamic);
  CHECK(s.named_job("1000", "shared", 0)->id == 1);
  CHECK(s.named_job("1000", "other", 0) == nullptr);
  auto again =
    s.apply(CreateNamedJobRecord{CreateJobRecord{2, "1000", "shared", 0, -1, "AUTO", 21}, 0});
  CHECK(again.message() ==
        "a job named \"shared\" already exists for dataset 1000 and iteration 0");
  CHECK(s.apply(CreateJobRecord{2, "nope", "", 0, -1, "AUTO", 21}).code() == ErrorCode::not_found);

  REQUIRE(s.apply(CreateTaskRecord{s.next_task_id(), 1, 1, 30}).ok());
  REQUIRE(s.apply(CreateTaskRecord{s.next_task_id(), 1, 2, 30}).ok());
  CHECK(s.tasks_of_job(1).size() == 2);
  // One task per job and worker.
  CHECK(s.apply(CreateTaskRecord{3, 1, 2, 31}).code() == ErrorCode::failed_precondition);
  CHECK(s.apply(CreateTaskRecord{3, 1, 9, 31}).code() == ErrorCode::not_found);

  // Removing a worker removes its tasks.
  REQUIRE(s.apply(RemoveWorkerRecord{2, "no heartbeat", 40}).ok());
  CHECK(s.worker(2) == nullptr);
  CHECK(s.tasks_of_job(1).size() == 1);
  CHECK(s.task(2) == nullptr); // erased: nothing grows per removed task
  CHECK(s.apply(RemoveWorkerRecord{2, "again", 41}).code() == ErrorCode::not_found);
  // The same address may register again, under a new id.
  REQUIRE(s.apply(RegisterWorkerRecord{s.next_worker_id(), "h:2", 50}).ok());
  CHECK(s.worker_by_address("h:2")->id == 3);
  REQUIRE(s.apply(CreateTaskRecord{s.next_task_id(), 1, 3, 51}).ok());
  CHECK(s.tasks_of_worker(3).size() == 1);

  // Finishing.
  REQUIRE(s.apply(FinishTaskRecord{1, "", 60}).ok());
  CHECK(s.task(1)->finished);
  CHECK(s.unfinished_jobs().size() == 1);
  REQUIRE(s.apply(FinishJobRecord{1, 61}).ok());
  CHECK(s.unfinished_jobs().empty());
  // A finished job takes no new task.
  REQUIRE(s.apply(RegisterWorkerRecord{s.next_worker_id(), "h:4", 70}).ok());
  CHECK(s.apply(CreateTaskRecord{s.next_task_id(), 1, 4, 71}).message() ==
        "job 1 is finished; it gets no tasks");
}

TEST_CASE("replaying the same records gives the same state and the same next ids") {
  std::vector<Update> log = {RegisterDatasetRecord{"1000", "f", "d", 0, 1},
                             RegisterWorkerRecord{1, "a:1", 2},
                             CreateJobRecord{1, "1000", "", 0, -1, "AUTO", 3},
                             CreateTaskRecord{1, 1, 1, 4},
                             FinishTaskRecord{1, "", 5},
                             ReleaseJobRecord{1, 6}};
  DispatcherState a, b;
  for (const auto& u : log)
    REQUIRE(a.apply(u).ok());
  for (const auto& u : log)
    REQUIRE(b.apply(u).ok());
  CHECK(a.next_task_id() == b.next_task_id());
  CHECK(a.next_job_id() == 2);
  CHECK(a.next_worker_id() == 2);
  CHECK(a.next_dataset_id() == "1001");
  CHECK(a.job(1) == nullptr); // released jobs are erased, with their tasks
  CHECK(a.task(1) == nullptr);
}

TEST_CASE("a named job is keyed by its iteration and kept after its release until forgotten") {
  DispatcherState s;
  REQUIRE(s.apply(RegisterDatasetRecord{"1000", "f", "d", 0, 1}).ok());
  auto named = [](job_id_t id, int64_t iteration) {
    return CreateNamedJobRecord{CreateJobRecord{id, "1000", "n", 0, -1, "AUTO", 2}, iteration};
  };
  REQUIRE(s.apply(named(1, 0)).ok());
  CHECK(s.named_job("1000", "n", 0)->repetition == 0);
  CHECK(s.apply(named(2, 0)).code() == ErrorCode::failed_precondition); // shared, not created again
  CHECK(s.live_named_job("1000", "n")->id == 1);
  // Released: kept (ended, no tasks) for its iteration, so a late consumer of iteration 0 reads
  // end of sequence instead of the data again (tf.data keeps finished iterations until GC).
  REQUIRE(s.apply(ReleaseJobRecord{1, 4}).ok());
  REQUIRE(s.named_job("1000", "n", 0));
  CHECK(s.named_job("1000", "n", 0)->released);
  CHECK(s.live_named_job("1000", "n") == nullptr);
  CHECK(s.apply(named(2, 0)).code() == ErrorCode::failed_precondition);
  CHECK(s.unfinished_jobs().empty());
  CHECK(s.released_named_jobs().size() == 1);
  // Iteration 1 is a job of its own; iterations need not come in order.
  REQUIRE(s.apply(named(2, 3)).ok());
  CHECK(s.named_job("1000", "n", 3)->id == 2);
  CHECK(s.next_iteration("1000", "n") == 4);
  CHECK(s.live_named_job("1000", "n")->id == 2);
  // Job GC forgets the ended iteration; only a released job can be forgotten.
  CHECK(s.apply(ForgetJobRecord{2, 5}).code() == ErrorCode::failed_precondition);
  REQUIRE(s.apply(ForgetJobRecord{1, 5}).ok());
  CHECK(s.named_job("1000", "n", 0) == nullptr);
  CHECK(s.job(1) == nullptr);
  REQUIRE(s.apply(named(3, 0)).ok()); // the iteration may run again
  CHECK(s.apply(CreateNamedJobRecord{CreateJobRecord{4, "1000", "", 0, -1, "AUTO", 2}, 0}).code() ==
        ErrorCode::invalid_argument);
}

TEST_CASE("an older journal's CreateJobRecord of a name reads the name's next repetition") {
  DispatcherState s;
  REQUIRE(s.apply(RegisterDatasetRecord{"1000", "f", "d", 0, 1}).ok());
  REQUIRE(s.apply(CreateJobRecord{1, "1000", "n", 0, -1, "AUTO", 2}).ok());
  REQUIRE(s.apply(ReleaseJobRecord{1, 3}).ok());
  REQUIRE(s.apply(CreateJobRecord{2, "1000", "n", 0, -1, "AUTO", 4}).ok());
  CHECK(s.named_job("1000", "n", 1)->id == 2);
  CHECK(s.named_job("1000", "n", 0)->released);
}

TEST_CASE("split records: handed out and not finished is what a restart hands out again") {
  DispatcherState s;
  REQUIRE(add_dataset(s, "1000", "f").ok());
  REQUIRE(s.apply(CreateJobRecord{1, "1000", "", 1, -1, "AUTO", 20, 10}).ok());
  auto split = [](int64_t index) {
    return JournalSplit{0, index, index * 10, index * 10 + 10, ""};
  };
  // Two answers hand out splits 0-2; then 0 and 2 finish (a finish-only record).
  REQUIRE(s.apply(SplitPositionRecord{1, 0, 0, 2, 2, 30, {split(0), split(1)}, {}}).ok());
  REQUIRE(s.apply(SplitPositionRecord{1, 0, 0, 3, 3, 31, {split(2)}, {}}).ok());
  REQUIRE(s.apply(SplitPositionRecord{1, 0, 0, 0, 0, 32, {}, {{0, 0}, {0, 2}}}).ok());
  const auto* job = s.job(1);
  REQUIRE(job);
  REQUIRE(job->outstanding_splits.size() == 1);
  CHECK(job->outstanding_splits[0].index == 1);
  CHECK(job->outstanding_splits[0].begin == 10);
  // The finish-only record left the position where the last hand-out put it.
  CHECK(job->split_next_index == 3);
  CHECK(job->splits_handed_out == 3);
  // A re-issue of split 1 (its task was lost) replaces it; it finishes; nothing is outstanding.
  REQUIRE(s.apply(SplitPositionRecord{1, 0, 0, 3, 4, 33, {split(1)}, {}}).ok());
  CHECK(s.job(1)->outstanding_splits.size() == 1);
  REQUIRE(s.apply(SplitPositionRecord{1, 0, 0, 0, 0, 34, {}, {{0, 1}}}).ok());
  CHECK(s.job(1)->outstanding_splits.empty());
  CHECK(s.job(1)->splits_handed_out == 4);
}
