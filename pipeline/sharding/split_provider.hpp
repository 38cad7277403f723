// Split providers for DYNAMIC sharding (tf.data service's `distributed_epoch`).
//
// A provider walks the dataset's one splittable source and hands out its splits: index ranges
// of range/from_tensor_slices, or single files of list_files/text_lines/tfrecord. It hands out
// one epoch at a time: get_next returns end_of_splits when the current epoch is exhausted, and
// the call after that starts the next epoch — as many epochs as the `repeat`s above the source
// ask for (see num_epochs). Past the last epoch every call returns end_of_splits.
//
// The dispatcher's job owns one provider per splittable source (multi_source.hpp) and journals
// each one's position(); on restart it restores them. Workers feed the splits they receive into IteratorContext::split_provider.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "pipeline/graph/dataset.hpp"
#include "pipeline/runtime/status.hpp"

namespace conveyor {

class PathPolicy; // pipeline/io/path_policy.hpp

struct Split {
  int64_t epoch = 0; // which repetition of the source
  int64_t index = 0; // sequence number of the split within its epoch
  // range / from_tensor_slices: element indices [begin, end) of the source's full sequence.
  int64_t begin = 0;
  int64_t end = 0;
  // file sources: the file (list_files yields it as a string element; text_lines/tfrecord read it).
  std::string file;
  // A job resumed from a read cursor (pipeline/sharding/read_cursor.hpp): the task drops the
  // first `skip` elements of this split's output, which the trainer consumed before. Not part of
  // the split's identity.
  int64_t skip = 0;
  // Which splittable source of the dataset it belongs to (multi_source.hpp's depth-first index;
  // tf.data's split_provider_index). Providers leave it 0; a job with several sources stamps
  // each split with its provider's index. Part of the split's identity.
  int64_t source = 0;

  friend bool operator==(const Split& a, const Split& b) {
    return a.source == b.source && a.epoch == b.epoch && a.index == b.index && a.begin == b.begin &&
           a.end == b.end && a.file == b.file;
  }
};

// Where a provider stands: the split with sequence number `next_index` of epoch `epoch` is next.
struct SplitPosition {
  int64_t epoch = 0;
  int64_t next_index = 0;
  friend bool operator==(const SplitPosition& a, const SplitPosition& b) {
    return a.epoch == b.epoch && a.next_index == b.next_index;
  }
};

class SplitProvider {
public:
  virtual ~SplitProvider() = default;
  virtual Status get_next(Split& out, bool& end_of_splits) = 0;
  virtual SplitPosition position() const = 0;
  // Continues from a saved position (data_loss/invalid_argument if it is out of range).
  virtual Status restore(const SplitPosition& pos) = 0;
};

struct SplitOptions {
  // Elements per split for index-range sources.
  int64_t range_split_size = 64;
  // Seed for list_files(shuffle=true) sources that were given no seed (kNoSeed). Left at kNoSeed,
  // the provider picks one at random when it is created; a job that must restore the same file
  // order after a restart picks the seed itself, journals it and passes it here again.
  int64_t seed = kNoSeed;
  // Where file patterns (text_lines/tfrecord files, list_files) may be listed: the dispatcher's
  // --allow-path roots. Null = unrestricted (the library in-process on the user's own files).
  const PathPolicy* paths = nullptr;
};

// The one provider of a dataset with exactly one splittable source (distributed_save's streams,
// the simulator's reference); invalid_argument (naming the reason, and the op that joins several
// sources) otherwise. A DYNAMIC job takes one per source (make_split_providers, multi_source.hpp).
Expected<std::unique_ptr<SplitProvider>>
make_split_provider(const Dataset& dataset, const SplitOptions& options = {},
                    const FunctionRegistry* functions = nullptr);

// How many epochs of splits the dataset consumes: the product of the `repeat` counts above its
// splittable source; kInfiniteCardinality for repeat() forever.
int64_t num_epochs(const Dataset& dataset);

} // namespace conveyor
