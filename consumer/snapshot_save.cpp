// save() (include/conveyor/snapshot.hpp): this process runs the dataset and writes its chunks;
// distributed_save(): the service's workers write them (worker/snapshot_stream.hpp) and this
// process waits for the snapshot to end.
#include <chrono>
#include <ctime>
#include <filesystem>
#include <functional>
#include <thread>

#include "conveyor/snapshot.hpp"
#include "node/log.hpp"
#include "pipeline/graph/text_form.hpp"
#include "pipeline/io/snapshot_writer.hpp"
#include "pipeline/runtime/iterator.hpp"

namespace conveyor {

namespace {

// Next element into `out`; `end` at the end of the dataset.
using NextElement = std::function<Status(Element& out, bool& end)>;

// The request's checks, before anything runs or is written.
Expected<snapshot::WriterOptions> writer_options(const Dataset& dataset, const std::string& path,
                                                 const SaveOptions& options) {
  if (path.empty())
    return invalid_argument("save: `path` must name a directory, got \"\"");
  CONVEYOR_RETURN_IF_ERROR(dataset.validate());
  if (dataset.cardinality() == kInfiniteCardinality)
    return invalid_argument("save: the dataset is infinite (e.g. repeat() without a count); a "
                            "snapshot holds a finite dataset's output");
  snapshot::WriterOptions w;
  if (options.compression == "lz4")
    w.compression = Compression::lz4;
  else if (options.compression == "none")
    w.compression = Compression::none;
  else
    return invalid_argument("save: `compression` must be \"lz4\" or \"none\", got \"" +
                            options.compression + "\"");
  if (options.stall_timeout.count() < 0)
    return invalid_argument(
      "save: `stall_timeout` must be >= 0 (0: wait as long as it takes), got " +
      std::to_string(options.stall_timeout.count()) + " ms");
  if (options.chunk_bytes < 1)
    return invalid_argument("save: `chunk_bytes` must be positive, got " +
                            std::to_string(options.chunk_bytes));
  w.chunk_bytes = static_cast<std::size_t>(options.chunk_bytes);
  return w;
}

Status create_snapshot(const Dataset& dataset, const std::string& path,
                       const snapshot::WriterOptions& w) {
  snapshot::Metadata m;
  m.fingerprint = dataset.fingerprint();
  m.definition = to_text(dataset);
  if (auto spec = dataset.element_spec(); spec.ok())
    m.element_spec = snapshot::format_spec_components(*spec);
  m.compression = w.compression;
  m.created_unix_s = static_cast<int64_t>(std::time(nullptr));
  return snapshot::create(path, m);
}

// Marks the snapshot failed with `cause` and returns it.
Status fail_save(const std::string& path, const Status& cause) {
  Status marked = snapshot::mark_failed(path, cause);
  return marked.ok()
           ? cause
           : cause.with_context(
               "(and the snapshot could not be marked failed: " + marked.to_string() + ")");
}

Expected<SaveResult> write_all(const std::string& path, const snapshot::WriterOptions& w,
                               const NextElement& next) {
  snapshot::StreamWriter writer(path, w);
  auto fail = [&](const Status& cause) { return fail_save(path, cause); };
  for (;;) {
    Element element;
    bool end = false;
    if (Status s = next(element, end); !s.ok())
      return fail(s);
    if (end)
      break;
    if (Status s = writer.append(std::move(element)); !s.ok())
      return fail(s);
  }
  if (Status s = writer.finish(); !s.ok())
    return fail(s);
  if (Status s = snapshot::mark_done(path, writer.chunks(), writer.elements()); !s.ok())
    return fail(s);
  return SaveResult{writer.chunks(), writer.elements(), writer.bytes()};
}

} // namespace

Expected<SaveResult> save(const Dataset& dataset, const std::string& path,
                          const SaveOptions& options) {
  auto w = writer_options(dataset, path, options);
  if (!w.ok())
    return w.status();
  auto it = dataset.make_iterator();
  if (!it.ok())
    return it.status();
  CONVEYOR_RETURN_IF_ERROR(create_snapshot(dataset, path, *w));
  Iterator& iterator = **it;
  return write_all(path, *w, [&](Element& out, bool& end) { return iterator.get_next(out, end); });
}

namespace {

// What the workers committed so far (file bytes: the chunks as they lie on disk).
Expected<SaveResult> committed_so_far(const std::string& path) {
  auto chunks = snapshot::committed_chunks(path);
  if (!chunks.ok())
    return chunks.status();
  SaveResult r;
  for (const auto& c : *chunks) {
    ++r.chunks;
    r.elements += c.elements;
    std::error_code ec;
    const auto size = std::filesystem::file_size(c.path, ec);
    r.bytes += ec ? 0 : static_cast<int64_t>(size);
  }
  return r;
}

} // namespace

Expected<SaveResult> distributed_save(Client& client, const Dataset& dataset,
                                      const std::string& path, const SaveOptions& options) {
  auto w = writer_options(dataset, path, options);
  if (!w.ok())
    return w.status();
  auto id = client.register_dataset(dataset);
  if (!id.ok())
    return id.status();
  CONVEYOR_RETURN_IF_ERROR(create_snapshot(dataset, path, *w));
  if (Status s = client.start_snapshot(*id, path, options.compression, options.chunk_bytes);
      !s.ok())
    return fail_save(path, s);
  // The workers write; this process watches the directory (which outlives a dispatcher
  // restart) until DONE or ERROR, or until nothing was committed for stall_timeout.
  using Clock = std::chrono::steady_clock;
  constexpr auto kWarnEvery = std::chrono::seconds(30);
  // DONE/ERROR are two stat() calls, checked often (a short save must not wait out a long
  // poll); the committed chunks, a directory listing, only count towards stall_timeout.
  constexpr auto kPoll = std::chrono::milliseconds(5);
  constexpr auto kCountEvery = std::chrono::milliseconds(200);
  auto progressed = Clock::now();
  auto warned = progressed;
  auto counted = progressed - kCountEvery;
  int64_t elements = -1;
  for (;;) {
    auto state = snapshot::progress(path);
    if (!state.ok())
      return state.status();
    if (state->state == snapshot::State::failed)
      return failed_precondition("distributed_save: the snapshot at " + path +
                                 " failed: " + state->error);
    if (state->state == snapshot::State::done)
      return committed_so_far(path);
    const auto now = Clock::now();
    if (now - counted >= kCountEvery) {
      counted = now;
      auto committed = committed_so_far(path);
      if (!committed.ok())
        return committed.status();
      if (committed->elements != elements) {
        elements = committed->elements;
        progressed = now;
      }
    }
    const auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(now - progressed);
    if (options.stall_timeout.count() > 0 && waited >= options.stall_timeout)
      return fail_save(
        path, Status{ErrorCode::deadline_exceeded,
                     "distributed_save: no element arrived for " + std::to_string(waited.count()) +
                       " ms (stall_timeout " + std::to_string(options.stall_timeout.count()) +
                       " ms): is a worker registered with the dispatcher and allowed to write " +
                       path + " (--allow-path)?"});
    if (now - warned >= kWarnEvery) {
      warned = now;
      log::warning("save", "distributed_save: no element committed for " +
                             std::to_string(waited.count() / 1000) +
                             " s (is a worker registered with the dispatcher?)");
    }
    std::this_thread::sleep_for(kPoll);
  }
}

} // namespace conveyor
