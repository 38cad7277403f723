// cache(filename): the first complete pass over the input is recorded; later iterators replay it
// instead of reading the input. filename "" records in memory, shared by the iterators of one
// iterator tree (e.g. the passes of a `repeat` above). Otherwise the pass goes to a file
// (cache_file.hpp) committed only when the pass completes; any later iterator, in this process or
// a later one, reads the committed file. A pass that saw an input error is not recorded.
//
// Checkpoints (cache_state.hpp): a filling pass saves its input's state and its count; a restored
// one goes on from the input's state but is not recorded (its first elements went with the saved
// process, and a partial file's temporary file is not reopened), so the next pass records the
// cache from the start. A pass reading a complete cache saves its count and the file's identity
// (its records' checksum): a file cache is reopened and that many records skipped (a file gone or
// with another checksum, e.g. replaced by one of the same size, is data_loss naming it); a memory
// cache, gone with its process, is refilled by running the input again, the elements the pass
// had delivered recorded but not delivered again.
#include <utility>

#include "pipeline/graph/serialize.hpp"
#include "pipeline/kernels/cache_file.hpp"
#include "pipeline/kernels/cache_state.hpp"
#include "pipeline/kernels/kernel.hpp"

namespace conveyor::kernels {

namespace {

class MemoryReplayIterator : public Iterator {
public:
  explicit MemoryReplayIterator(std::shared_ptr<const MemoryCache> cache)
    : cache_(std::move(cache)) {}

  Status get_next(Element& out, bool& end_of_sequence) override {
    end_of_sequence = next_ >= cache_->elements.size();
    if (!end_of_sequence)
      out = cache_->elements[next_++];
    return Status::OK();
  }

  Status save(IteratorStateWriter& out) override {
    CacheState state;
    state.complete = true;
    state.position = static_cast<int64_t>(next_);
    state.write(out);
    return Status::OK();
  }

  // Also takes a filling pass's state: this tree's cache is that pass, complete.
  Status restore(IteratorStateReader& in) override {
    auto state = CacheState::read(in);
    if (!state.ok())
      return state.status();
    const std::size_t size = cache_->elements.size();
    if (state->ended) {
      next_ = size;
      return Status::OK();
    }
    if (static_cast<uint64_t>(state->position) > size)
      return data_loss("`cache`: the memory cache holds " + std::to_string(size) +
                       " elements, fewer than the " + std::to_string(state->position) +
                       " the checkpoint had read");
    next_ = static_cast<std::size_t>(state->position);
    return Status::OK();
  }

private:
  std::shared_ptr<const MemoryCache> cache_; // complete, so immutable
  std::size_t next_ = 0;
};

class MemoryRecordIterator : public Iterator {
public:
  MemoryRecordIterator(IteratorPtr input, std::shared_ptr<MemoryCache> cache, MemoryBudget* budget)
    : input_(std::move(input)), cache_(std::move(cache)), charge_(budget, "cache") {}

  Status get_next(Element& out, bool& end_of_sequence) override {
    end_of_sequence = false;
    if (!input_) {
      end_of_sequence = true;
      return Status::OK();
    }
    // A restored pass of a complete cache: its input again, recorded up to where it stood.
    while (refill_ > 0) {
      CONVEYOR_RETURN_IF_ERROR(next_recorded(out, end_of_sequence));
      if (end_of_sequence)
        return data_loss("`cache`: refilling the memory cache, its input ended after " +
                         std::to_string(recorded_.size()) + " elements, before the " +
                         std::to_string(position_) +
                         " the checkpoint had read (the input is not deterministic)");
      --refill_;
    }
    CONVEYOR_RETURN_IF_ERROR(next_recorded(out, end_of_sequence));
    if (!end_of_sequence) {
      ++position_;
      return Status::OK();
    }
    input_.reset();
    if (!tainted_) {
      std::lock_guard<std::mutex> lock(cache_->mu);
      if (!cache_->complete) { // another iterator of the tree may have finished first
        cache_->elements = std::move(recorded_);
        cache_->charge = std::make_unique<MemoryCharge>(charge_.budget(), "cache");
        cache_->charge->absorb(charge_);
        cache_->complete = true;
      }
    }
    recorded_.clear();
    charge_.reset();
    return Status::OK();
  }

