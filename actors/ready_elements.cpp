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

template <typename Out>
Status ReadyElements::take_into(Out& out) {
  Status status;
  std::vector<Element> decoded;
  for (auto& run : runs_) {
    if (run.encoded.empty()) {
      for (auto& e : run.decoded)
        out.push_back(std::move(e));
      continue;
    }
    decoded.clear();
    status = decode_batch(run.encoded, decoded);
    if (!status.ok()) {
      status = status.with_context("decoding a batch from " + run.source);
      break;
    }
    if (decoded.size() != run.count) {
      status = data_loss("a batch from " + run.source + " announced " + std::to_string(run.count) +
                         " elements but held " + std::to_string(decoded.size()));
      break;
    }
    for (std::size_t i = 0; i < decoded.size(); ++i)
      if (run.keep.empty() || run.keep[i])
        out.push_back(std::move(decoded[i]));
  }
  runs_.clear();
  size_ = 0;
  return status;
}

Status ReadyElements::take(std::deque<Element>& out) { return take_into(out); }
Status ReadyElements::take(std::vector<Element>& out) { return take_into(out); }

} // namespace conveyor::actors
