// cache(filename): the first complete pass over the input is recorded; later iterators replay it
// instead of reading the input. filename "" records in memory, shared by the iterators of one
// iterator tree (e.g. the passes of a `repeat` above). Otherwise the pass goes to a file
// (cache_file.hpp) committed only when the pass completes; any later iterator, in this process or
// a later one, reads the committed file. A pass that saw an input error is not recorded.
#include <utility>

#include "pipeline/kernels/cache_file.hpp"
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
    Status status = input_->get_next(out, end_of_sequence);
    if (!status.ok()) {
      tainted_ = tainted_ || status.code() != ErrorCode::unavailable;
      return status;
    }
    if (!end_of_sequence) {
      CONVEYOR_RETURN_IF_ERROR(reserve_one_more(recorded_, charge_));
      CONVEYOR_RETURN_IF_ERROR(charge_.add(element_heap_bytes(out)));
      recorded_.push_back(out);
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

private:
  IteratorPtr input_;
  std::shared_ptr<MemoryCache> cache_;
  std::vector<Element> recorded_;
  bool tainted_ = false;
  MemoryCharge charge_; // recorded_, handed to the cache when the pass completes
};

class FileReplayIterator : public Iterator {
public:
  explicit FileReplayIterator(std::unique_ptr<CacheFileReader> reader)
    : reader_(std::move(reader)) {}

  Status get_next(Element& out, bool& end_of_sequence) override {
    return reader_->read(out, end_of_sequence);
  }

private:
  std::unique_ptr<CacheFileReader> reader_;
};

class FileRecordIterator : public Iterator {
public:
  FileRecordIterator(IteratorPtr input, std::string prefix)
    : input_(std::move(input)), prefix_(std::move(prefix)) {}

  Status get_next(Element& out, bool& end_of_sequence) override {
    end_of_sequence = false;
    if (!input_) {
      end_of_sequence = true;
      return Status::OK();
    }
    if (!writer_ && !tainted_) {
      auto writer = CacheFileWriter::create(prefix_);
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

private:
  void taint() {
    tainted_ = true;
    writer_.reset(); // removes the temporary file
  }

  IteratorPtr input_;
  std::string prefix_;
  std::unique_ptr<CacheFileWriter> writer_;
  bool tainted_ = false;
  Status cache_error_; // why this pass could not be cached
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
  auto reader = CacheFileReader::open(filename);
  if (reader.ok())
    return IteratorPtr(std::make_unique<FileReplayIterator>(std::move(*reader)));
  if (reader.status().code() != ErrorCode::not_found)
    return reader.status();
  auto input = make_input(node, kctx);
  if (!input.ok())
    return input.status();
  return IteratorPtr(std::make_unique<FileRecordIterator>(std::move(*input), filename));
}

} // namespace conveyor::kernels
