#include "pipeline/sharding/split_provider.hpp"

#include "pipeline/sharding/multi_source.hpp"

#include <algorithm>
#include <limits>
#include <mutex>
#include <random>
#include <vector>

#include "pipeline/io/files.hpp"
#include "pipeline/io/path_policy.hpp"
#include "pipeline/io/snapshot_files.hpp"
#include "pipeline/graph/text_form.hpp"

namespace conveyor {

namespace {

// --- finding the splittable source -------------------------------------------------------------

constexpr const char* kSplittableOpsText =
  "range, from_tensor_slices, list_files, text_lines, tfrecord, csv, webdataset, load";

bool is_splittable(const std::string& op) {
  return op == "range" || op == "from_tensor_slices" || op == "list_files" || op == "text_lines" ||
         op == "tfrecord" || op == "csv" || op == "webdataset" || op == "load";
}

// One occurrence of a splittable source, with the ops on the way down to it from the root.
struct SourcePath {
  const Node* source = nullptr;
  std::vector<const Node*> above; // root first, the source's direct consumer last
};

// Walks dataset inputs only: the datasets that flat_map/interleave functions build are not part
// of this graph. A node reachable twice (zip(d, d)) is iterated twice, so it counts twice.
void collect_sources(const Node& node, std::vector<const Node*>& path,
                     std::vector<SourcePath>& out) {
  if (is_splittable(node.op)) {
    out.push_back({&node, path});
    return;
  }
  path.push_back(&node);
  for (const auto& input : node.inputs)
    if (input)
      collect_sources(*input, path, out);
  path.pop_back();
}

std::vector<SourcePath> splittable_sources(const Dataset& dataset) {
  std::vector<SourcePath> found;
  std::vector<const Node*> path;
  if (dataset.node())
    collect_sources(*dataset.node(), path, found);
  return found;
}

// Names the op that joins the first two sources (zip or concatenate: where their paths from the
// root part), since that is what the user wrote and what tf.data would split per input.
std::string combining_op_hint(const std::vector<SourcePath>& sources) {
  if (sources.size() < 2)
    return "";
  const auto& a = sources[0].above;
  const auto& b = sources[1].above;
  std::size_t common = 0;
  while (common < a.size() && common < b.size() && a[common] == b[common])
    ++common;
  if (common == 0)
    return "";
  const std::string& op = a[common - 1]->op;
  return ": `" + op +
         "` reads several splittable sources, and this reads the dataset through one split "
         "provider (a DYNAMIC job gives each source its own; a distributed_save does not); use "
         "one source";
}

// Long definitions would drown the error message; the head is enough to recognise it.
std::string abbreviated_text(const Dataset& dataset) {
  constexpr std::size_t kMaxChars = 200;
  std::string text = to_text(dataset);
  if (text.size() > kMaxChars)
    text = text.substr(0, kMaxChars) + "...";
  return text;
}

// Product of the repeat counts above the source: 0 wins over forever (repeat(0) never asks its
// input), forever wins over any count, and a product past int64 is as good as forever.
int64_t epochs_along(const std::vector<const Node*>& above) {
  bool forever = false;
  int64_t product = 1;
  for (const Node* node : above) {
    if (node->op != "repeat")
      continue;
    const int64_t count = node->int_attr("count");
    if (count == 0)
      return 0;
    if (count < 0 || forever) {
      forever = true;
      continue;
    }
    if (product > std::numeric_limits<int64_t>::max() / count)
      forever = true;
    else
      product *= count;
  }
  return forever ? kInfiniteCardinality : product;
}

// --- the splits of one epoch --------------------------------------------------------------------

// What a source's epoch looks like: how many splits, and split number `index` of epoch `epoch`.
class EpochSplits {
public:
  virtual ~EpochSplits() = default;
  virtual int64_t count() const = 0;
  // Precondition: 0 <= index < count().
  virtual Split at(int64_t epoch, int64_t index) = 0;
};

// range / from_tensor_slices: element indices [0, num_elements) cut into pieces of split_size.
class IndexRangeSplits final : public EpochSplits {
public:
  IndexRangeSplits(int64_t num_elements, int64_t split_size)
    : num_elements_(num_elements), split_size_(split_size) {}

