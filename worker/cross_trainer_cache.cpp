#include "worker/cross_trainer_cache.hpp"

#include <algorithm>

namespace conveyor::actors {

namespace {
Status empty_trainer_id() {
  return invalid_argument("tf.data service cross-trainer cache requires a non-empty trainer ID.");
}
} // namespace

Expected<CrossTrainerCache> CrossTrainerCache::make(int64_t max_bytes, bool whole_epoch) {
  if (max_bytes <= 0)
    return invalid_argument("the cross-trainer cache size must be positive, got " +
                            std::to_string(max_bytes) + " bytes");
  return CrossTrainerCache{max_bytes, whole_epoch};
}

int64_t CrossTrainerCache::oldest_unread() const {
  int64_t oldest = end_index();
  for (const auto& [id, t] : trainers_)
    oldest = std::min(oldest, position(t));
  return oldest;
}

bool CrossTrainerCache::can_add(int64_t bytes) const {
  // An element larger than the whole cache never fits: add() refuses it with the reference's
  // invalid_argument at once (waiting for room would wait forever: issue 32's hang).
  if (!whole_epoch_ || size_bytes_ + bytes <= max_bytes_ || bytes > max_bytes_)
    return true;
  // Evicting up to and including element k frees the bytes of [start, k]; it must stay below
  // every trainer's position.
  const int64_t limit = oldest_unread();
  int64_t freed = 0;
  for (std::size_t i = 0; start_ + static_cast<int64_t>(i) < limit && i < cache_.size(); ++i) {
    freed += cache_[i].bytes;
    if (size_bytes_ - freed + bytes <= max_bytes_)
      return true;
  }
  return false;
}

void CrossTrainerCache::remove_trainer(const std::string& trainer_id) {
  trainers_.erase(trainer_id);
  if (last_asker_ == trainer_id)
    last_asker_.clear();
}

bool CrossTrainerCache::ready(const std::string& trainer_id) const {
  auto t = trainers_.find(trainer_id);
  const int64_t at = t == trainers_.end() ? start_ : position(t->second);
  return at < end_index();
}

Status CrossTrainerCache::join(const std::string& trainer_id) {
  if (trainer_id.empty())
    return empty_trainer_id();
  if (trainers_.count(trainer_id))
    return Status::OK();
  if (whole_epoch_ && start_ > 0)
    return failed_precondition(
      "trainer \"" + trainer_id +
      "\" joined the shared epoch after the task's cross-trainer cache "
      "had evicted its first " +
      std::to_string(start_) +
      " element(s), which every trainer "
      "reads: with whole-epoch sharing all trainers must start before the cache (" +
      std::to_string(max_bytes_) + " bytes, --cross-trainer-cache-size-bytes) fills");
  trainers_[trainer_id]; // not read yet: at the oldest cached element
  return Status::OK();
}

Expected<std::optional<Element>> CrossTrainerCache::next(const std::string& trainer_id,
                                                         int64_t* index, ElementOrigin* origin) {
  CONVEYOR_RETURN_IF_ERROR(join(trainer_id));
  auto& t = trainers_[trainer_id];
  const int64_t at = position(t);
  if (t.next >= 0 && t.next < start_)
    t.skipped += start_ - t.next; // fell behind the window: skip to its oldest element
  if (at >= end_index()) {
    t.next = at;
    last_asker_ = trainer_id;
    return std::optional<Element>{};
  }
  t.next = at + 1;
  if (index != nullptr)
    *index = at;
  // A miss when this trainer made the element (it asked at the end, then it was added).
  if (last_asker_ == trainer_id && at == end_index() - 1) {
    ++misses_;
    last_asker_.clear();
  } else {
    ++hits_;
  }
  const Cached& cached = cache_[static_cast<std::size_t>(at - start_)];
  if (origin != nullptr)
    *origin = cached.origin;
  return std::optional<Element>{cached.element};
}

Status CrossTrainerCache::add(Element element, ElementOrigin origin) {
  const auto bytes = static_cast<int64_t>(element.byte_size());
  if (bytes > max_bytes_)
    return invalid_argument("tf.data service element size is larger than cache size in bytes. "
                            "Got element size: " +
                            std::to_string(bytes) +
                            " and cache size: " + std::to_string(max_bytes_));
  if (!can_add(bytes))
    return failed_precondition("the cross-trainer cache is full of elements a trainer has not "
                               "read yet (whole-epoch sharing)");
  while (!cache_.empty() && size_bytes_ + bytes > max_bytes_) {
    size_bytes_ -= cache_.front().bytes;
    cache_.pop_front();
    ++start_;
  }
  cache_.push_back(Cached{std::move(element), bytes, origin});
  size_bytes_ += bytes;
  return Status::OK();
}

int64_t CrossTrainerCache::skipped(const std::string& trainer_id) const {
  auto t = trainers_.find(trainer_id);
  if (t == trainers_.end())
    return 0;
  // Counted when the trainer next reads; include a pending skip so the figure is current.
  const int64_t pending =
    t->second.next >= 0 && t->second.next < start_ ? start_ - t->second.next : 0;
  return t->second.skipped + pending;
}

Status validate_trainer_id(const std::string& trainer_id) {
  return trainer_id.empty() ? empty_trainer_id() : Status::OK();
}

Status validate_cross_trainer_cache(bool has_job_name, int64_t cardinality,
                                    std::optional<int64_t> num_consumers, bool whole_epoch) {
  if (!has_job_name)
    return invalid_argument("Cross-trainer caching requires named jobs. Got empty `job_name`.");
  if (whole_epoch && cardinality == kInfiniteCardinality)
    return invalid_argument("Whole-epoch cross-trainer sharing (`finite_epoch`) requires a finite "
                            "dataset, but the input is infinite: trainers share an infinite "
                            "dataset through the cache's sliding window (without `finite_epoch`)");
  if (!whole_epoch && cardinality != kInfiniteCardinality)
    return invalid_argument("Cross-trainer caching requires the input dataset to be infinite. "
                            "Got input with cardinality " +
                            std::to_string(cardinality));
  if (num_consumers)
    return invalid_argument("Cross-trainer caching does not support coordinated reads. "
                            "Got number of coordinated consumers: " +
                            std::to_string(*num_consumers));
  return Status::OK();
}

} // namespace conveyor::actors
