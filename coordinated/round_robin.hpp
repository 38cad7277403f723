// Coordinated (round-robin) reads, without actors: tf.data service's `num_consumers` /
// `consumer_index` (RoundRobinTaskRunner + the client's round handling), as three small state
// machines the job, task and consumer actors drive.
//
// Rounds. A named job read by N consumers (consumer_index 0..N-1) is read in *rounds*: in round r
// every consumer receives exactly one element, all N from the same task, which produced them one
// after the other: consumer i gets the i-th of the task's N elements for that round. So the N
// trainers see aligned global batches (the reference's bucketizing use case).
//
// Which task serves round r is a pure function every party computes alike (RoundSchedule): the
// job gives each task a *start round*; the tasks active at r are those whose start round is <= r,
// in order of (start round, task id); round r goes to active[r mod |active|]. A task counts its
// own rounds as *local* rounds 0, 1, 2, ... (the k-th global round it serves is its local round k).
//
//   consumer i -> task   get_elements{round_first = j, round_count = k, consumer_index = i}: "my
//                        elements of your local rounds j .. j+k-1" (j must be the next local round
//                        the task owes consumer i: a gap = a skipped round, a repeat = a round served
//                        twice; both are errors, never silent).
//   task                 completes local round j once all N consumers asked for it: takes N
//                        elements from its buffer, element i reserved for consumer i
//                        (RoundRobinTaskRounds). A round some consumer does not ask for within
//                        the consumers' round timeout fails the held requests with an error
//                        naming the missing consumer indices.
//   job -> consumers     task_list: every task's start round (-1 = pending) and a *fence*: no
//                        consumer plans a round >= fence while a task is pending.
//   consumer -> job      get_tasks{round = next round it would plan, round_fence = the fence it
//                        knows}: the poll is also the ack of the fence.
//
// New workers (RoundRobinJob). The first tasks start at round 0. A task added later is *pending*:
// the job sets the fence R = (the highest round any consumer reported) + lookahead and waits
// until every joined consumer reported the fence R and a round <= R (then none plans past R
// without the new task). It then gives the pending tasks start round R and lifts the fence. A
// consumer that was already past R makes the job move R further out. No round is skipped or
// repeated, because no consumer ever planned a round >= R under the old schedule.
//
// A restarted consumer (RoundRobinPlanner::start_resuming, RoundRobinTaskRounds::resume): the
// new process of an index asks every task where the index stands and starts at the first round
// every task can serve it; the tasks drop what they kept for the index before that round.
//
// The commit watermark (RoundRobinTaskRounds::committed): every reply of a task says which of its
// local rounds every consumer has (asking for rounds from j, or a *confirm*, says "I have those
// below j"); a consumer hands a round to its reader only below it. So no consumer ever handed
// out a round another consumer may never get.
//
// A lost task (RoundRobinJob::task_lost; its worker crashed or cannot be reached, or it left
// after a drain): its rounds cannot be served elsewhere, so the job *settles* it. It ends behind
// a fence like a draining task (if it had no end round yet); consumers stop asking it and report
// how many of its local rounds they received; the least of those, K, is what it served. Every
// consumer hands out the task's local rounds below K (the watermark was at most K, so none
// handed out more) and skips its later rounds up to its end round alike: the rounds stay aligned
// and only what the lost worker held is lost. A consumer that did hand out more (none should)
// fails loudly (RoundRobinPlanner::on_tasks).
//
// A restarted dispatcher (RoundRobinJob::start_recovery): the schedule lived in the job and in
// every consumer's planner, and only what some consumer saw was ever planned with. The restored
// job decides nothing until every consumer_index joined again and said what its planner knows
// (RoundRobinPlanner::known_schedule -> join_job.known_*; task_list.rounds_recovering meanwhile,
// which the consumers skip while they read on from the tasks they know). The union of those is
// the old job's schedule as far as anyone planned with it: the tasks' start and end rounds, the
// retired and settled tasks, and lost tasks still being settled. Tasks that had not started yet
// (pending) or that nobody saw start join behind a fence again, as new workers do.
#pragma once

// The umbrella include: one header per state machine.
#include "coordinated/round_elements.hpp"
#include "coordinated/round_robin_job.hpp"
#include "coordinated/round_robin_planner.hpp"
#include "coordinated/round_robin_task_rounds.hpp"
#include "coordinated/round_schedule.hpp"