  int64_t count() const override {
    return num_elements_ / split_size_ + (num_elements_ % split_size_ != 0 ? 1 : 0);
  }

  Split at(int64_t epoch, int64_t index) override {
    Split split;
    split.epoch = epoch;
    split.index = index;
    split.begin = index * split_size_;
    split.end = split.begin + std::min(split_size_, num_elements_ - split.begin);
    return split;
  }

private:
  int64_t num_elements_;
  int64_t split_size_;
};

uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// Fisher-Yates with mt19937_64 (fully specified by the standard) and an explicit unbiased draw
// (std::uniform_int_distribution differs between standard libraries), so that a dispatcher built
// anywhere lists the same order for the same seed and epoch.
void deterministic_shuffle(std::vector<std::string>& items, uint64_t seed) {
  std::mt19937_64 engine(seed);
  for (std::size_t i = items.size(); i > 1; --i) {
    const uint64_t bound = i;
    const uint64_t limit =
      std::numeric_limits<uint64_t>::max() - std::numeric_limits<uint64_t>::max() % bound;
    uint64_t draw = engine();
    while (draw >= limit)
      draw = engine();
    std::swap(items[i - 1], items[static_cast<std::size_t>(draw % bound)]);
  }
}

// One split per file. list_files(shuffle=true) reorders the files every epoch from (seed, epoch).
class FileSplits final : public EpochSplits {
public:
  FileSplits(std::vector<std::string> files, bool shuffle, int64_t seed)
    : files_(std::move(files)), shuffle_(shuffle), seed_(seed) {}

  int64_t count() const override { return static_cast<int64_t>(files_.size()); }

  Split at(int64_t epoch, int64_t index) override {
    Split split;
    split.epoch = epoch;
    split.index = index;
    split.file = order_for(epoch)[static_cast<std::size_t>(index)];
    return split;
  }

private:
  const std::vector<std::string>& order_for(int64_t epoch) {
    if (!shuffle_)
      return files_;
    if (ordered_epoch_ != epoch) {
      ordered_ = files_;
      deterministic_shuffle(ordered_, splitmix64(static_cast<uint64_t>(seed_) ^
                                                 splitmix64(static_cast<uint64_t>(epoch))));
      ordered_epoch_ = epoch;
    }
    return ordered_;
  }

