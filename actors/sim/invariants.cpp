#include "actors/sim/invariants.hpp"

#include <map>
#include <set>

#include "pipeline/codec.hpp"

namespace conveyor::sim {

namespace {

constexpr std::size_t kMaxExamples = 5;

std::string key_of(const Element& e) {
  std::string s;
  encode_element(e, s);
  return s;
}

std::string show(const Element& e) {
  auto s = e.to_string();
  if (s.size() > 60)
    s = s.substr(0, 57) + "...";
  return s;
}

std::map<std::string, int64_t> counts_of(const std::vector<Element>& elements) {
  std::map<std::string, int64_t> c;
  for (const auto& e : elements)
    ++c[key_of(e)];
  return c;
}

// Whether `part` is `whole` with some elements left out (order kept). Returns the index in
// `part` of the first element that breaks it, or part.size().
std::size_t subsequence_break(const std::vector<const Element*>& part,
                              const std::vector<Element>& whole) {
  std::size_t j = 0;
  for (std::size_t i = 0; i < part.size(); ++i) {
    while (j < whole.size() && !(whole[j] == *part[i]))
      ++j;
    if (j == whole.size())
      return i;
    ++j;
  }
  return part.size();
}

void check_splits(const Observation& o, std::vector<std::string>& out) {
  std::size_t twice = 0;
  std::string examples;
  for (const auto& [split, n] : o.splits_delivered) {
    if (n > 1 && twice++ < kMaxExamples)
      examples += std::string{examples.empty() ? "" : ", "} + "epoch " + std::to_string(split.first) +
                  " #" + std::to_string(split.second) + " (" + std::to_string(n) + " times)";
  }
  if (twice > 0)
    out.push_back("DYNAMIC: " + std::to_string(twice) +
                  " split(s) handed to tasks more than once: " + examples);
  if (!o.faults && o.expected_splits >= 0 &&
      static_cast<int64_t>(o.splits_delivered.size()) != o.expected_splits)
    out.push_back("DYNAMIC: " + std::to_string(o.splits_delivered.size()) + " of " +
                  std::to_string(o.expected_splits) +
                  " split(s) reached a task although no fault happened");
}

void check_dynamic(const Observation& o, std::vector<std::string>& out) {
  check_splits(o, out);
  if (!o.split_transparent)
    return;
  auto expected = counts_of(o.reference);
  std::map<std::string, int64_t> got;
  std::map<std::string, std::vector<std::string>> where;
  std::map<std::string, const Element*> sample;
  for (const auto& s : o.streams) {
    for (std::size_t i = 0; i < s.elements.size(); ++i) {
      auto k = key_of(s.elements[i]);
      ++got[k];
      sample[k] = &s.elements[i];
      if (where[k].size() < 3)
        where[k].push_back(s.consumer + " from " + (i < s.sources.size() ? s.sources[i] : "?"));
    }
  }
  std::size_t twice = 0;
  std::string examples;
  for (const auto& [k, n] : got) {
    int64_t allowed = expected.count(k) ? expected.at(k) : 0;
    if (n <= allowed)
      continue;
    if (twice++ < kMaxExamples) {
      std::string w;
      for (const auto& x : where[k])
        w += (w.empty() ? "" : ", ") + x;
      examples += "\n    " + show(*sample[k]) + " delivered " + std::to_string(n) + " times, the dataset holds it " +
                  std::to_string(allowed) + " (" + w + ")";
    }
  }
  if (twice > 0)
    out.push_back("DYNAMIC: " + std::to_string(twice) +
                  " element(s) delivered more often than the dataset holds them:" + examples);
  if (o.faults)
    return;
  int64_t missing = 0;
  std::string missing_examples;
  std::size_t shown = 0;
  for (const auto& e : o.reference) {
    auto k = key_of(e);
    auto& n = got[k];
    if (n > 0) {
      --n;
      continue;
    }
    ++missing;
    if (shown++ < kMaxExamples)
      missing_examples += (missing_examples.empty() ? "" : ", ") + show(e);
  }
  if (missing > 0)
    out.push_back("DYNAMIC: " + std::to_string(missing) + " of " +
                  std::to_string(o.reference.size()) +
                  " element(s) never delivered although no fault happened, e.g. " +
                  missing_examples);
}

void check_off(const Observation& o, std::vector<std::string>& out) {
  auto expected = counts_of(o.reference);
  if (o.faults) {
    // A worker that lost the dispatcher registers again and gets a new task that starts the
    // dataset from the beginning, under the same address: repeats and interleavings are then
    // correct. What always holds: every element comes from the dataset.
    std::size_t foreign = 0;
    std::string example;
    for (const auto& s : o.streams)
      for (const auto& e : s.elements)
        if (!expected.count(key_of(e)) && foreign++ == 0)
          example = show(e) + " (" + s.consumer + ")";
    if (foreign > 0)
      out.push_back("OFF: " + std::to_string(foreign) +
                    " element(s) received that the dataset does not hold, e.g. " + example);
    return;
  }
  // Per worker address: its elements across consumers; per (consumer, worker): in order.
  std::map<std::string, std::map<std::string, int64_t>> per_source;
  for (const auto& s : o.streams) {
    std::map<std::string, std::vector<const Element*>> mine;
    for (std::size_t i = 0; i < s.elements.size(); ++i) {
      const auto& src = i < s.sources.size() ? s.sources[i] : std::string{"?"};
      mine[src].push_back(&s.elements[i]);
      ++per_source[src][key_of(s.elements[i])];
    }
    if (!o.reference_ordered)
      continue;
    for (const auto& [src, part] : mine) {
      auto at = subsequence_break(part, o.reference);
      if (at < part.size())
        out.push_back("OFF: " + s.consumer + " got worker " + src +
                      "'s elements out of dataset order (or ones not in it): element #" +
                      std::to_string(at) + " of that stream is " + show(*part[at]));
    }
  }
  for (const auto& [src, counts] : per_source) {
    std::size_t extra = 0;
    for (const auto& [k, n] : counts)
      if (n > (expected.count(k) ? expected.at(k) : 0))
        ++extra;
    if (extra > 0)
      out.push_back("OFF: worker " + src + " delivered " + std::to_string(extra) +
                    " element(s) more often than the dataset holds them");
  }
  if (static_cast<int>(per_source.size()) != o.workers && !o.reference.empty())
    out.push_back("OFF: elements came from " + std::to_string(per_source.size()) +
                  " worker(s), expected every one of the " + std::to_string(o.workers));
  for (const auto& [src, counts] : per_source) {
    int64_t total = 0;
    for (const auto& [k, n] : counts)
      total += n;
    if (counts != expected)
      out.push_back("OFF: worker " + src + "'s stream is not the whole dataset without faults: " +
                    std::to_string(total) + " element(s) received, the dataset has " +
                    std::to_string(o.reference.size()));
  }
}

} // namespace

std::vector<std::string> check_invariants(const Observation& o) {
  std::vector<std::string> out;
  for (const auto& v : o.violations)
    out.push_back("simulator: " + v);
  for (const auto& s : o.streams) {
    if (!s.ended && !s.crashed)
      out.push_back("liveness: " + s.consumer + "'s stream did not end within " + o.time_limit +
                    " of virtual time (" + std::to_string(s.elements.size()) +
                    " element(s) received)");
    else if (s.ended && !s.status.ok() && !o.faults)
      out.push_back(s.consumer + "'s stream failed although no fault happened: " +
                    s.status.to_string());
    if (s.max_unacked > o.credits)
      out.push_back("consumer memory: " + s.consumer + " held " + std::to_string(s.max_unacked) +
                    " delivered but untaken element(s), more than its " +
                    std::to_string(o.credits) + " credit(s)");
  }
  for (const auto& l : o.leaks)
    out.push_back("leak: " + l);
  if (o.policy == ShardingPolicy::dynamic)
    check_dynamic(o, out);
  else if (o.policy == ShardingPolicy::off)
    check_off(o, out);
  return out;
}

} // namespace conveyor::sim
