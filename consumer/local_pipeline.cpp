#include "conveyor/local_pipeline.hpp"

#include <atomic>
#include <mutex>
#include <utility>

#include "conveyor/functions.hpp"
#include "conveyor/iterator_state.hpp"

namespace conveyor {

namespace {

constexpr const char* kSourceName = "local_source";
constexpr const char* kCheckpointFormat = "conveyor.local_pipeline.v1";

// The source's read cursor into `out`.
Status save_cursor(const LocalPipeline::Cursor& cursor, IteratorStateWriter& out) {
  if (!cursor)
    return failed_precondition("LocalPipeline::checkpoint: its source has no read cursor (use "
                               "LocalPipeline::over(stream), "
                               "or give the pull function a Cursor)");
  auto blob = cursor();
  if (!blob.ok())
    return blob.status();
  out.set_read_cursor(std::move(*blob));
  return Status::OK();
}

// The source() op's iterator: the pull function, until it ends or fails (then it keeps
// returning the end, or the error: an iterator is not resumed after a final error).
class PullIterator : public Iterator {
public:
  PullIterator(LocalPipeline::Pull pull, LocalPipeline::Cursor cursor)
    : pull_(std::move(pull)), cursor_(std::move(cursor)) {}

  Status get_next(Element& out, bool& end_of_sequence) override {
    if (done_) {
      end_of_sequence = true;
      return final_;
    }
    end_of_sequence = false;
    Status st = pull_(out, end_of_sequence);
    if (!st.ok() || end_of_sequence) {
      done_ = true;
      final_ = st;
    }
    return st;
  }

  Status save(IteratorStateWriter& out) override {
    CONVEYOR_RETURN_IF_ERROR(save_cursor(cursor_, out));
    out.put_tag(kSourceName);
    out.put_bool(done_);
    out.put_status(final_);
    return Status::OK();
  }

  Status restore(IteratorStateReader& in) override {
    CONVEYOR_RETURN_IF_ERROR(in.expect_tag(kSourceName));
    done_ = in.get_bool();
    final_ = in.get_status();
    return in.status();
  }

private:
  LocalPipeline::Pull pull_;
  LocalPipeline::Cursor cursor_;
  bool done_ = false;
  Status final_;
};

// A pipeline whose restore failed: it returns that error, never half-restored elements.
class FailedIterator : public Iterator {
public:
  explicit FailedIterator(Status status) : status_(std::move(status)) {}
  Status get_next(Element&, bool&) override { return status_; }

private:
  Status status_;
};

} // namespace

struct LocalPipeline::Shared {
  FunctionRegistry functions; // the source and this pipeline family's callables
  Cursor cursor;              // the source's
  std::atomic<bool> started{false};
  std::mutex mu; // guards next_id
  int64_t next_id = 0;