  std::vector<std::string> files_; // sorted by name
  bool shuffle_;
  int64_t seed_;
  int64_t ordered_epoch_ = -1;
  std::vector<std::string> ordered_;
};

// Number of elements of range(start, stop, step), computed without overflow.
Expected<int64_t> range_size(const Node& range) {
  const __int128 start = range.int_attr("start");
  const __int128 stop = range.int_attr("stop");
  const __int128 step = range.int_attr("step");
  if (step == 0)
    return invalid_argument("range: `step` must not be 0");
  __int128 n = 0;
  if (step > 0 && stop > start)
    n = (stop - start + step - 1) / step;
  else if (step < 0 && stop < start)
    n = (start - stop - step - 1) / -step;
  return static_cast<int64_t>(n);
}

// Number of slices of from_tensor_slices: the common size of dimension 0 of every component.
Expected<int64_t> slice_count(const Node& node) {
  const Element& element = node.element_attr("element");
  if (element.size() == 0)
    return invalid_argument("from_tensor_slices: the element has no components to slice");
  int64_t n = -1;
  for (std::size_t i = 0; i < element.size(); ++i) {
    const Tensor& t = element[i];
    if (t.rank() == 0)
      return invalid_argument("from_tensor_slices: component " + std::to_string(i) +
                              " is a scalar; every component needs a dimension 0 to slice");
    if (n >= 0 && t.shape()[0] != n)
      return invalid_argument("from_tensor_slices: components differ in dimension 0 (" +
                              std::to_string(n) + " vs " + std::to_string(t.shape()[0]) + ")");
    n = t.shape()[0];
  }
  return n;
}

Expected<std::unique_ptr<EpochSplits>> make_epoch_splits(const Node& source,
                                                         const SplitOptions& options) {
  const std::string& op = source.op;
  if (op == "range" || op == "from_tensor_slices") {
    if (options.range_split_size <= 0)
      return invalid_argument("`range_split_size` must be positive, got " +
                              std::to_string(options.range_split_size));
    Expected<int64_t> n = op == "range" ? range_size(source) : slice_count(source);
    if (!n)
      return n.status();
    return std::unique_ptr<EpochSplits>(new IndexRangeSplits(*n, options.range_split_size));
  }
  if (op == "text_lines" || op == "tfrecord" || op == "csv" || op == "webdataset") {
    // Patterns expand here, on the job's side: the splits name single files.
    Expected<std::vector<std::string>> files =
      expand_file_patterns(op, source.strings_attr("files"), options.paths);
    if (!files)
      return files.status();
    return std::unique_ptr<EpochSplits>(new FileSplits(std::move(*files), false, 0));
  }
  if (op == "load") {
    // The chunks of a finished snapshot (one still written has no final chunk list to split).
    const std::string dir = source.string_attr("path");
    CONVEYOR_RETURN_IF_ERROR(check_path(options.paths, dir, PathPolicy::Access::list, "load"));
    auto progress = snapshot::progress(dir);
    if (!progress)
      return progress.status().with_context("load");
    if (progress->state != snapshot::State::done)
      return failed_precondition(
        "load: DYNAMIC sharding reads a finished snapshot only; the snapshot at " + dir +
        (progress->state == snapshot::State::failed ? " failed: " + progress->error
                                                    : " is still being written"));
    auto chunks = snapshot::committed_chunks(dir);
    if (!chunks)
      return chunks.status().with_context("load");
    std::vector<std::string> files;
    for (const auto& c : *chunks)
      files.push_back(c.path);
    return std::unique_ptr<EpochSplits>(new FileSplits(std::move(files), false, 0));
  }
  // list_files: the files matching the pattern, sorted by name (as tf.data lists them before
  // shuffling); no match is an error, as in tf.data ("No files matched pattern").
  Expected<std::vector<std::string>> files =
    glob_sorted("list_files", source.string_attr("pattern"), options.paths);
  if (!files)
    return files.status();
  const bool shuffle = source.bool_attr("shuffle");
  int64_t seed = source.int_attr("seed");
  if (seed == kNoSeed)
    seed = options.seed;
  if (seed == kNoSeed && shuffle)
    seed = static_cast<int64_t>(std::random_device{}() >> 1);
  return std::unique_ptr<EpochSplits>(new FileSplits(std::move(*files), shuffle, seed));
}

// --- the provider -------------------------------------------------------------------------------

// Hands out the splits of `epochs` epochs (kInfiniteCardinality: no end). Locked, so that workers
// in one process may share it.
class SourceSplitProvider final : public SplitProvider {
public:
  SourceSplitProvider(std::unique_ptr<EpochSplits> splits, int64_t epochs)
    : splits_(std::move(splits)), epochs_(epochs) {}

  Status get_next(Split& out, bool& end_of_splits) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (past_last_epoch(pos_.epoch)) {
      end_of_splits = true;
      return Status::OK();
    }
    if (pos_.next_index < splits_->count()) {
      out = splits_->at(pos_.epoch, pos_.next_index);
      ++pos_.next_index;
      end_of_splits = false;
      return Status::OK();
    }
    // This epoch is done: report it, and let the next call start the next epoch.
    end_of_splits = true;
    ++pos_.epoch;
    pos_.next_index = 0;
    return Status::OK();
  }

  SplitPosition position() const override {
    std::lock_guard<std::mutex> lock(mu_);
    return pos_;
  }

