// save() and distributed_save() (include/conveyor/snapshot.hpp): one driver over an element
// source, so both write, count and fail alike.
#include <chrono>
#include <ctime>
#include <functional>

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

Expected<SaveResult> write_all(const std::string& path, const snapshot::WriterOptions& w,
                               const NextElement& next) {
  snapshot::StreamWriter writer(path, w);
  auto fail = [&](const Status& cause) -> Status {
    Status marked = snapshot::mark_failed(path, cause);
    return marked.ok()
             ? cause
             : cause.with_context(
                 "(and the snapshot could not be marked failed: " + marked.to_string() + ")");
  };
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

Expected<SaveResult> distributed_save(Client& client, const Dataset& dataset,
                                      const std::string& path, const SaveOptions& options,
                                      DistributeOptions read) {
  auto w = writer_options(dataset, path, options);
  if (!w.ok())
    return w.status();
  auto stream = client.distribute(dataset, read);
  if (!stream.ok())
    return stream.status();
  CONVEYOR_RETURN_IF_ERROR(create_snapshot(dataset, path, *w));
  ElementStream& elements = *stream;
  return write_all(path, *w, [&](Element& out, bool& end) {
    using Clock = std::chrono::steady_clock;
    constexpr auto kWarnEvery = std::chrono::seconds(30);
    const auto since = Clock::now();
    auto warned = since;
    for (;;) { // a slow worker is no failure: only a final error or the stall timeout ends it
      Status s = elements.next(out, end, std::chrono::seconds(1)); // to check the waits below
      if (s.code() != ErrorCode::deadline_exceeded)
        return s;
      const auto now = Clock::now();
      const auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(now - since);
      if (options.stall_timeout.count() > 0 && waited >= options.stall_timeout)
        return Status{ErrorCode::deadline_exceeded,
                      "distributed_save: no element arrived for " + std::to_string(waited.count()) +
                        " ms (stall_timeout " + std::to_string(options.stall_timeout.count()) +
                        " ms): is a worker registered with the dispatcher and producing?"};
      if (now - warned >= kWarnEvery) {
        warned = now;
        log::warning("save", "distributed_save: waiting " + std::to_string(waited.count() / 1000) +
                               " s for the next element (is a worker registered with the "
                               "dispatcher?)");
      }
    }
  });
}

} // namespace conveyor
