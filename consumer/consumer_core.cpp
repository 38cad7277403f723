#include "consumer/consumer_core.hpp"

#include <algorithm>
#include <set>
#include <utility>

#include "node/hooks.hpp"
#include "pipeline/tensor/codec.hpp"

namespace conveyor::actors {

namespace {

// The actor behind a listed task. A restarted dispatcher's job lists its journaled task ids again,
// and a worker re-creates the DYNAMIC ones (they end with their dispatcher) under the same id.
std::string incarnation_of(const msg::task_info& t) {
  if (!t.handle)
    return {};
  return std::to_string(t.handle->id()) + "@" + caf::to_string(t.handle->node());
}

// Below this many free bytes no new request is made (unless nothing at all is outstanding,
// which guarantees progress whatever the limits).
constexpr int64_t kMinRequestBytes = 64 << 10;
} // namespace

ConsumerCore::ConsumerCore(ConsumerLimits limits) : limits_(limits) {
  limits_.max_outstanding = std::max<int64_t>(1, limits_.max_outstanding);
  limits_.max_bytes = std::max<int64_t>(1, limits_.max_bytes);
  limits_.max_in_flight_per_task = std::max<uint32_t>(1, limits_.max_in_flight_per_task);
}

bool ConsumerCore::Seen::insert(int64_t seq) {
  if (seq < prefix)
    return false;
  if (seq == prefix) {
    ++prefix;
    while (!beyond.empty() && *beyond.begin() == prefix) {
      beyond.erase(beyond.begin());
      ++prefix;
    }
    return true;
  }
  return beyond.insert(seq).second;
}

std::string ConsumerCore::lost_for_good() const {
  return std::string{to_string(policy_)} +
         (policy_ == ShardingPolicy::off ? ": each worker serves its own copy of the dataset"
                                         : ": each worker serves its own shard of the dataset");
}

void ConsumerCore::lose(msg::task_id_t id, TaskSlot& slot, Status why) {
  if (policy_ != ShardingPolicy::off || limits_.fail_on_worker_loss) {
    if (error_.ok())
      error_ = std::move(why);
    return;
  }
  // Counted already: its connection broke before its worker was removed, or it was given up
  // and listed again.
  const bool counted = slot.short_copy || !counted_.insert({id, slot.incarnation}).second;
  slot.short_copy = true;
  if (counted)
    return;
  ++lost_tasks_;
  warnings_.push_back(why.message() + "; reading on with the other workers (on_worker_loss " +
                      "\"continue\"; \"fail\" makes this an error)");
}

bool ConsumerCore::connected(msg::task_id_t task) const {
  auto t = tasks_.find(task);
  return t != tasks_.end() && t->second.connected;
}

void ConsumerCore::on_disconnected(msg::task_id_t task) {
  auto t = tasks_.find(task);
  if (t == tasks_.end())
    return;
  bool in_flight = t->second.in_flight > 0 || !t->second.partials.empty();
  if (!dynamic_ && in_flight && !t->second.end_of_sequence && !t->second.retired)
    // OFF re-sends nothing: what was on the broken connection cannot be asked again.
    lose(task, t->second,
         Status{ErrorCode::unavailable, "lost the connection to worker " +
                                          t->second.worker_address + " (task " +
                                          std::to_string(task) +
                                          ") while elements were in flight: they cannot "
                                          "be read again (" +
                                          to_string(policy_) + ")"});
  release_task_requests(task, t->second);
  t->second.partials.clear();
  t->second.in_flight = 0;
  drop_unannounced(t->second);
  t->second.connected = false;
  t->second.reconnected = true;
  t->second.acks.clear(); // the task treats everything unacknowledged as lost
}

std::vector<msg::task_info> ConsumerCore::on_task_list(const msg::task_list& list) {
  version_ = list.version;
  job_finished_ = list.job_finished;
  if (!list.error.empty() && error_.ok()) {
    const auto code = static_cast<ErrorCode>(list.error_code);
    error_ = Status{
      code == ErrorCode::ok || code > ErrorCode::resource_exhausted ? ErrorCode::data_loss : code,
      list.error};
  }
  std::vector<msg::task_info> added;
  std::set<msg::task_id_t> listed;
  for (const auto& t : list.tasks) {
    listed.insert(t.task);
    auto incarnation = incarnation_of(t);
    if (auto known = tasks_.find(t.task); known != tasks_.end()) {
      if (incarnation.empty() || known->second.incarnation == incarnation)
        continue;
      if (!known->second.incarnation.empty()) {
        // Re-created under the same id: what we know (end of sequence, batch numbers, acks)
        // belonged to the old actor. DYNAMIC: read the new one from its start; it serves the
        // splits the restored job handed out again (a stale end of sequence lost them).
        // OFF: each actor serves the whole dataset from its start. After part of it, the rest
        // is lost with the old actor and the new one would repeat the part: the read fails.
        // With on_worker_loss "continue" the old copy counts as lost, and the new actor's is
        // read from its start (tf.data: a restarted worker starts its task over).
        auto& old = known->second;
        if (!dynamic_ && old.delivered > 0 && !old.end_of_sequence && !old.retired)
          lose(t.task, old,
               Status{ErrorCode::unavailable,
                      "task " + std::to_string(t.task) + " on worker " + old.worker_address +
                        " was started again after it served " + std::to_string(old.delivered) +
                        " element(s), before its end: its remaining elements cannot be read "
                        "(" +
                        lost_for_good() + ")"});
        on_task_lost(t.task);
      } else { // listed without its actor before (its worker had not registered again)
        known->second.incarnation = std::move(incarnation);
        continue;
      }
    }
    TaskSlot slot;
    slot.worker_address = t.worker_address;
    slot.off_slot = t.off_slot >= 0 ? t.off_slot : static_cast<int64_t>(t.task);
    slot.off_next = t.off_skip;
    if (counted_.count({t.task, incarnation})) {
      // Given up before (give_up) and listed again: read on from where its actor is, its loss
      // counted already; the task drops what it still held for this consumer.
      slot.short_copy = true;
      slot.reconnected = true;
    }
    slot.incarnation = std::move(incarnation);
    tasks_.emplace(t.task, std::move(slot));
    added.push_back(t);
  }
  std::vector<msg::task_id_t> gone;
  for (const auto& [id, slot] : tasks_)
    if (!listed.count(id))
      gone.push_back(id);
  // Kept until the restarted job lists every known task again, or says its production is
  // over (it knows every task from its journal: then an unlisted one was lost for good).
  if (keep_unlisted_) {
    if (gone.empty() || list.job_finished)
      keep_unlisted_ = false;
    if (!list.job_finished)
      return added;
  }
  for (auto id : gone) {
    auto& slot = tasks_.at(id);
    if (!dynamic_ && !slot.end_of_sequence && !slot.retired)
      lose(id, slot,
           Status{ErrorCode::unavailable,
                  "lost task " + std::to_string(id) + " on worker " + slot.worker_address +
                    " before it reached its end: its remaining elements cannot be read "
                    "(" +
                    lost_for_good() + ")"});
    on_task_lost(id);
  }
  return added;
}

void ConsumerCore::task_ended(msg::task_id_t task) {
  if (auto t = tasks_.find(task); t != tasks_.end())
    t->second.end_of_sequence = true;
}

void ConsumerCore::on_job_rejoined(bool restarted) {
  version_ = 0;
  job_finished_ = false;
  keep_unlisted_ = restarted;
}

void ConsumerCore::release_task_requests(msg::task_id_t task, const TaskSlot& slot) {
  for (auto i = in_flight_.begin(); i != in_flight_.end();) {
    if (i->second.task == task) {
      reserved_elements_ -= i->second.max_elements;
      reserved_bytes_ -= static_cast<int64_t>(i->second.max_bytes);
      i = in_flight_.erase(i);
    } else {
      ++i;
    }
  }
  for (const auto& [seq, p] : slot.partials)
    reserved_elements_ -= p.num_elements;
}

void ConsumerCore::drop_unannounced(TaskSlot& slot) {
  if (slot.in_flight > 0)
    return; // a reply in flight may still announce them (frames can overtake their reply)
  for (auto it = slot.bulk_batches.begin(); it != slot.bulk_batches.end();)
    it = it->second.announced ? std::next(it) : slot.bulk_batches.erase(it);
}

void ConsumerCore::on_connected(msg::task_id_t task) {
  if (auto t = tasks_.find(task); t != tasks_.end())
    t->second.connected = true;
}

bool ConsumerCore::give_up(msg::task_id_t task, const std::string& why) {
  auto t = tasks_.find(task);
  if (t == tasks_.end())
    return true;
  if (policy_ != ShardingPolicy::off || limits_.fail_on_worker_loss)
    return false;
  if (!t->second.end_of_sequence && !t->second.retired)
    lose(task, t->second, Status{ErrorCode::unavailable, why});
  on_task_lost(task);
  return true;
}

void ConsumerCore::on_task_lost(msg::task_id_t task) {
  auto t = tasks_.find(task);
  if (t == tasks_.end())
    return;
  release_task_requests(task, t->second);
  for (const auto& [seq, b] : t->second.bulk_batches)
    if (b.announced)
      reserved_elements_ -= b.count;
  for (auto g = given_up_.begin(); g != given_up_.end();) // a lost task's late replies: ignored
    g = g->second == task ? given_up_.erase(g) : std::next(g);
  tasks_.erase(t);
}

std::vector<msg::task_id_t> ConsumerCore::focused(const std::vector<msg::task_id_t>& order) const {
  auto named = [&](msg::task_id_t id) {
    return std::find(focus_.begin(), focus_.end(), id) != focus_.end();
  };
  auto moved_past = [&](msg::task_id_t id) {
    const auto& slot = tasks_.at(id);
    if (!focus_split_ || !slot.at_split)
      return false;
    return *slot.at_split > *focus_split_ ||
           (*slot.at_split == *focus_split_ && slot.at_split_ended);
  };
  auto serving = [&](msg::task_id_t id) { // its batches are of that split, not its last yet
    const auto& slot = tasks_.at(id);
    return focus_split_ && slot.at_split == focus_split_ && !slot.at_split_ended;
  };
  // The first of these that is not empty: the tasks serving the split; those the job named
  // that have not moved past it; those that have not; the named ones.
  std::vector<msg::task_id_t> at, named_on, on, named_all;
  for (auto id : order) {
    if (named(id))
      named_all.push_back(id);
    if (moved_past(id))
      continue;
    on.push_back(id);
    if (named(id))
      named_on.push_back(id);
    if (serving(id))
      at.push_back(id);
  }
  for (auto* tier : {&at, &named_on, &on})
    if (!tier->empty())
      return *tier;
  return named_all;
}

void ConsumerCore::note_splits(TaskSlot& slot, const std::vector<msg::origin_run>& origins) {
  for (const auto& r : origins) {
    const std::pair<int64_t, int64_t> split{r.epoch, r.index};
    if (slot.at_split && split < *slot.at_split)
      continue; // (an end mark of an earlier split)
    if (!slot.at_split || split > *slot.at_split)
      slot.at_split_ended = false;
    slot.at_split = split;
    slot.at_split_ended = slot.at_split_ended || r.split_end;
  }
}

std::vector<ConsumerCore::Request> ConsumerCore::next_requests() {
  std::vector<Request> out;
  if (tasks_.empty())
    return out;
  // Acknowledgements never wait for credits: a task whose batches are all received but not yet
  // acknowledged gets an ack-only request (max_elements 0), so its splits can finish — also
  // after its end of sequence (a DYNAMIC task counts as done only once all is acknowledged).
  // A retired task's mark is acknowledged the same way: its draining worker waits for that.
  for (auto& [id, slot] : tasks_) {
    const bool greet = limits_.greet_tasks && !slot.greeted;
    if (slot.connected && (!slot.acks.empty() || greet || slot.retired_ack_due) &&
        slot.in_flight == 0) {
      slot.greeted = true;
      Request r{next_request_id_++,
                id,
                0,
                limits_.max_bytes_per_request,
                std::exchange(slot.acks, {}),
                std::exchange(slot.reconnected, false),
                std::exchange(slot.retired_ack_due, false)};
      ++slot.in_flight;
      in_flight_[r.id] = r;
      out.push_back(r);
    }
  }
  std::vector<msg::task_id_t> order;
  for (const auto& [id, slot] : tasks_)
    if (slot.connected && !slot.end_of_sequence && !slot.retired)
      order.push_back(id);
  // Over the hold budget (a split to wait for), even when the job named no task for it (its last
  // task list came before the split was handed out): a task that moved past the split sends only
  // what is held. The task the reader waits for must always be asked: never none.
  if (!focus_.empty() || focus_split_) {
    if (auto f = focused(order); !f.empty())
      order = std::move(f);
  }
  if (order.empty())
    return out;
  std::rotate(order.begin(), order.begin() + static_cast<long>(rotation_++ % order.size()),
              order.end());
  // One credit too many only when the simulator plants that bug (simulator builds of this file
  // only, node/hooks.hpp).
  const int64_t credits =
    limits_.max_outstanding + (hooks::kCompiledIn && hooks::credit_off_by_one() ? 1 : 0);
  int64_t free_elements = credits - reserved_elements_ - unacked_elements_;
  // Share the credits among the tasks, so that a small max_outstanding still reaches all.
  int64_t share = std::max<int64_t>(1, free_elements / static_cast<int64_t>(order.size()));
  for (auto id : order) {
    auto& slot = tasks_.at(id);
    bool has_partial = false;
    for (const auto& [seq, p] : slot.partials)
      if (p.received < p.num_chunks)
        has_partial = true;
    if (has_partial && slot.in_flight == 0) { // fetch the rest of a chunked batch
      Request r{next_request_id_++,
                id,
                0,
                limits_.max_bytes_per_request,
                std::exchange(slot.acks, {}),
                std::exchange(slot.reconnected, false)};
      ++slot.in_flight;
      in_flight_[r.id] = r;
      out.push_back(r);
      continue;
    }
    int64_t budget = share; // this task's part of the free credits in this round
    while (slot.in_flight < limits_.max_in_flight_per_task && budget > 0) {
      free_elements = credits - reserved_elements_ - unacked_elements_;
      int64_t free_bytes = limits_.max_bytes - reserved_bytes_ - unacked_bytes_;
      bool idle = in_flight_.empty() && unacked_elements_ == 0;
      if (free_elements <= 0 || (free_bytes < kMinRequestBytes && !idle))
        break;
      int64_t n = std::min<int64_t>({free_elements, budget, limits_.max_elements_per_request});
      budget -= n;
      const uint64_t per_request =
        slot.bulk ? limits_.max_bytes_per_bulk_request : limits_.max_bytes_per_request;
      int64_t b =
        std::min<int64_t>(static_cast<int64_t>(per_request), std::max<int64_t>(free_bytes, 1));
      Request r{next_request_id_++,           id,
                static_cast<uint32_t>(n),     static_cast<uint64_t>(b),
                std::exchange(slot.acks, {}), std::exchange(slot.reconnected, false)};
      reserved_elements_ += n;
      reserved_bytes_ += b;
      ++slot.in_flight;
      in_flight_[r.id] = r;
      out.push_back(r);
    }
  }
  return out;
}

bool ConsumerCore::release(const Request& request) {
  auto i = in_flight_.find(request.id);
  if (i == in_flight_.end())
    return false;
  reserved_elements_ -= i->second.max_elements;
  reserved_bytes_ -= static_cast<int64_t>(i->second.max_bytes);
  in_flight_.erase(i);
  if (auto t = tasks_.find(request.task); t != tasks_.end() && t->second.in_flight > 0)
    --t->second.in_flight;
  return true;
}

void ConsumerCore::on_request_failed(const Request& request) {
  if (!release(request))
    return;
  // DYNAMIC: its reply may have carried a batch that never arrived (a late reply is dropped):
  // the next request says so, and the task hands the splits of unacknowledged batches back.
  auto t = tasks_.find(request.task);
  if (t == tasks_.end())
    return;
  if (dynamic_)
    t->second.reconnected = true;
  else
    given_up_[request.id] = request.task;
  if (request.retired_ack) // asked again: the draining worker waits for it
    t->second.retired_ack_due = true;
  drop_unannounced(t->second);
}

Expected<std::vector<bool>> ConsumerCore::keep_unseen(const TaskSlot& slot,
                                                      const std::vector<msg::origin_run>& origins,
                                                      uint32_t count) {
  std::vector<bool> keep;
  if (origins.empty())
    return keep;
  uint64_t total = 0;
  for (const auto& r : origins)
    total += r.count;
  if (total != count)
    return data_loss("a batch from worker " + slot.worker_address + " tagged " +
                     std::to_string(total) + " element origins for " + std::to_string(count) +
                     " elements");
  keep.reserve(count);
  for (const auto& r : origins) {
    auto& seen = seen_[{r.source, r.epoch, r.index}];
    for (uint32_t k = 0; k < r.count; ++k) {
      const int64_t seq = r.first_seq + static_cast<int64_t>(k);
      // (A read cursor names splits of one source: resumed jobs have no other.)
      const bool fresh =
        seen.insert(seq) && !(resumed_ && r.source == 0 && resumed_->covers(r.epoch, r.index, seq));
      keep.push_back(fresh);
      if (!fresh)
        ++duplicates_;
    }
  }
  return keep;
}

std::vector<msg::origin_run> ConsumerCore::off_origins(TaskSlot& slot, uint32_t n, bool last) {
  if (policy_ != ShardingPolicy::off || n == 0)
    return {};
  std::vector<msg::origin_run> runs{msg::origin_run{0, slot.off_slot, slot.off_next, n, last}};
  slot.off_next += n;
  return runs;
}

void ConsumerCore::take_end_marks(std::vector<msg::origin_run>& origins, ReadyElements& out) {
  auto mark = [](const msg::origin_run& r) { return r.count == 0; };
  auto first = std::find_if(origins.begin(), origins.end(), mark);
  if (first == origins.end())
    return;
  for (auto r = first; r != origins.end(); ++r)
    if (r->count == 0 && r->split_end)
      out.add_split_end(SplitEnd{r->epoch, r->index, r->first_seq});
  origins.erase(std::remove_if(first, origins.end(), mark), origins.end());
}

void ConsumerCore::count_delivered(TaskSlot& slot, std::size_t bytes, std::size_t n) {
  slot.delivered += static_cast<int64_t>(n);
  elements_ += static_cast<int64_t>(n);
  per_worker_[slot.worker_address] += static_cast<int64_t>(n);
  unacked_elements_ += static_cast<int64_t>(n);
  unacked_bytes_ += static_cast<int64_t>(bytes);
  unacked_batches_.emplace_back(static_cast<int64_t>(n),
                                static_cast<double>(bytes) / static_cast<double>(n));
}

Status ConsumerCore::deliver(TaskSlot& slot, std::string payload, uint32_t num_elements,
                             const std::vector<msg::origin_run>& origins, ReadyElements& out) {
  const std::string source = "worker " + slot.worker_address;
  if (num_elements == 0) { // nothing to hand on, but a buffer that holds elements is an error
    std::vector<Element> none;
    return ReadyElements::decode(payload, 0, source, none);
  }
  auto keep = keep_unseen(slot, origins, num_elements);
  if (!keep.ok())
    return keep.status();
  const std::size_t bytes = payload.size();
  const std::size_t before = out.size();
  // Decoded by the reader (consumer/ready_elements.hpp), which also checks the announced count.
  out.add_encoded(std::move(payload), num_elements, std::move(*keep), source,
                  origins.empty() ? off_origins(slot, num_elements, slot.off_last) : origins);
  if (const std::size_t n = out.size() - before; n > 0)
    count_delivered(slot, bytes, n);
  return Status::OK();
}

Status ConsumerCore::deliver_frame(TaskSlot& slot, StorageOwner owner, std::string_view frame,
                                   const std::vector<msg::origin_run>& origin, ReadyElements& out) {
  std::vector<Element> decoded;
  Status st = decode_batch(std::move(owner), frame, decoded);
  if (!st.ok())
    return st.with_context("decoding a batch from worker " + slot.worker_address);
  if (decoded.size() != 1)
    return data_loss("a bulk frame from worker " + slot.worker_address + " held " +
                     std::to_string(decoded.size()) + " elements instead of one");
  auto keep = keep_unseen(slot, origin, 1);
  if (!keep.ok())
    return keep.status();
  if (!keep->empty() && !(*keep)[0])
    return Status::OK();
  count_delivered(slot, frame.size(), 1);
  DeliveredOrigin where;
  // (A bulk batch completes after its reply: whether it is the task's last is not known here.)
  auto tags = origin.empty() ? off_origins(slot, 1, false) : origin;
  if (!tags.empty())
    where = DeliveredOrigin{tags[0].epoch, tags[0].index, tags[0].first_seq, tags[0].split_end};
  out.add(std::move(decoded[0]), where);
  return Status::OK();
}

Status ConsumerCore::on_reply(const Request& request, msg::element_batch batch,
                              ReadyElements& out) {
  if (!release(request)) { // its task was lost meanwhile, or the request was given up
    auto late = given_up_.find(request.id);
    if (late == given_up_.end())
      return Status::OK();
    given_up_.erase(late);
    auto t = tasks_.find(request.task);
    const uint64_t n = batch.bulk_frames > 0 ? batch.bulk_frames : batch.num_elements;
    if (t == tasks_.end() || n == 0)
      return Status::OK();
    if (batch.num_chunks > 0 && batch.chunk_index + 1 == batch.num_chunks)
      t->second.acks.push_back(
        batch.batch_seq); // not wanted again (a draining task waits for acks)
    lose(request.task, t->second,
         data_loss("worker " + t->second.worker_address + " answered a request to task " +
                   std::to_string(request.task) + " after it had timed out, with " +
                   std::to_string(n) + " element(s): they cannot be read again (" +
                   to_string(policy_) + ")"));
    return error_.ok() ? Status::OK() : error_;
  }
  auto t = tasks_.find(request.task);
  if (t == tasks_.end())
    return Status::OK();
  auto& slot = t->second;
  // Acknowledged with the next request (a bulk batch once its frames are in). OFF too: the task
  // keeps every batch until then (a draining worker waits for them).
  if (batch.num_chunks > 0 && batch.chunk_index + 1 == batch.num_chunks && batch.bulk_frames == 0)
    slot.acks.push_back(batch.batch_seq);
  if (batch.retired && !slot.retired) {
    slot.retired = true;
    slot.retired_ack_due = true; // (the answer to the acknowledgement repeats the mark)
  }
  note_splits(slot, batch.origins);
  take_end_marks(batch.origins, out); // (they tag no element; the reader applies them)
  ++messages_;
  bytes_ += static_cast<int64_t>(batch.payload.size());
  slot.off_last = batch.end_of_sequence;
  if (batch.bulk_frames > 0) { // the elements come as frames on the bulk channel
    auto& b = slot.bulk_batches[batch.batch_seq];
    if (b.count == 0) {
      b.count = batch.bulk_frames;
      b.frames.resize(b.count);
    } else if (b.count != batch.bulk_frames) {
      return data_loss("worker " + slot.worker_address + " announced " +
                       std::to_string(batch.bulk_frames) + " frames for batch " +
                       std::to_string(batch.batch_seq) + ", its frames say " +
                       std::to_string(b.count));
    }
    b.announced = true;
    b.origins = std::move(batch.origins);
    reserved_elements_ += b.count; // held until its frames are in
    CONVEYOR_RETURN_IF_ERROR(complete_bulk_in_order(slot, out));
  } else if (batch.num_chunks == 1) {
    CONVEYOR_RETURN_IF_ERROR(
      deliver(slot, std::move(batch.payload), batch.num_elements, batch.origins, out));
  } else if (batch.num_chunks > 1) {
    if (batch.chunk_index >= batch.num_chunks)
      return data_loss("worker " + slot.worker_address + " sent chunk " +
                       std::to_string(batch.chunk_index) + " of a " +
                       std::to_string(batch.num_chunks) + "-chunk batch");
    auto [it, fresh] = slot.partials.try_emplace(batch.batch_seq);
    auto& p = it->second;
    if (fresh) {
      p.origins = batch.origins;
      p.num_chunks = batch.num_chunks;
      p.num_elements = batch.num_elements;
      p.chunks.resize(batch.num_chunks);
      reserved_elements_ += p.num_elements; // held until the batch is complete
    }
    if (p.chunks[batch.chunk_index].empty() && !batch.payload.empty())
      ++p.received;
    p.chunks[batch.chunk_index] = std::move(batch.payload);
    if (p.received == p.num_chunks) {
      std::string whole;
      for (const auto& c : p.chunks)
        whole += c;
      reserved_elements_ -= p.num_elements;
      uint32_t n = p.num_elements;
      auto origins = std::move(p.origins);
      slot.partials.erase(it);
      CONVEYOR_RETURN_IF_ERROR(deliver(slot, std::move(whole), n, origins, out));
    }
  }
  slot.off_last = false;
  if (batch.end_of_sequence)
    slot.end_of_sequence = true;
  drop_unannounced(slot);
  return Status::OK();
}

void ConsumerCore::set_bulk(msg::task_id_t task, bool on) {
  if (auto t = tasks_.find(task); t != tasks_.end())
    t->second.bulk = on;
}

bool ConsumerCore::bulk(msg::task_id_t task) const {
  auto t = tasks_.find(task);
  return t != tasks_.end() && t->second.bulk;
}

Status ConsumerCore::on_frame(msg::task_id_t task, uint64_t batch_seq, uint32_t index,
                              uint32_t count, StorageOwner owner, std::string_view frame,
                              ReadyElements& out) {
  auto t = tasks_.find(task);
  if (t == tasks_.end())
    return Status::OK(); // a lost task's late frame
  auto& slot = t->second;
  if (slot.in_flight == 0) {
    auto known = slot.bulk_batches.find(batch_seq);
    if (known == slot.bulk_batches.end() || !known->second.announced)
      return Status::OK(); // no reply will announce it (drop_unannounced)
  }
  auto& b = slot.bulk_batches[batch_seq];
  if (b.count == 0) {
    b.count = count;
    b.frames.resize(count);
  }
  if (count != b.count || index >= b.count || b.frames[index].first)
    return data_loss("worker " + slot.worker_address + " sent frame " + std::to_string(index) +
                     " of " + std::to_string(count) + " for batch " + std::to_string(batch_seq) +
                     " which expects " + std::to_string(b.count) + " frames (or had it already)");
  b.frames[index] = {std::move(owner), frame};
  ++b.received;
  bytes_ += static_cast<int64_t>(frame.size());
  if (b.announced && b.received == b.count)
    return complete_bulk_in_order(slot, out);
  return Status::OK();
}

Status ConsumerCore::complete_bulk_in_order(TaskSlot& slot, ReadyElements& out) {
  // A batch whose frames are all in waits for the announced batches before it: a channel's frames
  // are spread over several connections (net/bulk_frame.hpp), so a later batch's frames can
  // overtake an earlier one's, and a task's elements keep their order. Replies arrive in batch
  // order, so a batch without its reply below an announced one never gets it (a failed request):
  // it holds nothing up, and its frames (if any came) are dropped.
  uint64_t last_announced = 0;
  for (const auto& [seq, b] : slot.bulk_batches)
    if (b.announced)
      last_announced = seq;
  for (auto it = slot.bulk_batches.begin(); it != slot.bulk_batches.end();) {
    const auto& b = it->second;
    if (!b.announced) {
      it = it->first < last_announced ? slot.bulk_batches.erase(it) : std::next(it);
      continue;
    }
    if (b.received != b.count)
      return Status::OK();
    const uint64_t seq = it->first;
    ++it; // complete_bulk erases the batch
    CONVEYOR_RETURN_IF_ERROR(complete_bulk(slot, seq, out));
  }
  return Status::OK();
}

Status ConsumerCore::complete_bulk(TaskSlot& slot, uint64_t batch_seq, ReadyElements& out) {
  auto it = slot.bulk_batches.find(batch_seq);
  auto frames = std::move(it->second.frames);
  auto runs = std::move(it->second.origins);
  reserved_elements_ -= it->second.count;
  slot.bulk_batches.erase(it);
  slot.acks.push_back(batch_seq);
  // Each frame holds one element (it becomes its storage); its origin is the runs' next one.
  uint64_t tagged = 0;
  for (const auto& r : runs)
    tagged += r.count;
  if (!runs.empty() && tagged != frames.size())
    return data_loss("a bulk batch from worker " + slot.worker_address + " tagged " +
                     std::to_string(tagged) + " element origins for " +
                     std::to_string(frames.size()) + " elements");
  std::size_t run = 0;
  uint32_t k = 0;
  for (auto& [owner, bytes] : frames) {
    std::vector<msg::origin_run> one;
    if (!runs.empty()) {
      while (k >= runs[run].count) {
        ++run;
        k = 0;
      }
      const auto& r = runs[run];
      one.push_back(msg::origin_run{r.epoch, r.index, r.first_seq + k, 1,
                                    r.split_end && k + 1 == r.count, r.source});
      ++k;
    }
    CONVEYOR_RETURN_IF_ERROR(deliver_frame(slot, std::move(owner), bytes, one, out));
  }
  return Status::OK();
}

Status ConsumerCore::on_bulk_lost(const std::vector<msg::task_id_t>& tasks,
                                  const std::string& why) {
  std::size_t waiting = 0;
  std::string worker;
  const bool reads_on = policy_ == ShardingPolicy::off && !limits_.fail_on_worker_loss;
  for (auto id : tasks) {
    auto t = tasks_.find(id);
    if (t == tasks_.end())
      continue;
    auto& slot = t->second;
    slot.bulk = false;
    waiting += slot.bulk_batches.size();
    worker = slot.worker_address;
    if (reads_on && !slot.bulk_batches.empty()) {
      // OFF, on_worker_loss "continue": the batches are gone with the channel; the task is
      // counted as lost (its copy is short) and read on over inline payloads.
      const auto n = slot.bulk_batches.size();
      for (const auto& [seq, b] : slot.bulk_batches) {
        if (b.announced)
          reserved_elements_ -= b.count;
        slot.acks.push_back(seq); // not wanted again: a draining task need not wait for it
      }
      slot.bulk_batches.clear();
      lose(id, slot,
           data_loss("the bulk connection to worker " + slot.worker_address + " broke with " +
                     std::to_string(n) + " batch(es) of task " + std::to_string(id) +
                     " in flight (" + why + ")"));
      continue;
    }
    if (dynamic_ && !slot.bulk_batches.empty()) {
      // Never acknowledged, so nothing is lost: the next request says `reconnected` and the
      // task hands their splits back to the job, which hands them out again (the elements
      // this consumer already has of them are dropped as repeats).
      for (const auto& [seq, b] : slot.bulk_batches)
        if (b.announced)
          reserved_elements_ -= b.count;
      slot.bulk_batches.clear();
      slot.reconnected = true;
    }
  }
  if (waiting == 0 || dynamic_ || reads_on)
    return Status::OK();
  return data_loss("the bulk connection to worker " + worker + " broke with " +
                   std::to_string(waiting) + " batch(es) in flight (" + why + ")");
}

std::size_t ConsumerCore::bulk_batches_waiting() const {
  std::size_t n = 0;
  for (const auto& [id, slot] : tasks_)
    n += slot.bulk_batches.size();
  return n;
}

void ConsumerCore::on_ack(uint64_t n) {
  auto left = static_cast<int64_t>(n);
  while (left > 0 && !unacked_batches_.empty()) {
    auto& [count, per_element] = unacked_batches_.front();
    int64_t take = std::min(count, left);
    count -= take;
    left -= take;
    unacked_elements_ -= take;
    unacked_bytes_ -= static_cast<int64_t>(per_element * static_cast<double>(take));
    if (count == 0)
      unacked_batches_.pop_front();
  }
  if (unacked_batches_.empty()) {
    unacked_elements_ = 0;
    unacked_bytes_ = 0;
  }
}

std::vector<std::pair<int64_t, int64_t>> ConsumerCore::take_ended_slots() {
  std::vector<std::pair<int64_t, int64_t>> out;
  if (policy_ != ShardingPolicy::off)
    return out;
  for (auto& [id, slot] : tasks_)
    if (slot.end_of_sequence && !slot.off_end_taken && slot.off_slot >= 0 &&
        slot.partials.empty() && slot.bulk_batches.empty()) {
      slot.off_end_taken = true;
      out.emplace_back(slot.off_slot, slot.off_next);
    }
  return out;
}

bool ConsumerCore::finished() const {
  if (!error_.ok() || !job_finished_ || !in_flight_.empty())
    return false;
  for (const auto& [id, slot] : tasks_)
    if (!slot.end_of_sequence || !slot.partials.empty() || !slot.bulk_batches.empty())
      return false;
  return true;
}

} // namespace conveyor::actors