  Status restore(const SplitPosition& pos) override {
    if (pos.epoch < 0 || pos.next_index < 0)
      return invalid_argument("split position must not be negative, got epoch " +
                              std::to_string(pos.epoch) + ", next_index " +
                              std::to_string(pos.next_index));
    std::lock_guard<std::mutex> lock(mu_);
    // The position right after the last epoch is (epochs, 0); nothing lies beyond it.
    if (past_last_epoch(pos.epoch) && !(pos.epoch == epochs_ && pos.next_index == 0))
      return data_loss("split position epoch " + std::to_string(pos.epoch) +
                       " is past this dataset's " + std::to_string(epochs_) + " epoch(s)");
    if (!past_last_epoch(pos.epoch) && pos.next_index > splits_->count())
      return data_loss("split position next_index " + std::to_string(pos.next_index) +
                       " is past the " + std::to_string(splits_->count()) + " splits of an epoch");
    pos_ = pos;
    return Status::OK();
  }

private:
  bool past_last_epoch(int64_t epoch) const {
    return epochs_ != kInfiniteCardinality && epoch >= epochs_;
  }

  mutable std::mutex mu_;
  std::unique_ptr<EpochSplits> splits_;
  const int64_t epochs_;
  SplitPosition pos_;
};

} // namespace

Expected<std::unique_ptr<SplitProvider>> make_split_provider(const Dataset& dataset,
                                                             const SplitOptions& options,
                                                             const FunctionRegistry* functions) {
  // Functions cannot hold a splittable source of this graph (see collect_sources), so the
  // registry is not consulted.
  (void)functions;
  std::vector<SourcePath> sources = splittable_sources(dataset);
  if (sources.size() != 1)
    return invalid_argument(
      "DYNAMIC sharding needs exactly one splittable source (" + std::string(kSplittableOpsText) +
      "); found " + (sources.empty() ? std::string("none") : std::to_string(sources.size())) +
      " in " + abbreviated_text(dataset) + combining_op_hint(sources));
  Expected<std::unique_ptr<EpochSplits>> splits = make_epoch_splits(*sources[0].source, options);
  if (!splits)
    return splits.status();
  return std::unique_ptr<SplitProvider>(
    new SourceSplitProvider(std::move(*splits), epochs_along(sources[0].above)));
}

Expected<std::vector<std::unique_ptr<SplitProvider>>>
make_split_providers(const Dataset& dataset, const SplitOptions& options) {
  std::vector<SourcePath> sources = splittable_sources(dataset);
  if (sources.empty())
    return invalid_argument("DYNAMIC sharding needs a splittable source (" +
                            std::string(kSplittableOpsText) + "); found none in " +
                            abbreviated_text(dataset));
  std::vector<std::unique_ptr<SplitProvider>> providers;
  for (std::size_t i = 0; i < sources.size(); ++i) {
    Expected<std::unique_ptr<EpochSplits>> splits = make_epoch_splits(*sources[i].source, options);
    if (!splits)
      return splits.status().with_context("splittable source " + std::to_string(i) + " (`" +
                                          sources[i].source->op + "`)");
    providers.emplace_back(
      new SourceSplitProvider(std::move(*splits), epochs_along(sources[i].above)));
  }
  return providers;
}

int64_t splittable_source_count(const Node& node) {
  std::vector<SourcePath> found;
  std::vector<const Node*> path;
  collect_sources(node, path, found);
  return static_cast<int64_t>(found.size());
}

int64_t num_epochs(const Dataset& dataset) {
  std::vector<SourcePath> sources = splittable_sources(dataset);
  // Without exactly one source there are no splits to count epochs of; make_split_provider
  // reports that case.
  if (sources.size() != 1)
    return 1;
  return epochs_along(sources[0].above);
}

std::vector<int64_t> num_epochs_per_source(const Dataset& dataset) {
  std::vector<int64_t> epochs;
  for (const SourcePath& source : splittable_sources(dataset))
    epochs.push_back(epochs_along(source.above));
  return epochs;
}

} // namespace conveyor