  Status save(IteratorStateWriter& out) override {
    CacheState state;
    state.complete = refilling_;
    state.position = position_;
    state.ended = !input_;
    state.recording = !tainted_;
    if (input_ && !refilling_)
      CONVEYOR_RETURN_IF_ERROR(state.save_input(*input_, out));
    state.write(out);
    return Status::OK();
  }

  Status restore(IteratorStateReader& in) override {
    auto state = CacheState::read(in);
    if (!state.ok())
      return state.status();
    position_ = state->position;
    if (state->ended) {
      input_.reset();
      return Status::OK();
    }
    if (state->complete) { // refilled from this iterator's fresh input (get_next)
      refilling_ = true;
      refill_ = state->position;
      return Status::OK();
    }
    CONVEYOR_RETURN_IF_ERROR(state->restore_input(*input_));
    tainted_ = !state->restored_pass_records();
    return Status::OK();
  }

private:
  // The input's next element, recorded unless the pass cannot become the cache.
  Status next_recorded(Element& out, bool& end_of_sequence) {
    Status status = input_->get_next(out, end_of_sequence);
    if (!status.ok()) {
      tainted_ = tainted_ || status.code() != ErrorCode::unavailable;
      return status;
    }
    if (end_of_sequence || tainted_)
      return Status::OK();
    CONVEYOR_RETURN_IF_ERROR(reserve_one_more(recorded_, charge_));
    CONVEYOR_RETURN_IF_ERROR(charge_.add(element_heap_bytes(out)));
    recorded_.push_back(out);
    return Status::OK();
  }

  IteratorPtr input_;
  std::shared_ptr<MemoryCache> cache_;
  std::vector<Element> recorded_;
  bool tainted_ = false;
  MemoryCharge charge_;    // recorded_, handed to the cache when the pass completes
  int64_t position_ = 0;   // elements delivered in this pass
  bool refilling_ = false; // restored from a pass that read the complete cache
  int64_t refill_ = 0;     // elements still to record without delivering them
};

class FileReplayIterator : public Iterator {
public:
  explicit FileReplayIterator(std::unique_ptr<CacheFileReader> reader)
    : reader_(std::move(reader)) {}

  Status get_next(Element& out, bool& end_of_sequence) override {
    return reader_->read(out, end_of_sequence);
  }

  Status save(IteratorStateWriter& out) override {
    CacheState state;
    state.complete = true;
    state.position = static_cast<int64_t>(reader_->elements_read());
    state.file_size = reader_->size();
    state.file_checksum = reader_->checksum();
    state.write(out);
    return Status::OK();
  }

  // Also takes a filling pass's state: the file was committed since, by that pass or another.
  Status restore(IteratorStateReader& in) override {
    auto state = CacheState::read(in);
    if (!state.ok())
      return state.status();
    if (state->complete && (state->file_size != reader_->size() ||
                            state->file_checksum != static_cast<int64_t>(reader_->checksum())))
      return data_loss("`cache`: the file `" + reader_->path() +
                       "` changed since the checkpoint: " + identity(*state) + " then, " +
                       identity(reader_->size(), reader_->checksum()) + " now");
    return reader_->skip(static_cast<uint64_t>(state->position));
  }

private:
  static std::string identity(int64_t size, int64_t checksum) {
    return std::to_string(size) + " bytes with records checksum " +
           (checksum < 0 ? std::string("unknown (an older build's file)")
                         : std::to_string(checksum));
  }
  static std::string identity(const CacheState& state) {
    return identity(state.file_size, state.file_checksum);
  }

  std::unique_ptr<CacheFileReader> reader_;
};

class FileRecordIterator : public Iterator {
public:
  FileRecordIterator(IteratorPtr input, std::string prefix, std::string fingerprint)
    : input_(std::move(input)), prefix_(std::move(prefix)), fingerprint_(std::move(fingerprint)) {}

