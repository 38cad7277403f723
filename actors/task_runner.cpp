#include "actors/task_runner.hpp"

#include <algorithm>
#include <vector>

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
    int64_t size = static_cast<int64_t>(e.byte_size());
    if (Status room = buffer_charge_->add(size); !room.ok()) {
      error_ = room;
      iterator_.reset(); // returns what the pipeline held
      return Step::failed;
    }
    buffer_bytes_ += size;
    bytes += size;
    ++elements;
    ++produced_;
    buffer_.push_back(std::move(e));
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

std::optional<msg::element_batch> TaskRunner::take(msg::consumer_id_t consumer,
                                                   uint32_t max_elements, uint64_t max_bytes) {
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
  std::vector<Element> batch;
  uint64_t bytes = 0;
  while (!buffer_.empty() && batch.size() < max_elements) {
    uint64_t size = buffer_.front().byte_size();
    if (!batch.empty() && bytes + size > max_bytes)
      break;
    bytes += size;
    buffer_bytes_ -= static_cast<int64_t>(size);
    buffer_charge_->remove(static_cast<int64_t>(size));
    batch.push_back(std::move(buffer_.front()));
    buffer_.pop_front();
  }
  Pending p;
  p.batch_seq = next_batch_seq_++;
  p.num_elements = static_cast<uint32_t>(batch.size());
  p.payload = encode_batch(batch, compression_);
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

} // namespace conveyor::actors
