#include "worker/task_runner.hpp"

#include <algorithm>
#include <limits>
#include <exception>
#include <set>
#include <utility>
#include <vector>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include "dispatcher/job_core.hpp"
#include "net/bulk_frame.hpp"
#include "pipeline/kernels/make_iterator.hpp"
#include "pipeline/sharding/multi_source.hpp"
#include "pipeline/functions/functions.hpp"
#include "pipeline/runtime/stop_flag.hpp"

namespace conveyor::actors {

namespace {

// Returns the heap's free memory to the OS after a pipeline that held much was freed (a failed
// job's shuffle buffer stayed in the worker's RSS for minutes). Below this peak a trim is not
// worth walking the heap for; without a budget the peak is unknown, and it trims.
void trim_heap_after(const MemoryBudget* budget) {
  constexpr int64_t kTrimAfterBytes = 16 << 20;
  if (budget != nullptr && budget->peak() < kTrimAfterBytes)
    return;
#if defined(__GLIBC__)
  malloc_trim(0);
#endif
}

} // namespace

TaskRunner::TaskRunner(ShardingPolicy policy, Compression compression, TaskLimits limits,
                       uint64_t first_batch_seq)
  : policy_(policy), compression_(compression), limits_(limits),
    buffer_charge_(std::make_unique<MemoryCharge>(nullptr, "task buffer")),
    next_batch_seq_(first_batch_seq) {}

TaskRunner::~TaskRunner() {
  iterator_.reset();
  buffer_.clear();
  pending_.clear();
  cache_.reset();
  // A failed pipeline trimmed when it failed; one that ended trims when its job had a budget and
  // used much of it (without a budget nothing says how much it held: the many small jobs of a
  // busy worker should not each walk the heap).
  if (!failed() && budget_ && budget_->peak() >= (16 << 20))
    trim_heap_after(budget_.get());
}

Status TaskRunner::start(const Dataset& input, const FunctionRegistry* functions,
                         const WorkerShard& shard) {
  Dataset dataset = input;
  if (policy_ != ShardingPolicy::off && policy_ != ShardingPolicy::dynamic) {
    if (shard.num_workers <= 0)
      return failed_precondition(std::string{"sharding policy "} + to_string(policy_) +
                                 " needs the worker's place in the dispatcher's fixed worker "
                                 "list, and this task has none");
    auto sharded =
      apply_sharding(input, policy_, shard.num_workers, shard.worker_index, limits_.paths.get());
    if (!sharded.ok())
      return sharded.status();
    dataset = std::move(sharded).value();
  }
  CONVEYOR_RETURN_IF_ERROR(dataset.validate(functions));
  ctx_.functions = functions ? functions : &FunctionRegistry::global();
  ctx_.paths = limits_.paths.get();
  ctx_.executor_group = limits_.executor_group;
  ctx_.stop = limits_.stop.get();
  if (limits_.memory_limit > 0 || limits_.process_memory) {
    budget_ = std::make_unique<MemoryBudget>(limits_.memory_limit, limits_.process_memory.get());
    ctx_.memory = budget_.get();
  }
  buffer_charge_ = std::make_unique<MemoryCharge>(budget_.get(), "task buffer");
  Expected<std::unique_ptr<Iterator>> it = std::unique_ptr<Iterator>{};
  const int64_t sources =
    policy_ == ShardingPolicy::dynamic ? splittable_source_count(*dataset.node()) : 0;
  if (sources > 1) {
    // One feed per source, none prefetching (split_feed.hpp); per-split as a concatenation
    // (its pipeline reads one split of one source at a time).
    std::vector<SplitProvider*> providers;
    for (int64_t i = 0; i < sources; ++i) {
      feeds_.push_back(std::make_unique<SplitFeed>(1));
      feeds_.back()->set_source(i);
      feeds_.back()->set_prefetch(false);
      providers.push_back(feeds_.back().get());
    }
    feed_ = feeds_[0].get();
    per_split_ = is_per_split_concatenation(dataset);
    it = make_split_iterator(dataset.node(), ctx_, std::move(providers));
  } else {
    if (policy_ == ShardingPolicy::dynamic) {
      feeds_.push_back(std::make_unique<SplitFeed>());
      feed_ = feeds_[0].get();
      ctx_.split_provider = feed_;
      per_split_ = is_per_split(dataset);
    }
    it = dataset.make_iterator(ctx_);
  }
  if (!it.ok())
    return it.status();
  iterator_ = std::move(it).value();
  endless_ = dataset.cardinality(ctx_.functions) == kInfiniteCardinality;
  return Status::OK();
}

void TaskRunner::retire() {
  retired_ = true;
  buffer_charge_->reset();
  buffer_.clear();
  buffer_bytes_ = 0;
  frame_bytes_ = 0;
  frame_count_ = 0;
  iterator_.reset(); // frees the pipeline's resources now
}

bool TaskRunner::buffer_full() const {
  // With a memory budget the buffer takes at most half of it and leaves the rest to the
  // pipeline (shuffle buffers, batches, caches): a slow consumer then pauses production, as a
  // full buffer does, instead of pushing the job over its budget.
  int64_t bound = limits_.buffer_bytes;
  if (limits_.memory_limit > 0)
    bound = std::min(bound, limits_.memory_limit / 2);
  if (limits_.process_memory && limits_.process_memory->limit() > 0)
    bound = std::min(bound, limits_.process_memory->limit() / 2);
  return static_cast<int64_t>(buffer_.size()) >= limits_.buffer_elements || buffer_bytes_ >= bound;
}

TaskRunner::Step TaskRunner::produce(const std::function<bool()>& stop_early) {
  if (ended_)
    return Step::ended;
  if (retired_)
    return Step::buffer_full; // nothing more to make room for
  if (failed())
    return Step::failed;
  int64_t elements = 0;
  int64_t bytes = 0;
  while (elements < limits_.step_elements && bytes < limits_.step_bytes) {
    if (buffer_full())
      return Step::buffer_full;
    if (limits_.stop && limits_.stop->load(std::memory_order_relaxed)) {
      error_ = StopCheck::stopped_status("task");
      iterator_.reset();
      return Step::failed;
    }
    Element e;
    bool end = false;
    Status st;
    try {
      st = iterator_->get_next(e, end);
    } catch (const std::exception& ex) { // a user function threw: the task fails with it
      st = internal_error(std::string{"a function of the pipeline threw: "} + ex.what());
    } catch (...) {
      st = internal_error("a function of the pipeline threw a non-standard exception");
    }
    if (feed_)
      track_feed();
    if (st.code() == ErrorCode::unavailable)
      return elements > 0 ? Step::progress : Step::waiting_for_split;
    if (!st.ok()) {
      error_ = st;
      iterator_.reset();
      trim_heap_after(budget_.get()); // the job fails: what its pipeline held goes back now
      return Step::failed;
    }
    if (end) {
      ended_ = true;
      iterator_.reset(); // frees the pipeline's resources now
      if (feed_) {
        for (auto& feed : feeds_)
          feed->pipeline_ended();
        track_feed();
        finish_all_if_done();
      }
      return Step::ended;
    }
    Item item;
    if (per_split_) {
      SplitFeed* in = current_feed();
      if (in == nullptr) {
        error_ = internal_error("a per-split pipeline produced an element outside any split");
        iterator_.reset();
        return Step::failed;
      }
      const Split& c = in->current();
      Key key{c.source, c.epoch, c.index};
      item.origin = Origin{c.epoch, c.index, in->next_seq(), c.source};
      auto sp = splits_.find(key);
      if (sp != splits_.end())
        sp->second.end_seq = item.origin.seq + 1;
      // A resumed job: the trainer consumed this element before (Split::skip).
      if (item.origin.seq < c.skip) {
        ++elements; // (the step's bound counts the pipeline's work, kept or not)
        continue;
      }
      if (sp != splits_.end()) {
        ++sp->second.produced;
        sp->second.last_seq = item.origin.seq;
        item.counted = true;
      }
    }
    item.element_size = encoded_element_size(e);
    const std::size_t entry = encoded_batch_entry_size(e, item.element_size);
    if (entry >= limits_.bulk_min_bytes) {
      // Travels as a frame: encoded below (encode_ahead) or when taken. It counts its
      // uncompressed frame size in the buffer's bound, whenever it is encoded.
      item.bulk = true;
      item.bytes = bulk::kFrameHeaderBytes + encoded_batch_header_size() + entry;
      item.element = std::move(e);
    } else {
      item.bytes = e.byte_size();
      item.element = std::move(e);
    }
    const auto size = static_cast<int64_t>(item.bytes);
    // The budget counts what the item really holds (its slot, the element's objects and heap),
    // not only the payload that bounds the buffer.
    item.charged =
      static_cast<int64_t>(sizeof(Item)) + std::max(size, element_heap_bytes(item.element));
    if (Status room = buffer_charge_->add(item.charged); !room.ok()) {
      error_ = room;
      iterator_.reset(); // returns what the pipeline held
      trim_heap_after(budget_.get());
      return Step::failed;
    }
    buffer_bytes_ += size;
    bytes += size;
    ++elements;
    ++produced_;
    const bool bulk = item.bulk;
    buffer_.push_back(std::move(item));
    if (bulk && !ahead_full())
      encode_ahead();
    if (stop_early && stop_early())
      break;
  }
  return Step::progress;
}

msg::element_batch TaskRunner::next_chunk(Pending& p) {
  msg::element_batch out;
  std::size_t offset = static_cast<std::size_t>(p.next_chunk) * limits_.chunk_bytes;
  out.payload = p.payload.substr(offset, limits_.chunk_bytes);
  out.num_elements = p.num_elements;
  out.batch_seq = p.batch_seq;
  out.chunk_index = p.next_chunk;
  out.num_chunks = p.num_chunks;
  ++p.next_chunk;
  return out;
}

void TaskRunner::add_origin(std::vector<msg::origin_run>& runs, const Origin& o) const {
  if (!per_split_)
    return;
  if (!runs.empty() && runs.back().source == o.source && runs.back().epoch == o.epoch &&
      runs.back().index == o.index && runs.back().first_seq + runs.back().count == o.seq)
    ++runs.back().count;
  else
    runs.push_back(msg::origin_run{o.epoch, o.index, o.seq, 1, false, o.source});
}

uint64_t TaskRunner::register_batch(msg::consumer_id_t consumer,
                                    std::vector<msg::origin_run>& origins) {
  // A run that ends with its split's last element says so: the consumer's read cursor then
  // knows the split complete (otherwise a resumed job runs it again to skip all of it).
  // One that does not (the pipeline had not moved past the split yet) gets an end mark once it
  // has (track_feed).
  for (auto& o : origins) {
    auto sp = splits_.find(Key{o.source, o.epoch, o.index});
    if (sp == splits_.end())
      continue;
    SplitState& s = sp->second;
    s.sent_to = std::max(s.sent_to, o.first_seq + static_cast<int64_t>(o.count));
    s.taker = consumer;
    if (s.closed && s.last_seq == o.first_seq + o.count - 1)
      o.split_end = s.end_sent = true;
  }
  auto seq = next_batch_seq_++;
  // Until the consumer acknowledges it. DYNAMIC: then the batch counts for its splits.
  count_for_splits(consumer, seq, origins);
  return seq;
}

void TaskRunner::mark_end_later(const SplitState& s) {
  const bool none_sent = s.produced == 0;
  if (cache_ || s.end_sent || (!none_sent && s.sent_to < s.end_seq))
    return; // (its last element is still in the buffer: its run will carry the end)
  msg::origin_run run{s.split.epoch, s.split.index, s.end_seq, 0, true, s.split.source};
  end_marks_.push_back(EndMark{none_sent, s.taker, run});
}

bool TaskRunner::has_end_marks(msg::consumer_id_t consumer) const {
  for (const auto& m : end_marks_)
    if (m.anyone || m.consumer == consumer)
      return true;
  return false;
}

void TaskRunner::attach_end_marks(msg::consumer_id_t consumer,
                                  std::vector<msg::origin_run>& origins) {
  if (end_marks_.empty())
    return;
  auto mine = [consumer](const EndMark& m) { return m.anyone || m.consumer == consumer; };
  for (const auto& m : end_marks_)
    if (mine(m))
      origins.push_back(m.run);
  end_marks_.erase(std::remove_if(end_marks_.begin(), end_marks_.end(), mine), end_marks_.end());
}

void TaskRunner::count_for_splits(msg::consumer_id_t consumer, uint64_t batch_seq,
                                  const std::vector<msg::origin_run>& origins) {
  auto& runs = unacked_[consumer][batch_seq];
  for (const auto& o : origins) {
    runs.emplace_back(Key{o.source, o.epoch, o.index}, o.count);
    if (shares_whole_epoch())
      if (auto sp = splits_.find(Key{o.source, o.epoch, o.index}); sp != splits_.end())
        sp->second.sent += o.count;
  }
}

msg::element_batch TaskRunner::start_batch(msg::consumer_id_t consumer, std::string payload,
                                           uint32_t n, std::vector<msg::origin_run> origins) {
  Pending p;
  p.batch_seq = register_batch(consumer, origins);
  p.num_elements = n;
  p.payload = std::move(payload);
  p.num_chunks = static_cast<uint32_t>(
    std::max<std::size_t>(1, (p.payload.size() + limits_.chunk_bytes - 1) / limits_.chunk_bytes));
  if (p.num_chunks == 1) {
    msg::element_batch out;
    out.payload = std::move(p.payload);
    out.num_elements = p.num_elements;
    out.batch_seq = p.batch_seq;
    out.chunk_index = 0;
    out.num_chunks = 1;
    out.origins = std::move(origins);
    return out;
  }
  auto out = next_chunk(p);
  out.origins = std::move(origins);
  pending_[consumer] = std::move(p);
  return out;
}

void TaskRunner::encode_frame(Item& item) {
  if (!item.bulk || !item.frame.empty())
    return;
  // Encoded once, as the pieces the bulk writer sends: the element's large tensors are views of
  // their storage (no copy), which the item keeps sharing (its element stays, at no cost).
  const std::vector<Element> one{item.element};
  encode_batch_gather(one, compression_, item.frame, bulk::kFrameHeaderBytes);
  frame_bytes_ += item.frame.size();
  ++frame_count_;
}

bool TaskRunner::ahead_full() const {
  return frame_bytes_ >= limits_.bulk_encode_ahead_bytes && frame_count_ >= kMinFramesAhead;
}

void TaskRunner::encode_ahead() {
  // The first bulk items not yet encoded are near the front: a bounded scan.
  constexpr std::size_t kScan = 64;
  std::size_t scanned = 0;
  for (auto& item : buffer_) {
    if (ahead_full() || ++scanned > kScan)
      return;
    encode_frame(item);
  }
}

std::optional<msg::element_batch> TaskRunner::take_frames(msg::consumer_id_t consumer,
                                                          uint32_t max_elements, uint64_t max_bytes,
                                                          std::vector<GatherBuffer>& frames,
                                                          uint64_t task) {
  std::vector<msg::origin_run> origins;
  uint64_t bytes = 0;
  // At most the encode-ahead window per request beyond the first frame: frames queued at the
  // bulk server wait there, and the kernel should copy each soon after it was written.
  const uint64_t limit = std::min<uint64_t>(max_bytes, limits_.bulk_encode_ahead_bytes);
  while (!buffer_.empty() && buffer_.front().bulk && frames.size() < max_elements) {
    auto& item = buffer_.front();
    if (frames.size() >= kMinFramesAhead && bytes + item.bytes > limit)
      break;
    encode_frame(item);
    frame_bytes_ -= item.frame.size();
    --frame_count_;
    bytes += item.frame.size();
    buffer_bytes_ -= static_cast<int64_t>(item.bytes);
    buffer_charge_->remove(item.charged);
    add_origin(origins, item.origin);
    frames.push_back(std::move(item.frame));
    buffer_.pop_front();
  }
  msg::element_batch out;
  out.num_elements = static_cast<uint32_t>(frames.size());
  out.batch_seq = register_batch(consumer, origins);
  out.chunk_index = 0;
  out.num_chunks = 1;
  out.bulk_frames = out.num_elements;
  out.origins = std::move(origins);
  for (uint32_t i = 0; i < frames.size(); ++i)
    bulk::write_frame_header(frames[i],
                             bulk::FrameHeader{task, out.batch_seq, i, out.bulk_frames, 0});
  return out;
}

Status TaskRunner::enable_cross_trainer_cache(bool whole_epoch) {
  auto cache = CrossTrainerCache::make(limits_.cross_trainer_cache_bytes, whole_epoch);
  if (!cache.ok())
    return cache.status();
  cache_.emplace(std::move(cache).value());
  limits_.bulk_min_bytes = std::numeric_limits<std::size_t>::max(); // shared: never moved out
  return Status::OK();
}

// Cross-trainer cache: the trainer's next elements, moving produced ones from the buffer into
// the cache when the trainer is at its end.
std::optional<msg::element_batch> TaskRunner::take_cached(msg::consumer_id_t consumer,
                                                          uint32_t max_elements, uint64_t max_bytes,
                                                          const std::string& trainer) {
  const std::string who = trainer.empty() ? "consumer " + std::to_string(consumer) : trainer;
  readers_.add(consumer, who);
  const bool whole_epoch = cache_->whole_epoch();
  // Whole-epoch sharing: a reader's first request (even an empty one) registers its trainer,
  // so that nothing it has not read is evicted from then on.
  if (Status joined = cache_->join(who); !joined.ok()) {
    refused_[consumer] = joined; // this reader's error, not the task's: the others read on
    return std::nullopt;
  }
  const uint64_t limit = std::min<uint64_t>(max_bytes, limits_.chunk_bytes);
  std::vector<Element> batch;
  // DYNAMIC, window: the split origins of the elements this batch reads first (moved from the
  // buffer into the cache for this trainer). Only first reads count for the splits — each
  // produced element once — so a split finishes when the trainer that made its elements
  // acknowledged them; other trainers' reads of the same elements are the cache's sharing.
  std::vector<msg::origin_run> first_reads;
  // DYNAMIC, whole epoch: every element's origin goes to the trainer, which drops what it
  // already has (a split made again after a lost worker or consumer): each trainer reads each
  // element once. A split finishes once every trainer read it and acknowledged what it was
  // sent of it (check_finished).
  std::vector<msg::origin_run> origins;
  uint64_t bytes = encoded_batch_header_size();
  while (batch.size() < max_elements && bytes < limit) {
    Origin origin;
    auto got = cache_->next(who, nullptr, &origin);
    if (!got.ok()) { // (its errors are join()'s, checked above)
      refused_[consumer] = got.status();
      return std::nullopt;
    }
    if (!*got) {
      // (Whole-epoch sharing: a full cache takes the next element only once every trainer has
      // read what it would evict; this trainer waits until then.)
      if (buffer_.empty() ||
          !cache_->can_add(static_cast<int64_t>(buffer_.front().element.byte_size())))
        break;
      auto item = std::move(buffer_.front());
      buffer_.pop_front();
      buffer_bytes_ -= static_cast<int64_t>(item.bytes);
      buffer_charge_->remove(item.charged);
      if (Status s = cache_->add(std::move(item.element), item.origin); !s.ok()) {
        error_ = s;
        break;
      }
      if (whole_epoch && per_split_) {
        auto sp = item.counted
                    ? splits_.find(Key{item.origin.source, item.origin.epoch, item.origin.index})
                    : splits_.end();
        if (sp != splits_.end()) {
          ++sp->second.cached;
          sp->second.last_index = cache_->end_index() - 1;
        }
      } else if (!whole_epoch) {
        add_origin(first_reads,
                   item.origin); // next() gives it to this trainer now: it was at the end
      }
      continue;
    }
    if (whole_epoch && per_split_)
      add_origin(origins, origin);
    bytes += (*got)->byte_size() + 16;
    batch.push_back(std::move(**got));
  }
  if (batch.empty()) {
    if (failed())
      return std::nullopt; // the actor answers with error()
    if (ended_ && buffer_.empty() && !cache_->ready(who)) {
      msg::element_batch eos;
      eos.end_of_sequence = true;
      return eos;
    }
    if (max_elements == 0)
      return msg::element_batch{};
    return std::nullopt;
  }
  const auto n = static_cast<uint32_t>(batch.size());
  // Window: the consumer gets no origins (they would tag only some of the batch's elements, and
  // a trainer's stream is the cache's sequence, not split-deduplicated).
  // Whole epoch: every trainer's batch counts for its splits (sent, then acknowledged), and a
  // split finishes once all trainers read it (check_finished).
  auto out = start_batch(consumer, encode_batch(batch, compression_), n, {});
  count_for_splits(consumer, out.batch_seq, whole_epoch ? origins : first_reads);
  out.origins = std::move(origins);
  if (whole_epoch)
    check_all_finished(); // this read may have been the last one of some splits
  return out;
}

std::vector<Element> TaskRunner::take_elements(std::size_t n, std::vector<std::size_t>* sizes) {
  std::vector<Element> out;
  if (buffer_.size() < n)
    return out;
  out.reserve(n);
  if (sizes)
    sizes->reserve(sizes->size() + n);
  // The buffer's byte count and the memory budget are charged down once, for all n.
  int64_t taken_bytes = 0;
  int64_t taken_charge = 0;
  for (std::size_t i = 0; i < n; ++i) {
    auto& item = buffer_.front();
    taken_bytes += static_cast<int64_t>(item.bytes);
    taken_charge += item.charged;
    if (sizes)
      sizes->push_back(item.bytes);
    if (!item.frame.empty()) {
      frame_bytes_ -= item.frame.size();
      --frame_count_;
    }
    out.push_back(std::move(item.element));
    buffer_.pop_front();
  }
  buffer_bytes_ -= taken_bytes;
  buffer_charge_->remove(taken_charge);
  return out;
}

std::optional<msg::element_batch> TaskRunner::take(msg::consumer_id_t consumer,
                                                   uint32_t max_elements, uint64_t max_bytes,
                                                   std::vector<GatherBuffer>* frames, uint64_t task,
                                                   const std::string& trainer) {
  auto out = take_batch(consumer, max_elements, max_bytes, frames, task, trainer);
  if (end_marks_.empty())
    return out;
  if (out) {
    attach_end_marks(consumer, out->origins);
  } else if (!failed() && has_end_marks(consumer)) {
    // Nothing to send but what this consumer's reorder and cursor wait for: an empty reply
    // carries it now (the consumer asks again).
    out.emplace();
    attach_end_marks(consumer, out->origins);
  }
  return out;
}

std::optional<msg::element_batch> TaskRunner::take_batch(msg::consumer_id_t consumer,
                                                         uint32_t max_elements, uint64_t max_bytes,
                                                         std::vector<GatherBuffer>* frames,
                                                         uint64_t task,
                                                         const std::string& trainer) {
  if (auto p = pending_.find(consumer); p != pending_.end()) {
    auto out = next_chunk(p->second);
    if (p->second.next_chunk >= p->second.num_chunks)
      pending_.erase(p);
    return out;
  }
  if (retired_)
    return max_elements == 0 ? std::optional<msg::element_batch>{msg::element_batch{}}
                             : std::nullopt;
  if (cache_)
    return take_cached(consumer, max_elements, max_bytes, trainer);
  if (buffer_.empty() || max_elements == 0) {
    if (buffer_.empty() && failed())
      return std::nullopt; // the actor answers with error()
    if (buffer_.empty() && ended_) {
      msg::element_batch eos;
      eos.end_of_sequence = true;
      return eos;
    }
    if (max_elements == 0)
      return msg::element_batch{}; // a continuation request with nothing pending
    return std::nullopt;
  }
  if (buffer_.front().bulk) {
    if (frames)
      return take_frames(consumer, max_elements, max_bytes, *frames, task);
    // No bulk channel: the element goes inline, alone (chunked if large).
    auto item = std::move(buffer_.front());
    buffer_.pop_front();
    buffer_bytes_ -= static_cast<int64_t>(item.bytes);
    buffer_charge_->remove(item.charged);
    if (!item.frame.empty()) {
      frame_bytes_ -= item.frame.size();
      --frame_count_;
    }
    std::vector<Element> one;
    one.push_back(std::move(item.element));
    std::string payload = encode_batch(one, compression_);
    std::vector<msg::origin_run> origins;
    add_origin(origins, item.origin);
    return start_batch(consumer, std::move(payload), 1, std::move(origins));
  }
  // Packed by encoded size: the batch buffer stays within max_bytes and one chunk (a lone
  // element larger than that is the exception, and travels in chunks). Encoded where they lie in
  // the buffer, by the sizes measured when they were produced; then dropped from it.
  const uint64_t limit = std::min<uint64_t>(max_bytes, limits_.chunk_bytes);
  std::vector<const Element*> batch;
  std::vector<std::size_t> sizes;
  std::vector<msg::origin_run> origins;
  const std::size_t most = std::min<std::size_t>(max_elements, buffer_.size());
  batch.reserve(most);
  sizes.reserve(most);
  uint64_t bytes = encoded_batch_header_size();
  int64_t taken_bytes = 0;
  int64_t taken_charge = 0;
  for (auto it = buffer_.begin(); it != buffer_.end() && !it->bulk && batch.size() < most; ++it) {
    const std::size_t entry = encoded_batch_entry_size(it->element, it->element_size);
    if (!batch.empty() && bytes + entry > limit)
      break;
    bytes += entry;
    taken_bytes += static_cast<int64_t>(it->bytes);
    taken_charge += it->charged;
    add_origin(origins, it->origin);
    batch.push_back(&it->element);
    sizes.push_back(it->element_size);
  }
  const auto n = static_cast<uint32_t>(batch.size());
  std::string payload = encode_batch(batch, sizes, compression_);
  buffer_.erase(buffer_.begin(), buffer_.begin() + n);
  buffer_bytes_ -= taken_bytes;
  buffer_charge_->remove(taken_charge);
  return start_batch(consumer, std::move(payload), n, std::move(origins));
}

// New and closed splits of the feed: start tracking / mark complete.
void TaskRunner::track_feed() {
  for (auto& feed : feeds_)
    for (auto& s : feed->take_started()) {
      Key key{s.source, s.epoch, s.index};
      splits_[key].split = std::move(s);
    }
  if (!per_split_) {
    for (auto& feed : feeds_)
      feed->take_closed();
    return;
  }
  for (auto& feed : feeds_)
    for (const auto& s : feed->take_closed()) {
      Key key{s.source, s.epoch, s.index};
      if (closing_lost_.erase(key) > 0)
        continue; // the end of the run handed back, not of a new run (consumer_reconnected)
      auto sp = splits_.find(key);
      if (sp == splits_.end())
        continue;
      sp->second.closed = true;
      mark_end_later(sp->second);
      check_finished(key);
    }
}

SplitFeed* TaskRunner::current_feed() const {
  for (const auto& feed : feeds_)
    if (feed->has_current())
      return feed.get();
  return nullptr;
}

void TaskRunner::check_finished(const Key& key) {
  auto sp = splits_.find(key);
  if (sp == splits_.end() || !sp->second.closed)
    return;
  const SplitState& s = sp->second;
  if (shares_whole_epoch()) {
    const bool read_by_all =
      s.cached == s.produced && (s.produced == 0 || cache_->oldest_unread() > s.last_index);
    if (!read_by_all || s.acked < s.sent)
      return;
  } else if (s.acked < s.produced) {
    return;
  }
  finished_.push_back(key);
  splits_.erase(sp);
}

void TaskRunner::check_all_finished() {
  if (!per_split_ || !shares_whole_epoch())
    return;
  std::vector<Key> keys;
  for (const auto& [key, s] : splits_)
    keys.push_back(key);
  for (const auto& key : keys)
    check_finished(key);
}

// Pipelines that are not per-split: their splits finish together, once the pipeline ended and
// everything it produced was acknowledged.
void TaskRunner::finish_all_if_done() {
  if (per_split_ || !ended_ || !all_acknowledged())
    return;
  for (const auto& [key, s] : splits_)
    finished_.push_back(key);
  splits_.clear();
}

bool TaskRunner::all_acknowledged() const {
  if (!buffer_.empty() || !pending_.empty())
    return false;
  if (shares_whole_epoch() && !cache_->all_read()) // a trainer has yet to read some
    return false;
  for (const auto& [c, batches] : unacked_)
    if (!batches.empty())
      return false;
  return true;
}

void TaskRunner::ack(msg::consumer_id_t consumer, const std::vector<uint64_t>& batch_seqs) {
  auto c = unacked_.find(consumer);
  if (c == unacked_.end())
    return;
  for (auto seq : batch_seqs) {
    auto b = c->second.find(seq);
    if (b == c->second.end())
      continue;
    for (const auto& [key, n] : b->second) {
      auto sp = splits_.find(key);
      if (sp == splits_.end())
        continue;
      sp->second.acked += n;
      check_finished(key);
    }
    c->second.erase(b);
  }
  finish_all_if_done();
}

void TaskRunner::consumer_reconnected(msg::consumer_id_t consumer) {
  auto c = unacked_.find(consumer);
  if (c == unacked_.end())
    return;
  std::set<Key> affected;
  for (const auto& [seq, runs] : c->second)
    for (const auto& [key, n] : runs)
      affected.insert(key);
  if (!per_split_ && !c->second.empty())
    for (const auto& [key, s] : splits_)
      affected.insert(key);
  unacked_.erase(c);
  pending_.erase(consumer);
  std::set<Key> dropped;
  for (const auto& key : affected) {
    auto sp = splits_.find(key);
    if (sp == splits_.end())
      continue;
    lost_.push_back(sp->second.split); // read again elsewhere; the consumer drops repeats
    const SplitFeed* in = current_feed();
    if (!sp->second.closed && in != nullptr &&
        Key{in->current().source, in->current().epoch, in->current().index} == key)
      closing_lost_.insert(key); // still in production: its close is not a new run's
    dropped.insert(key);
    splits_.erase(sp);
  }
  // Their copies in the buffer belong to the run handed back: none counts for a new run.
  for (auto& item : buffer_)
    if (item.counted &&
        dropped.count(Key{item.origin.source, item.origin.epoch, item.origin.index}))
      item.counted = false;
}

bool TaskRunner::awaits_ack(msg::consumer_id_t consumer, uint64_t from_seq) const {
  auto c = unacked_.find(consumer);
  return c != unacked_.end() && c->second.lower_bound(from_seq) != c->second.end();
}

bool TaskRunner::cache_trainers(const std::vector<std::string>& joined,
                                const std::vector<std::string>& left) {
  if (!cache_ || !cache_->whole_epoch())
    return false;
  for (const auto& trainer : joined)
    (void)cache_->join(trainer); // too late: its own first request gets the error (refusal)
  for (const auto& trainer : left) {
    readers_.remove_trainer(trainer);
    forget_trainer(trainer);
  }
  return !left.empty();
}

void TaskRunner::forget_trainer(const std::string& trainer) {
  cache_->remove_trainer(trainer);
  check_all_finished(); // (it may have been the last one reading some splits)
  finish_all_if_done();
}

bool TaskRunner::reader_left(msg::consumer_id_t consumer, bool may_return) {
  if (!cache_)
    return false;
  const std::string trainer = readers_.remove(consumer);
  if (trainer.empty())
    return false; // none, or another reader of the same trainer id goes on
  if (may_return && !cache_->whole_epoch())
    return false; // (its leave_job, if it does not come back, forgets it)
  forget_trainer(trainer);
  return cache_->whole_epoch();
}

void TaskRunner::consumer_gone(msg::consumer_id_t consumer) {
  gone_.insert(consumer);
  // (Its end marks concern only its own reorder and cursor.)
  end_marks_.erase(
    std::remove_if(end_marks_.begin(), end_marks_.end(),
                   [consumer](const EndMark& m) { return !m.anyone && m.consumer == consumer; }),
    end_marks_.end());
  auto c = unacked_.find(consumer);
  if (c == unacked_.end())
    return;
  std::vector<uint64_t> seqs;
  for (const auto& [seq, runs] : c->second)
    seqs.push_back(seq);
  ack(consumer, seqs);
  unacked_.erase(consumer);
  pending_.erase(consumer);
  finish_all_if_done();
}

std::vector<std::tuple<int64_t, int64_t, int64_t>> TaskRunner::take_finished() {
  return std::exchange(finished_, {});
}

std::vector<Split> TaskRunner::take_lost() { return std::exchange(lost_, {}); }

} // namespace conveyor::actors
