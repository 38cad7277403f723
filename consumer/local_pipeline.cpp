#include "conveyor/local_pipeline.hpp"

#include <atomic>
#include <mutex>
#include <utility>

#include "conveyor/functions.hpp"

namespace conveyor {

namespace {

constexpr const char* kSourceName = "local_source";

// The source() op's iterator: the pull function, until it ends or fails (then it keeps
// returning the end, or the error: an iterator is not resumed after a final error).
class PullIterator : public Iterator {
public:
  explicit PullIterator(LocalPipeline::Pull pull) : pull_(std::move(pull)) {}

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

private:
  LocalPipeline::Pull pull_;
  bool done_ = false;
  Status final_;
};

} // namespace

struct LocalPipeline::Shared {
  FunctionRegistry functions; // the source and this pipeline family's callables
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

LocalPipeline::LocalPipeline(Pull source)
  : LocalPipeline(std::make_shared<Shared>(), Dataset::source(FunctionRef{kSourceName})) {
  FunctionDef def;
  def.name = kSourceName;
  def.kind = FunctionKind::source;
  def.doc = "the elements a LocalPipeline reads (an ElementStream or a pull function)";
  Shared* shared = shared_.get(); // the registry holding this function lives in *shared
  def.source = [shared,
                pull = std::move(source)](const Params&) -> Expected<std::unique_ptr<Iterator>> {
    if (shared->started.exchange(true))
      return failed_precondition("LocalPipeline: its source was already read by another pipeline "
                                 "derived from it (a source is read once)");
    return std::unique_ptr<Iterator>(std::make_unique<PullIterator>(pull));
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

Status LocalPipeline::next(Element& out, bool& end_of_sequence) {
  if (!iterator_) {
    IteratorContext ctx;
    ctx.functions = &shared_->functions;
    auto it = dataset_.make_iterator(ctx); // validates the ops' arguments first
    if (!it.ok())
      return it.status();
    iterator_ = std::move(*it);
  }
  return iterator_->get_next(out, end_of_sequence);
}

std::string LocalPipeline::to_text() const { return dataset_.to_text(); }

} // namespace conveyor
