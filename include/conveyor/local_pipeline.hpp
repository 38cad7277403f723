// LocalPipeline: tf.data ops run in the trainer's own process on elements that come from
// elsewhere, typically an ElementStream read through the service (tf.data's
// `distribute(...)` followed by `.map(...).batch(...).prefetch(...)` in the trainer):
//
//   auto stream = client.distribute(dataset, options);
//   auto pipeline = LocalPipeline::over(*stream)
//                     .map([](const Element& e) -> Expected<Element> { return augment(e); })
//                     .batch(32)
//                     .prefetch(2);
//   Element batch;
//   bool end = false;
//   while (pipeline.next(batch, end).ok() && !end) train(batch);
//
// It runs the pipeline's own kernels: the source is a source() op over the pull function, and
// C++ callables are map/filter functions of a registry private to the pipeline, so batch,
// shuffle, prefetch, take... behave as they do on a worker. The source is read once: pipelines
// derived from one source share it, and only the first to call next() reads it.
//
// A checkpoint (issue 36) is the stream's read cursor plus what the ops hold between two next()
// calls (a shuffle buffer and its generator, prefetched elements, finished parallel map calls, the
// rest of an unbatched batch, take/skip counts), so a trainer restarted from it continues with the
// next element it would have seen:
//
//   save(pipeline.checkpoint());                                  // beside the model
//   ...
//   options.resume_from = *LocalPipeline::read_cursor_of(blob);   // after a restart
//   auto stream = client.distribute(dataset, options);
//   auto pipeline = LocalPipeline::over(*stream).map(augment).shuffle(1000, 7).batch(32);
//   pipeline.restore(blob);
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "conveyor/client.hpp"
#include "conveyor/dataset.hpp"
#include "conveyor/element.hpp"
#include "conveyor/iterator.hpp"
#include "conveyor/status.hpp"

namespace conveyor {

class LocalPipeline {
public:
  // Fills `out` or sets end_of_sequence; an error ends the pipeline with that error.
  using Pull = std::function<Status(Element& out, bool& end_of_sequence)>;
  using Map = std::function<Expected<Element>(const Element&)>;
  using Predicate = std::function<Expected<bool>(const Element&)>;
  // The read cursor of what the source has handed out so far (checkpoint()); called while the
  // ops' threads are paused.
  using Cursor = std::function<Expected<std::string>()>;

  explicit LocalPipeline(Pull source, Cursor cursor = nullptr);
  // Reads `stream`, which must outlive the iteration; `timeout` per element as in
  // ElementStream::next (deadline_exceeded then ends the pipeline with that error).
  static LocalPipeline over(ElementStream& stream,
                            std::chrono::milliseconds timeout = ElementStream::kDefaultTimeout) {
    return LocalPipeline(
      [&stream, timeout](Element& out, bool& end) { return stream.next(out, end, timeout); },
      [&stream] { return stream.checkpoint(); });
  }

  LocalPipeline(LocalPipeline&&) noexcept;
  LocalPipeline& operator=(LocalPipeline&&) noexcept;
  ~LocalPipeline();

  // The ops, with Dataset's arguments; map and filter take C++ callables run in this process
  // (num_parallel_calls > 1: on the process's executor, as Dataset::map).
  LocalPipeline map(Map fn, int64_t num_parallel_calls = 1, bool deterministic = true) const;
  LocalPipeline filter(Predicate predicate) const;
  LocalPipeline batch(int64_t batch_size, bool drop_remainder = false) const;
  LocalPipeline unbatch() const;
  LocalPipeline shuffle(int64_t buffer_size, int64_t seed = kNoSeed) const;
  LocalPipeline take(int64_t count) const;
  LocalPipeline skip(int64_t count) const;
  LocalPipeline prefetch(int64_t buffer_size = kAutotune) const;

  // The next element; the first call checks the arguments (invalid_argument naming the op and
  // argument, as Dataset::validate) and starts the pipeline. failed_precondition when another
  // pipeline over the same source started first.
  Status next(Element& out, bool& end_of_sequence);

  // The ops in the text form, e.g. "source(local_source).map(local_fn_1).batch(4)".
  std::string to_text() const;

  // A versioned blob: the source's read cursor and the ops' state, taken between two next()
  // calls. failed_precondition when the source has no cursor or its read cannot be resumed
  // (ElementStream::checkpoint); unimplemented for an op that cannot save its state; a
  // parallel map's calls in flight finish first.
  Expected<std::string> checkpoint();
  // The read cursor inside a checkpoint: DistributeOptions::resume_from of the restored stream.
  static Expected<std::string> read_cursor_of(const std::string& checkpoint);
  // Before the first next(): continues from a checkpoint of a pipeline with the same ops (else
  // invalid_argument), whose source resumes from read_cursor_of(checkpoint).
  Status restore(const std::string& checkpoint);

private:
  struct Shared; // the source and the private function registry
  LocalPipeline(std::shared_ptr<Shared> shared, Dataset dataset);
  Status start(); // makes the iterator (the first next(), checkpoint() or restore())

  std::shared_ptr<Shared> shared_;
  Dataset dataset_;
  std::unique_ptr<Iterator> iterator_; // made by the first next()
};

} // namespace conveyor
