// Elements handed to a reader, decoded where it reads them (consumer/ready_elements.hpp).
#include "consumer/ready_elements.hpp"

#include <algorithm>
#include <utility>

#include "pipeline/tensor/codec.hpp"

namespace conveyor::actors {

void ReadyElements::add(Element element, DeliveredOrigin origin) {
  if (runs_.empty() || runs_.back().lazy)
    runs_.emplace_back();
  Run& run = runs_.back();
  if (origin.tagged() || !run.decoded_origins.empty()) {
    run.decoded_origins.resize(run.decoded.size()); // (untagged before: not tagged)
    run.decoded_origins.push_back(origin);
  }
  run.decoded.push_back(std::move(element));
  ++size_;
}

void ReadyElements::add(std::vector<Element> elements) {
  if (elements.empty())
    return;
  size_ += elements.size();
  if (runs_.empty() || runs_.back().lazy) {
    runs_.emplace_back();
    runs_.back().decoded = std::move(elements);
    return;
  }
  auto& d = runs_.back().decoded;
  d.insert(d.end(), std::make_move_iterator(elements.begin()),
           std::make_move_iterator(elements.end()));
  if (auto& o = runs_.back().decoded_origins; !o.empty())
    o.resize(d.size()); // these are not tagged
}

void ReadyElements::add_encoded(std::string buffer, uint32_t count, std::vector<bool> keep,
                                std::string source, std::vector<msg::origin_run> origins) {
  const std::size_t kept =
    keep.empty() ? count : static_cast<std::size_t>(std::count(keep.begin(), keep.end(), true));
  if (kept == 0)
    return;
  Run run;
  run.lazy = true;
  run.batch =
    std::make_shared<const EncodedBatch>(EncodedBatch{std::move(buffer), std::move(source)});
  run.count = count;
  run.keep = std::move(keep);
  run.origins = std::move(origins);
  runs_.push_back(std::move(run));
  size_ += kept;
}

void ReadyElements::append(ReadyElements&& more) {
  if (runs_.empty() && more.front_ == 0)
    runs_.swap(more.runs_);
  else
    for (std::size_t i = more.front_; i < more.runs_.size(); ++i)
      runs_.push_back(std::move(more.runs_[i]));
  size_ += more.size_;
  more.runs_.clear();
  more.front_ = 0;
  more.size_ = 0;
  finished_.insert(finished_.end(), more.finished_.begin(), more.finished_.end());
  more.finished_.clear();
  split_ends_.insert(split_ends_.end(), more.split_ends_.begin(), more.split_ends_.end());
  more.split_ends_.clear();
}

Status ReadyElements::decode(std::string_view buffer, uint32_t count, const std::string& source,
                             std::vector<Element>& out) {
  const std::size_t first = out.size();
  if (Status st = decode_batch(buffer, out); !st.ok())
    return st.with_context("decoding a batch from " + source);
  if (out.size() - first != count) {
    const std::size_t held = out.size() - first;
    out.resize(first);
    return data_loss("a batch from " + source + " announced " + std::to_string(count) +
                     " elements but held " + std::to_string(held));
  }
  return Status::OK();
}

Status ReadyElements::fail(Status why) {
  runs_.clear();
  front_ = 0;
  size_ = 0;
  return why;
}

Status ReadyElements::next(Element& out, bool& got, DeliveredOrigin* origin) {
  got = false;
  for (; front_ < runs_.size(); ++front_) {
    Run& run = runs_[front_];
    if (!run.lazy) {
      if (run.next < run.decoded.size()) {
        const DeliveredOrigin taken = take_decoded(run, out);
        if (origin)
          *origin = taken;
        got = true;
        return Status::OK();
      }
    } else {
      if (Status st = open(run); !st.ok())
        return st;
      while (!run.reader->done()) {
        // What the consumer dropped (keep: repeats of a re-issued split) is stepped over undecoded.
        const auto position = run.reader->read();
        const bool keep = run.keep.empty() || run.keep[position];
        if (Status st = keep ? run.reader->next(out) : run.reader->skip(); !st.ok())
          return fail(st.with_context("decoding a batch from " + run.batch->source));
        if (keep) {
          if (origin)
            *origin = origin_at(run, static_cast<uint32_t>(position));
          --size_;
          got = true;
          return Status::OK();
        }
      }
    }
    run = Run{}; // handed out: its buffers go now
  }
  runs_.clear();
  front_ = 0;
  return Status::OK();
}

Status ReadyElements::open(Run& run) {
  if (run.reader)
    return Status::OK();
  // Zero copy where the bound allows: the tensors view (and hold) the buffer.
  StorageOwner owner = may_view(run.batch) ? StorageOwner{run.batch} : nullptr;
  auto reader = BatchReader::open(run.batch->bytes, std::move(owner));
  if (!reader.ok())
    return fail(reader.status().with_context("decoding a batch from " + run.batch->source));
  if (reader->count() != run.count)
    return fail(data_loss("a batch from " + run.batch->source + " announced " +
                          std::to_string(run.count) + " elements but held " +
                          std::to_string(reader->count())));
  run.reader.emplace(std::move(*reader));
  return Status::OK();
}

Status ReadyElements::next_run(SplitRun& out, bool& got) {
  got = false;
  for (; front_ < runs_.size(); ++front_) {
    Run& run = runs_[front_];
    if (!run.lazy) {
      if (run.next < run.decoded.size()) { // (a bulk frame: one element)
        out = SplitRun{};
        out.first = take_decoded(run, out.decoded);
        out.count = 1;
        out.bytes = static_cast<int64_t>(out.decoded.byte_size());
        got = true;
        return Status::OK();
      }
    } else {
      if (Status st = open(run); !st.ok())
        return st;
      BatchReader& reader = *run.reader;
      while (!reader.done() && !run.keep.empty() && !run.keep[reader.read()])
        if (Status st = reader.skip(); !st.ok()) // (dropped: a repeat)
          return fail(st.with_context("decoding a batch from " + run.batch->source));
      if (!reader.done()) {
        const auto first = static_cast<uint32_t>(reader.read());
        out = SplitRun{};
        out.first = origin_at(run, first);
        // The run ends with its origin run, at a dropped element or with the batch.
        uint32_t end = run.count;
        if (run.origin_run < run.origins.size())
          end = std::min(end, run.origin_base + run.origins[run.origin_run].count);
        if (!run.keep.empty())
          for (uint32_t p = first + 1; p < end; ++p)
            if (!run.keep[p]) {
              end = p;
              break;
            }
        if (run.origin_run < run.origins.size()) {
          const auto& r = run.origins[run.origin_run];
          out.first.split_end = r.split_end && end == run.origin_base + r.count;
        }
        out.count = end - first;
        // Its share of the buffer (elements of one batch are about the same size).
        out.bytes = static_cast<int64_t>(run.batch->bytes.size() * out.count / run.count);
        out.batch = run.batch;
        size_ -= out.count;
        got = true;
        if (end == run.count) { // the batch's rest: its reader goes with it
          out.reader.emplace(std::move(reader));
          run = Run{};
          ++front_;
          return Status::OK();
        }
        out.reader.emplace(reader); // (a copy at `first`; the batch's steps over the run)
        for (uint32_t p = first; p < end; ++p)
          if (Status st = reader.skip(); !st.ok()) {
            got = false;
            return fail(st.with_context("decoding a batch from " + run.batch->source));
          }
        return Status::OK();
      }
    }
    run = Run{}; // handed out: its buffers go now
  }
  runs_.clear();
  front_ = 0;
  return Status::OK();
}

bool ReadyElements::may_view(const std::shared_ptr<const EncodedBatch>& batch) {
  const std::size_t bytes = batch->bytes.size();
  if (bytes < kMinViewedBytes)
    return false;
  // Over the bound, the buffers kept elements let go are counted out, at most once per half as
  // many batches as are pinned (a reader that keeps everything does not sweep on every batch).
  ++opened_since_sweep_;
  if (pinned_total_ + bytes > kMaxPinnedBytes && opened_since_sweep_ > pinned_.size() / 2)
    sweep_pinned();
  if (pinned_total_ + bytes > kMaxPinnedBytes)
    return false;
  pinned_.push_back(Pinned{batch, bytes});
  pinned_total_ += bytes;
  return true;
}

void ReadyElements::sweep_pinned() {
  opened_since_sweep_ = 0;
  pinned_.erase(std::remove_if(pinned_.begin(), pinned_.end(),
                               [this](const Pinned& p) {
                                 if (!p.buffer.expired())
                                   return false;
                                 pinned_total_ -= p.bytes;
                                 return true;
                               }),
                pinned_.end());
}

std::size_t ReadyElements::pinned_bytes() {
  sweep_pinned();
  return pinned_total_;
}

DeliveredOrigin ReadyElements::take_decoded(Run& run, Element& out) {
  const DeliveredOrigin origin =
    run.next < run.decoded_origins.size() ? run.decoded_origins[run.next] : DeliveredOrigin{};
  out = std::move(run.decoded[run.next++]);
  --size_;
  return origin;
}

DeliveredOrigin ReadyElements::origin_at(Run& run, uint32_t position) {
  // Positions only grow within a run: the run index moves forward with them.
  while (run.origin_run < run.origins.size() &&
         position >= run.origin_base + run.origins[run.origin_run].count) {
    run.origin_base += run.origins[run.origin_run].count;
    ++run.origin_run;
  }
  if (run.origin_run >= run.origins.size())
    return DeliveredOrigin{};
  const auto& r = run.origins[run.origin_run];
  const uint32_t k = position - run.origin_base;
  return DeliveredOrigin{r.epoch, r.index, r.first_seq + k, r.split_end && k + 1 == r.count};
}

Status ReadyElements::take(std::vector<Element>& out) {
  out.reserve(out.size() + size_);
  for (;;) {
    out.emplace_back();
    bool got = false;
    Status st = next(out.back(), got);
    if (!st.ok() || !got) {
      out.pop_back();
      return st;
    }
  }
}

} // namespace conveyor::actors
