// Elements handed to a reader, decoded where it reads them (actors/ready_elements.hpp).
#include "actors/ready_elements.hpp"

#include <algorithm>
#include <utility>

#include "pipeline/codec.hpp"

namespace conveyor::actors {

void ReadyElements::add(Element element) {
  if (runs_.empty() || !runs_.back().encoded.empty())
    runs_.emplace_back();
  runs_.back().decoded.push_back(std::move(element));
  ++size_;
}

void ReadyElements::add(std::vector<Element> elements) {
  if (elements.empty())
    return;
  size_ += elements.size();
  if (runs_.empty() || !runs_.back().encoded.empty()) {
    runs_.emplace_back();
    runs_.back().decoded = std::move(elements);
    return;
  }
  auto& d = runs_.back().decoded;
  d.insert(d.end(), std::make_move_iterator(elements.begin()), std::make_move_iterator(elements.end()));
}

void ReadyElements::add_encoded(std::string buffer, uint32_t count, std::vector<bool> keep,
                                std::string source) {
  const std::size_t kept =
    keep.empty() ? count : static_cast<std::size_t>(std::count(keep.begin(), keep.end(), true));
  if (kept == 0)
    return;
  Run run;
  run.encoded = std::move(buffer);
  run.count = count;
  run.keep = std::move(keep);
  run.source = std::move(source);
  runs_.push_back(std::move(run));
  size_ += kept;
}

void ReadyElements::append(ReadyElements&& more) {
  if (runs_.empty())
    runs_.swap(more.runs_);
  else
    for (auto& r : more.runs_)
      runs_.push_back(std::move(r));
  size_ += more.size_;
  more.runs_.clear();
  more.size_ = 0;
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

Status ReadyElements::take(std::vector<Element>& out) {
  Status status;
  for (auto& run : runs_) {
    if (run.encoded.empty()) {
      for (auto& e : run.decoded)
        out.push_back(std::move(e));
      continue;
    }
    // Decoded straight onto the end of `out` (no vector in between); what the consumer dropped
    // (keep) is then squeezed out in place.
    const std::size_t first = out.size();
    status = decode(run.encoded, run.count, run.source, out);
    if (!status.ok())
      break;
    if (!run.keep.empty()) {
      std::size_t kept = first;
      for (std::size_t i = 0; i < run.count; ++i)
        if (run.keep[i]) {
          if (kept != first + i)
            out[kept] = std::move(out[first + i]);
          ++kept;
        }
      out.resize(kept);
    }
  }
  runs_.clear();
  size_ = 0;
  return status;
}

} // namespace conveyor::actors