  std::string add(FunctionDef def, const char* prefix) {
    {
      std::lock_guard<std::mutex> lock(mu);
      def.name = std::string{prefix} + std::to_string(++next_id);
    }
    std::string name = def.name;
    (void)functions.add(std::move(def)); // names are unique: never already_exists
    return name;
  }
};

LocalPipeline::LocalPipeline(Pull source, Cursor cursor)
  : LocalPipeline(std::make_shared<Shared>(), Dataset::source(FunctionRef{kSourceName})) {
  FunctionDef def;
  def.name = kSourceName;
  def.kind = FunctionKind::source;
  def.doc = "the elements a LocalPipeline reads (an ElementStream or a pull function)";
  shared_->cursor = cursor;
  Shared* shared = shared_.get(); // the registry holding this function lives in *shared
  def.source = [shared, pull = std::move(source),
                cursor = std::move(cursor)](const Params&) -> Expected<std::unique_ptr<Iterator>> {
    if (shared->started.exchange(true))
      return failed_precondition("LocalPipeline: its source was already read by another pipeline "
                                 "derived from it (a source is read once)");
    return std::unique_ptr<Iterator>(std::make_unique<PullIterator>(pull, cursor));
  };
  (void)shared_->functions.add(std::move(def));
}

LocalPipeline::LocalPipeline(std::shared_ptr<Shared> shared, Dataset dataset)
  : shared_(std::move(shared)), dataset_(std::move(dataset)) {}

LocalPipeline::LocalPipeline(LocalPipeline&&) noexcept = default;
LocalPipeline& LocalPipeline::operator=(LocalPipeline&&) noexcept = default;
LocalPipeline::~LocalPipeline() = default; // the iterator goes before the registry it uses

LocalPipeline LocalPipeline::map(Map fn, int64_t num_parallel_calls, bool deterministic) const {
  FunctionDef def;
  def.kind = FunctionKind::map;
  def.doc = "a C++ callable of a LocalPipeline";
  def.map = [fn = std::move(fn)](const Element& e, const Params&) { return fn(e); };
  const std::string name = shared_->add(std::move(def), "local_fn_");
  return {shared_, dataset_.map(FunctionRef{name}, num_parallel_calls, deterministic)};
}

LocalPipeline LocalPipeline::filter(Predicate predicate) const {
  FunctionDef def;
  def.kind = FunctionKind::predicate;
  def.doc = "a C++ predicate of a LocalPipeline";
  def.predicate = [p = std::move(predicate)](const Element& e, const Params&) { return p(e); };
  const std::string name = shared_->add(std::move(def), "local_predicate_");
  return {shared_, dataset_.filter(FunctionRef{name})};
}

LocalPipeline LocalPipeline::batch(int64_t batch_size, bool drop_remainder) const {
  return {shared_, dataset_.batch(batch_size, drop_remainder)};
}

LocalPipeline LocalPipeline::unbatch() const { return {shared_, dataset_.unbatch()}; }

LocalPipeline LocalPipeline::shuffle(int64_t buffer_size, int64_t seed) const {
  return {shared_, dataset_.shuffle(buffer_size, seed)};
}

LocalPipeline LocalPipeline::take(int64_t count) const { return {shared_, dataset_.take(count)}; }

LocalPipeline LocalPipeline::skip(int64_t count) const { return {shared_, dataset_.skip(count)}; }

LocalPipeline LocalPipeline::prefetch(int64_t buffer_size) const {
  return {shared_, dataset_.prefetch(buffer_size)};
}

Status LocalPipeline::start() {
  if (iterator_)
    return Status::OK();
  IteratorContext ctx;
  ctx.functions = &shared_->functions;
  auto it = dataset_.make_iterator(ctx); // validates the ops' arguments first
  if (!it.ok())
    return it.status();
  iterator_ = std::move(*it);
  return Status::OK();
}

Status LocalPipeline::next(Element& out, bool& end_of_sequence) {
  CONVEYOR_RETURN_IF_ERROR(start());
  return iterator_->get_next(out, end_of_sequence);
}

Expected<std::string> LocalPipeline::checkpoint() {
  CONVEYOR_RETURN_IF_ERROR(start());
  IteratorStateWriter ops;
  Status st = iterator_->save(ops);
  // An op that needs no more input released it (a finished take): the source is not saved,
  // and its cursor, still what it handed out, is taken here.
  if (st.ok() && !ops.has_read_cursor())
    st = save_cursor(shared_->cursor, ops);
  if (!st.ok())
    return st.with_context("LocalPipeline::checkpoint");
  IteratorStateWriter blob;
  blob.put_bytes(kCheckpointFormat);
  blob.put_bytes(to_text());
  blob.put_bytes(ops.read_cursor());
  blob.put_bytes(ops.bytes());
  return blob.bytes();
}

namespace {

struct ParsedCheckpoint {
  std::string text;
  std::string read_cursor;
  std::string ops;
};

Expected<ParsedCheckpoint> parse_checkpoint(const std::string& checkpoint) {
  IteratorStateReader in(checkpoint);
  const std::string format = in.get_bytes();
  if (in.status().ok() && format != kCheckpointFormat) {
    if (format.rfind("conveyor.local_pipeline.", 0) != 0)
      return data_loss("LocalPipeline checkpoint: not a checkpoint of a LocalPipeline");
    return Status(ErrorCode::version_mismatch, "LocalPipeline checkpoint: format `" + format +
                                                 "`, this build reads `" + kCheckpointFormat + "`");
  }
  ParsedCheckpoint parsed;
  parsed.text = in.get_bytes();
  parsed.read_cursor = in.get_bytes();
  parsed.ops = in.get_bytes();
  if (!in.status().ok() || !in.at_end())
    return data_loss("LocalPipeline checkpoint: not a checkpoint of a LocalPipeline, or truncated");
  return parsed;
}

} // namespace

Expected<std::string> LocalPipeline::read_cursor_of(const std::string& checkpoint) {
  auto parsed = parse_checkpoint(checkpoint);
  if (!parsed.ok())
    return parsed.status();
  return std::move(parsed->read_cursor);
}

Status LocalPipeline::restore(const std::string& checkpoint) {
  if (iterator_)
    return failed_precondition("LocalPipeline::restore: call it before the first next()");
  Status st = [&]() -> Status {
    auto parsed = parse_checkpoint(checkpoint);
    if (!parsed.ok())
      return parsed.status();
    if (parsed->text != to_text())
      return invalid_argument("the checkpoint is of the pipeline `" + parsed->text +
                              "`, this one is `" + to_text() + "`");
    CONVEYOR_RETURN_IF_ERROR(start());
    IteratorStateReader in(parsed->ops);
    CONVEYOR_RETURN_IF_ERROR(iterator_->restore(in));
    if (!in.at_end())
      return data_loss("pipeline state: bytes left over after the last op");
    return Status::OK();
  }();
  if (!st.ok()) {
    st = st.with_context("LocalPipeline::restore");
    // Not to be read as if fresh, nor half restored: it returns the error.
    iterator_ = std::make_unique<FailedIterator>(st);
  }
  return st;
}

std::string LocalPipeline::to_text() const { return dataset_.to_text(); }

} // namespace conveyor
