#include "actors/task_runner.hpp"

#include <algorithm>
#include <vector>

#include "actors/bulk_frame.hpp"
#include "pipeline/buffer_pool.hpp"
#include "pipeline/functions.hpp"

namespace conveyor::actors {

TaskRunner::TaskRunner(ShardingPolicy policy, Compression compression, TaskLimits limits)
  : policy_(policy), compression_(compression), limits_(limits),
    buffer_charge_(std::make_unique<MemoryCharge>(nullptr, "task buffer")) {}

Status TaskRunner::start(const Dataset& input, const FunctionRegistry* functions,
                         const WorkerShard& shard) {
  Dataset dataset = input;
  if (policy_ != ShardingPolicy::off && policy_ != ShardingPolicy::dynamic) {
    if (shard.num_workers <= 0)
      return failed_precondition(std::string{"sharding policy "} + to_string(policy_) +
                                 " needs the worker's place in the dispatcher's fixed worker "
                                 "list, and this task has none");
    auto sharded = apply_sharding(input, policy_, shard.num_workers, shard.worker_index);
    if (!sharded.ok())
      return sharded.status();
    dataset = std::move(sharded).value();
  }
  CONVEYOR_RETURN_IF_ERROR(dataset.validate(functions));
  ctx_.functions = functions ? functions : &FunctionRegistry::global();
  ctx_.paths = limits_.paths.get();
  if (limits_.memory_limit > 0) {
    budget_ = std::make_unique<MemoryBudget>(limits_.memory_limit);
    ctx_.memory = budget_.get();
  }
  buffer_charge_ = std::make_unique<MemoryCharge>(budget_.get(), "task buffer");
  if (policy_ == ShardingPolicy::dynamic) {
    feed_ = std::make_unique<SplitFeed>();
    ctx_.split_provider = feed_.get();
  }
  auto it = dataset.make_iterator(ctx_);
  if (!it.ok())
    return it.status();
  iterator_ = std::move(it).value();
  return Status::OK();
}

bool TaskRunner::buffer_full() const {
  return static_cast<int64_t>(buffer_.size()) >= limits_.buffer_elements ||
         buffer_bytes_ >= limits_.buffer_bytes;
}

TaskRunner::Step TaskRunner::produce(const std::function<bool()>& stop_early) {
  if (ended_)
    return Step::ended;
  if (failed())
    return Step::failed;
  int64_t elements = 0;
  int64_t bytes = 0;
  while (elements < limits_.step_elements && bytes < limits_.step_bytes) {
    if (buffer_full())
      return Step::buffer_full;
    Element e;
    bool end = false;
    Status st = iterator_->get_next(e, end);
    if (st.code() == ErrorCode::unavailable)
      return elements > 0 ? Step::progress : Step::waiting_for_split;
    if (!st.ok()) {
      error_ = st;
      iterator_.reset();
      return Step::failed;
    }
    if (end) {
      ended_ = true;
      iterator_.reset(); // frees the pipeline's resources now
      return Step::ended;
    }
    Item item;
    item.encoded = encoded_batch_entry_size(e);
    if (item.encoded >= limits_.bulk_min_bytes) {
      // Encoded once, here, into the buffer the bulk path sends as is: a recycled one (the bulk
      // server returns each frame to the pool once written), so no fresh pages to fault in.
      std::vector<Element> one;
      one.push_back(std::move(e));
      item.frame = BufferPool::global().acquire(bulk::kFrameHeaderBytes +
                                                encoded_batch_header_size() + item.encoded);
      item.frame.clear();
      encode_batch_into(one, compression_, item.frame, bulk::kFrameHeaderBytes);
      item.bytes = item.frame.size();
    } else {
      item.bytes = e.byte_size();
      item.element = std::move(e);
    }
    const auto size = static_cast<int64_t>(item.bytes);
    if (Status room = buffer_charge_->add(size); !room.ok()) {
      error_ = room;
      iterator_.reset(); // returns what the pipeline held
      return Step::failed;
    }
    buffer_bytes_ += size;
    bytes += size;
    ++elements;
    ++produced_;
    buffer_.push_back(std::move(item));
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

msg::element_batch TaskRunner::start_batch(msg::consumer_id_t consumer, std::string payload,
                                           uint32_t n) {
  Pending p;
  p.batch_seq = next_batch_seq_++;
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
    return out;
  }
  auto out = next_chunk(p);
  pending_[consumer] = std::move(p);
  return out;
}

std::optional<msg::element_batch> TaskRunner::take_frames(uint32_t max_elements, uint64_t max_bytes,
                                                          std::vector<std::vector<char>>& frames,
                                                          uint64_t task) {
  uint64_t bytes = 0;
  while (!buffer_.empty() && !buffer_.front().frame.empty() && frames.size() < max_elements) {
    auto& item = buffer_.front();
    if (!frames.empty() && bytes + item.frame.size() > max_bytes)
      break;
    bytes += item.frame.size();
    buffer_bytes_ -= static_cast<int64_t>(item.bytes);
    buffer_charge_->remove(static_cast<int64_t>(item.bytes));
    frames.push_back(std::move(item.frame));
    buffer_.pop_front();
  }
  msg::element_batch out;
  out.num_elements = static_cast<uint32_t>(frames.size());
  out.batch_seq = next_batch_seq_++;
  out.chunk_index = 0;
  out.num_chunks = 1;
  out.bulk_frames = out.num_elements;
  for (uint32_t i = 0; i < frames.size(); ++i)
    bulk::write_frame_header(frames[i], bulk::FrameHeader{task, out.batch_seq, i, out.bulk_frames, 0});
  return out;
}

std::optional<msg::element_batch> TaskRunner::take(msg::consumer_id_t consumer,
                                                   uint32_t max_elements, uint64_t max_bytes,
                                                   std::vector<std::vector<char>>* frames,
                                                   uint64_t task) {
  if (auto p = pending_.find(consumer); p != pending_.end()) {
    auto out = next_chunk(p->second);
    if (p->second.next_chunk >= p->second.num_chunks)
      pending_.erase(p);
    return out;
  }
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
  if (!buffer_.front().frame.empty()) {
    if (frames)
      return take_frames(max_elements, max_bytes, *frames, task);
    // No bulk channel: the pre-encoded element goes inline, alone (chunked if large).
    auto item = std::move(buffer_.front());
    buffer_.pop_front();
    buffer_bytes_ -= static_cast<int64_t>(item.bytes);
    buffer_charge_->remove(static_cast<int64_t>(item.bytes));
    std::string payload(item.frame.data() + bulk::kFrameHeaderBytes,
                        item.frame.size() - bulk::kFrameHeaderBytes);
    BufferPool::global().release(std::move(item.frame));
    return start_batch(consumer, std::move(payload), 1);
  }
  // Packed by encoded size: the batch buffer stays within max_bytes and one chunk (a lone
  // element larger than that is the exception, and travels in chunks).
  const uint64_t limit = std::min<uint64_t>(max_bytes, limits_.chunk_bytes);
  std::vector<Element> batch;
  batch.reserve(std::min<std::size_t>(max_elements, buffer_.size()));
  uint64_t bytes = encoded_batch_header_size();
  while (!buffer_.empty() && buffer_.front().frame.empty() && batch.size() < max_elements) {
    auto& item = buffer_.front();
    if (!batch.empty() && bytes + item.encoded > limit)
      break;
    bytes += item.encoded;
    buffer_bytes_ -= static_cast<int64_t>(item.bytes);
    buffer_charge_->remove(static_cast<int64_t>(item.bytes));
    batch.push_back(std::move(item.element));
    buffer_.pop_front();
  }
  const auto n = static_cast<uint32_t>(batch.size());
  return start_batch(consumer, encode_batch(batch, compression_), n);
}

} // namespace conveyor::actors