  Status get_next(Element& out, bool& end_of_sequence) override {
    end_of_sequence = false;
    if (!input_) {
      end_of_sequence = true;
      return Status::OK();
    }
    if (!writer_ && !tainted_) {
      auto writer = CacheFileWriter::create(prefix_, fingerprint_);
      if (!writer.ok()) { // reported once; the pass goes on uncached
        tainted_ = true;
        return writer.status();
      }
      writer_ = std::move(*writer);
    }
    Status status = input_->get_next(out, end_of_sequence);
    if (!status.ok()) {
      if (status.code() != ErrorCode::unavailable)
        taint();
      return status;
    }
    if (!end_of_sequence) {
      ++position_;
      if (writer_) {
        Status appended = writer_->append(out);
        if (!appended.ok()) { // the element is still delivered; the failure is reported at the end
          cache_error_ = appended;
          taint();
        }
      }
      return Status::OK();
    }
    input_.reset();
    if (writer_) {
      cache_error_ = writer_->commit();
      writer_.reset();
    }
    if (!cache_error_.ok()) { // once, in place of the end; the next call reports the end
      end_of_sequence = false;
      return std::exchange(cache_error_, Status::OK());
    }
    return Status::OK();
  }

  Status save(IteratorStateWriter& out) override {
    CacheState state;
    state.position = position_;
    state.ended = !input_;
    state.recording = !tainted_;
    state.pending = cache_error_;
    if (input_)
      CONVEYOR_RETURN_IF_ERROR(state.save_input(*input_, out));
    state.write(out);
    return Status::OK();
  }

  // A filling pass goes on unwritten: the saved pass's temporary file is not reopened (its
  // process may still write it, or it died with it); the next pass writes the file from the
  // start.
  Status restore(IteratorStateReader& in) override {
    auto state = CacheState::read(in);
    if (!state.ok())
      return state.status();
    if (state->complete)
      return data_loss("`cache`: the file `" + cache_file_path(prefix_) +
                       "` that the checkpoint was reading is gone");
    position_ = state->position;
    cache_error_ = state->pending;
    tainted_ = !state->restored_pass_records();
    if (state->ended) {
      input_.reset();
      return Status::OK();
    }
    return state->restore_input(*input_);
  }

private:
  void taint() {
    tainted_ = true;
    writer_.reset(); // removes the temporary file
  }

  IteratorPtr input_;
  std::string prefix_;
  std::string fingerprint_; // of the input, which the file records
  std::unique_ptr<CacheFileWriter> writer_;
  bool tainted_ = false;
  Status cache_error_;   // why this pass could not be cached
  int64_t position_ = 0; // elements delivered in this pass
};

} // namespace

MakeResult make_cache(const NodePtr& node, const KernelContext& kctx) {
  const std::string& filename = node->string_attr("filename");
  if (filename.empty()) {
    auto cache = kctx.tree->memory_cache(node.get());
    {
      std::lock_guard<std::mutex> lock(cache->mu);
      if (cache->complete)
        return IteratorPtr(std::make_unique<MemoryReplayIterator>(cache));
    }
    auto input = make_input(node, kctx);
    if (!input.ok())
      return input.status();
    return IteratorPtr(
      std::make_unique<MemoryRecordIterator>(std::move(*input), std::move(cache), kctx.memory()));
  }
  // The cache file is read and written (with a temporary file beside it): both must be allowed.
  const std::string path = cache_file_path(filename);
  CONVEYOR_RETURN_IF_ERROR(check_path(kctx.paths(), path, PathPolicy::Access::write, "cache"));
  // The file belongs to the input it records: another pipeline's file is refused when opened.
  const std::string input_fingerprint = fingerprint_without_pickles(Dataset(node->inputs.at(0)));
  auto reader = CacheFileReader::open(filename, input_fingerprint);
  if (reader.ok())
    return IteratorPtr(std::make_unique<FileReplayIterator>(std::move(*reader)));
  if (reader.status().code() != ErrorCode::not_found)
    return reader.status();
  auto input = make_input(node, kctx);
  if (!input.ok())
    return input.status();
  return IteratorPtr(
    std::make_unique<FileRecordIterator>(std::move(*input), filename, input_fingerprint));
}

} // namespace conveyor::kernels
