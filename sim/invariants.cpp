#include "sim/invariants.hpp"

#include <algorithm>
#include <limits>
#include <map>
#include <optional>
#include <set>

#include "pipeline/tensor/codec.hpp"

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

bool all_ok(const Observation& o) {
  for (const auto& s : o.streams)
    if (!s.ended || !s.status.ok() || s.crashed)
      return false;
  return !o.streams.empty();
}

void check_splits(const Observation& o, std::vector<std::string>& out) {
  if (o.faults) {
    // Re-issued splits are handed out again; every split must reach a task at least once.
    if (all_ok(o) && o.expected_splits >= 0 &&
        static_cast<int64_t>(o.splits_delivered.size()) < o.expected_splits)
      out.push_back("DYNAMIC: only " + std::to_string(o.splits_delivered.size()) + " of " +
                    std::to_string(o.expected_splits) +
                    " split(s) reached a task, yet every stream ended OK");
    return;
  }
  std::size_t twice = 0;
  std::string examples;
  for (const auto& [split, n] : o.splits_delivered) {
    if (n > 1 && twice++ < kMaxExamples)
      examples += std::string{examples.empty() ? "" : ", "} +
                  (std::get<0>(split) > 0 ? "source " + std::to_string(std::get<0>(split)) + " "
                                          : std::string{}) +
                  "epoch " + std::to_string(std::get<1>(split)) + " #" +
                  std::to_string(std::get<2>(split)) + " (" + std::to_string(n) + " times)";
  }
  if (twice > 0)
    out.push_back(
      "DYNAMIC: " + std::to_string(twice) +
      " split(s) handed to tasks more than once although no fault happened: " + examples);
  if (o.expected_splits >= 0 &&
      static_cast<int64_t>(o.splits_delivered.size()) != o.expected_splits)
    out.push_back("DYNAMIC: " + std::to_string(o.splits_delivered.size()) + " of " +
                  std::to_string(o.expected_splits) +
                  " split(s) reached a task although no fault happened");
}

// Counts per element over all streams (or one).
void tally(const ObservedStream& s, std::map<std::string, int64_t>& got,
           std::map<std::string, std::vector<std::string>>& where,
           std::map<std::string, const Element*>& sample) {
  for (std::size_t i = 0; i < s.elements.size(); ++i) {
    auto k = key_of(s.elements[i]);
    ++got[k];
    sample[k] = &s.elements[i];
    if (where[k].size() < 3)
      where[k].push_back(s.consumer + " from " + (i < s.sources.size() ? s.sources[i] : "?"));
  }
}

void check_dynamic(const Observation& o, std::vector<std::string>& out) {
  check_splits(o, out);
  if (!o.split_transparent)
    return;
  auto expected = counts_of(o.reference);
  std::map<std::string, int64_t> got;
  std::map<std::string, std::vector<std::string>> where;
  std::map<std::string, const Element*> sample;
  for (const auto& s : o.streams)
    tally(s, got, where, sample);
  // Repeats: never without faults; with faults only for pipelines that are not per-split.
  // Exactly-once holds per consumer: with several consumers sharing the job, a re-issued
  // split's repeats may go to another consumer than the first reading (at-least-once).
  bool repeats_allowed = o.faults && (!o.per_split || o.streams.size() > 1);
  if (!repeats_allowed) {
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
        examples += "\n    " + show(*sample[k]) + " delivered " + std::to_string(n) +
                    " times, the dataset holds it " + std::to_string(allowed) + " (" + w + ")";
      }
    }
    if (twice > 0)
      out.push_back(std::string{"DYNAMIC: "} + std::to_string(twice) +
                    " element(s) delivered more often than the dataset holds them" +
                    (o.faults ? " (a per-split pipeline: exactly-once even under faults)" : "") +
                    ":" + examples);
  } else {
    for (const auto& [k, n] : got)
      if (!expected.count(k)) {
        out.push_back("DYNAMIC: " + show(*sample[k]) +
                      " delivered, which the dataset does not hold");
        break;
      }
  }
  // Missing: whenever every stream ended OK — with or without faults.
  if (!all_ok(o))
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
                  " element(s) never delivered although every stream ended OK" +
                  (o.faults ? " (faults fired: lost splits must be handed out again)" : "") +
                  ", e.g. " + missing_examples);
}

void check_off(const Observation& o, std::vector<std::string>& out) {
  auto expected = counts_of(o.reference);
  // Per worker incarnation (address/task: a re-registered worker has a new task) and consumer:
  // in order, nothing foreign or repeated.
  std::map<std::string, std::map<std::string, int64_t>> per_source;
  for (const auto& s : o.streams) {
    std::map<std::string, std::vector<const Element*>> mine;
    for (std::size_t i = 0; i < s.elements.size(); ++i) {
      const auto& src = i < s.sources.size() ? s.sources[i] : std::string{"?"};
      mine[src].push_back(&s.elements[i]);
      ++per_source[src][key_of(s.elements[i])];
    }
    for (const auto& [src, part] : mine) {
      if (o.reference_ordered) {
        auto at = subsequence_break(part, o.reference);
        if (at < part.size())
          out.push_back("OFF: " + s.consumer + " got worker " + src +
                        "'s elements out of dataset order (or ones not in it): element #" +
                        std::to_string(at) + " of that stream is " + show(*part[at]));
      }
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
  if (!o.faults && !o.reference.empty()) {
    // Sources are worker addresses, with "/task<t>" or "#<incarnation>" when known
    // (cluster.cpp); without faults each worker is one source.
    std::set<std::string> serving;
    for (const auto& [src, counts] : per_source)
      serving.insert(src.substr(0, src.find_first_of("/#")));
    std::size_t late_serving = 0;
    for (const auto& address : serving)
      for (const auto& late : o.late_workers)
        if (address.rfind(late + ":", 0) == 0)
          ++late_serving;
    if (serving.size() - late_serving + o.late_workers.size() !=
        static_cast<std::size_t>(o.workers))
      out.push_back("OFF: elements came from " + std::to_string(serving.size()) +
                    " worker(s), expected every one of the " + std::to_string(o.workers) +
                    (o.late_workers.empty() ? "" : " (a late one may serve none)"));
    if (per_source.size() != serving.size())
      out.push_back("OFF: " + std::to_string(per_source.size()) + " task streams came from " +
                    std::to_string(serving.size()) + " worker(s), although no fault happened");
  }
  int64_t counted = 0; // losses the consumers counted (on_worker_loss "continue")
  std::map<std::string, bool> counted_by_reader; // source -> a consumer that read it counted one
  for (const auto& s : o.streams) {
    counted += s.lost_tasks;
    if (!o.faults && s.lost_tasks > 0)
      out.push_back("OFF: " + s.consumer + " counted " + std::to_string(s.lost_tasks) +
                    " lost task(s), although no fault happened");
    for (std::size_t i = 0; i < s.sources.size(); ++i)
      counted_by_reader[s.sources[i]] = counted_by_reader[s.sources[i]] || s.lost_tasks > 0;
  }
  // A read that ended OK is complete: each incarnation it read from gave the whole dataset, but
  // for the tasks counted as lost (their remaining copy; in dataset order, nothing repeated, as
  // checked above). A short copy nobody counted is silent loss.
  if (!all_ok(o))
    return;
  int64_t short_sources = 0;
  for (const auto& [src, counts] : per_source) {
    if (counts == expected)
      continue;
    ++short_sources;
    int64_t total = 0;
    for (const auto& [k, n] : counts)
      total += n;
    if (!counted_by_reader[src])
      out.push_back(
        "OFF: worker " + src + "'s stream is not the whole dataset, yet the read ended OK" +
        " and its reader counted no lost task" +
        std::string{o.faults ? " (faults fired: a lost task is counted or fails the read)" : ""} +
        ": " + std::to_string(total) + " element(s) received, the dataset has " +
        std::to_string(o.reference.size()));
  }
  if (short_sources > counted)
    out.push_back("OFF: " + std::to_string(short_sources) +
                  " task stream(s) are short of the "
                  "whole dataset in a read that ended OK, but its consumers counted only " +
                  std::to_string(counted) + " lost task(s)");
}

} // namespace

namespace {

// The element's value when it is one int64 scalar (the datasets these checks are used with).
std::optional<int64_t> scalar_value(const Element& e) {
  if (e.components.size() != 1 || e.components[0].num_elements() != 1)
    return std::nullopt;
  return e.components[0].as_int64();
}

// Reads that stop after `take` elements (coordinated rounds, cache trainers): each stream
// reached `take` or failed with an error, within the time limit and its credits; `what` and
// `unit` name the read and what it counts in messages ("coordinated stream", "rounds").
void check_taken_streams(const Observation& o, const std::string& what, const std::string& unit,
                         std::vector<std::string>& out) {
  for (const auto& v : o.violations)
    out.push_back("simulator: " + v);
  for (const auto& l : o.leaks)
    out.push_back("leak: " + l);
  for (const auto& s : o.streams) {
    const auto got = static_cast<int64_t>(s.elements.size());
    if (!s.ended && !s.crashed)
      out.push_back("liveness: " + s.consumer + "'s " + what + " neither reached " +
                    std::to_string(o.take) + " " + unit + " nor failed within " + o.time_limit +
                    " (" + std::to_string(got) + " received)");
    else if (s.ended && got < o.take && !o.faults)
      out.push_back(s.consumer + "'s " + what + " ended after " + std::to_string(got) + " of " +
                    std::to_string(o.take) + " " + unit +
                    " although no fault happened: " + s.status.to_string());
    else if (s.ended && got < o.take && s.status.ok())
      out.push_back(s.consumer + "'s " + what + " ended OK after " + std::to_string(got) + " of " +
                    std::to_string(o.take) + " " + unit + " (a loss must be an error)");
    if (s.max_unacked > o.credits)
      out.push_back("consumer memory: " + s.consumer + " held " + std::to_string(s.max_unacked) +
                    " delivered but untaken element(s), more than its " +
                    std::to_string(o.credits) + " credit(s)");
  }
}

// Coordinated reads: a stream stops after `take` rounds (the harness cancels it); round r of every
// consumer comes from one group [x*N, x*N + N): stream i's element r is stream 0's plus i. A
// stream that failed (only with faults: a lost worker fails the job loudly) holds a prefix.
std::vector<std::string> check_coordinated(const Observation& o) {
  std::vector<std::string> out;
  check_taken_streams(o, "coordinated stream", "rounds", out);
  const auto n = o.coordinated;
  std::size_t rounds = std::numeric_limits<std::size_t>::max();
  for (const auto& s : o.streams)
    rounds = std::min(rounds, s.elements.size());
  if (static_cast<int64_t>(o.streams.size()) != n || o.streams.empty())
    return out;
  for (std::size_t r = 0; r < rounds; ++r) {
    auto first = scalar_value(o.streams[0].elements[r]);
    bool ok = first && *first % n == 0;
    for (std::size_t i = 1; ok && i < o.streams.size(); ++i) {
      auto v = scalar_value(o.streams[i].elements[r]);
      ok = v && *v == *first + static_cast<int64_t>(i);
    }
    if (!ok) {
      std::string got;
      for (const auto& s : o.streams) {
        auto v = scalar_value(s.elements[r]);
        got += (got.empty() ? "" : ", ") + (v ? std::to_string(*v) : std::string{"?"});
      }
      out.push_back("coordinated rounds out of step: round " + std::to_string(r) +
                    " gave the consumers [" + got + "], not one group of " + std::to_string(n) +
                    " consecutive integers starting at a multiple of " + std::to_string(n));
      break;
    }
  }
  return out;
}

// Per trainer: the values it read from each task (source), in order.
using TaskReads = std::map<std::string, std::vector<int64_t>>;

TaskReads reads_by_task(const ObservedStream& s) {
  TaskReads out;
  for (std::size_t i = 0; i < s.elements.size(); ++i)
    out[s.sources[i]].push_back(scalar_value(s.elements[i]).value_or(-1));
  return out;
}

// Two trainers' reads of one task are subsequences of the task's output, so the values that each
// read once come in the same order in both. (Under DYNAMIC with faults a task's output is not
// increasing: the splits of a lost task or consumer are made again, later, by a survivor.)
std::optional<std::string> order_conflict(const std::vector<int64_t>& a,
                                          const std::vector<int64_t>& b) {
  std::map<int64_t, int> count_a, count_b;
  for (auto v : a)
    ++count_a[v];
  for (auto v : b)
    ++count_b[v];
  std::map<int64_t, std::size_t> rank_b; // values both read once -> their place in b
  std::size_t k = 0;
  for (auto v : b)
    if (count_b[v] == 1 && count_a[v] == 1)
      rank_b[v] = k++;
  std::optional<int64_t> prev;
  for (auto v : a) {
    auto r = rank_b.find(v);
    if (r == rank_b.end())
      continue;
    if (prev && rank_b[*prev] > r->second)
      return std::to_string(*prev) + " before " + std::to_string(v);
    prev = v;
  }
  return std::nullopt;
}

// Each trainer reads every task's output sequence in order:
//   - the sequence itself: under OFF (every incarnation runs range(...).repeat() from 0) and
//     under DYNAMIC without faults (a task's splits come in increasing order) strictly
//     increasing; under DYNAMIC with faults (splits made again) in the same order as every other
//     trainer read it;
//   - DYNAMIC without faults: no value from two tasks (each split made once);
//   - with nothing evicted (and, DYNAMIC, no fault): every trainer's reads of a task are
//     prefixes of the longest one, which under OFF is 0, 1, 2, ...
// Not checked per task under DYNAMIC after a dispatcher restart: the restored job starts its
// tasks again under their old ids, so one source label names two sequences (the sweeps of
// that mode leave dispatcher faults out).
// A plain shared job would split each task's sequence among the readers instead; a cache that
// served one trainer's elements to another out of turn, or twice, breaks the order.
std::vector<std::string> check_cross_trainer_cache(const Observation& o) {
  std::vector<std::string> out;
  check_taken_streams(o, "cache trainer's stream", "elements", out);
  const bool increasing = o.policy != ShardingPolicy::dynamic || !o.faults;
  std::vector<TaskReads> reads;
  for (const auto& s : o.streams)
    reads.push_back(reads_by_task(s));
  std::map<int64_t, std::string> made_by; // DYNAMIC without faults: value -> its task
  for (std::size_t t = 0; t < reads.size(); ++t) {
    const auto& who = o.streams[t].consumer;
    for (const auto& [source, seq] : reads[t]) {
      for (std::size_t i = 0; increasing && i < seq.size(); ++i) {
        if (seq[i] < 0 || (i > 0 && seq[i] <= seq[i - 1])) {
          out.push_back(who + " read " + std::to_string(seq[i]) + " from " + source + " after " +
                        (i == 0 ? std::string{"nothing"} : std::to_string(seq[i - 1])) +
                        ": a trainer reads each task's sequence in order");
          return out;
        }
        if (o.policy != ShardingPolicy::dynamic)
          continue;
        auto [at, fresh] = made_by.emplace(seq[i], source);
        if (!fresh && at->second != source) {
          out.push_back(who + " read " + std::to_string(seq[i]) + " from " + source +
                        ", which another trainer read from " + at->second +
                        ": without faults DYNAMIC makes each split once, on one task");
          return out;
        }
      }
      for (std::size_t u = 0; !increasing && u < t; ++u) {
        auto other = reads[u].find(source);
        if (other == reads[u].end())
          continue;
        if (auto conflict = order_conflict(seq, other->second)) {
          out.push_back(who + " and " + o.streams[u].consumer + " read " + source +
                        "'s elements in different orders (" + who + ": " + *conflict +
                        "): every trainer reads a task's sequence in order");
          return out;
        }
      }
    }
  }
  // (DYNAMIC with faults: a reader whose connection broke lost the batches in flight; their
  // splits are made again, later in some task's sequence, so its reads need not be a prefix.)
  if (o.cache_evicts || (o.policy == ShardingPolicy::dynamic && o.faults))
    return out;
  std::map<std::string, const std::vector<int64_t>*> longest; // per task
  for (const auto& r : reads)
    for (const auto& [source, seq] : r)
      if (!longest[source] || seq.size() > longest[source]->size())
        longest[source] = &seq;
  for (const auto& [source, whole] : longest)
    for (std::size_t k = 0; o.policy == ShardingPolicy::off && k < whole->size(); ++k)
      if ((*whole)[k] != static_cast<int64_t>(k)) {
        out.push_back("a trainer read " + std::to_string((*whole)[k]) + " as element " +
                      std::to_string(k) + " of " + source +
                      ": with nothing evicted a trainer reads each task's whole sequence, " +
                      "expected " + std::to_string(k));
        return out;
      }
  for (std::size_t t = 0; t < reads.size(); ++t)
    for (const auto& [source, seq] : reads[t]) {
      const auto& whole = *longest[source];
      auto diff = std::mismatch(seq.begin(), seq.end(), whole.begin()).first;
      if (diff == seq.end())
        continue;
      const auto k = static_cast<std::size_t>(diff - seq.begin());
      out.push_back(o.streams[t].consumer + " read " + std::to_string(*diff) + " as element " +
                    std::to_string(k) + " of " + source + ", where another trainer read " +
                    std::to_string(whole[k]) +
                    ": with nothing evicted every trainer reads each task's whole sequence");
      return out;
    }
  return out;
}

// Endless OFF reads (range(N).repeat(), one consumer stopping after `take` elements): the
// stream reached `take` or failed (check_taken_streams: never OK short); each task's stream,
// from its start, is 0, 1, ..., N-1, 0, ... — exactly, unless the consumer counted the task as
// lost (its remaining copy, and with its connection lost mid-way what was in flight): at most
// as many task streams off that sequence as losses counted, and none without faults.
std::vector<std::string> check_endless_off(const Observation& o) {
  std::vector<std::string> out;
  check_taken_streams(o, "endless OFF stream", "elements", out);
  const int64_t n = o.endless_period;
  for (const auto& s : o.streams) {
    if (!o.faults && s.lost_tasks > 0)
      out.push_back("OFF: " + s.consumer + " counted " + std::to_string(s.lost_tasks) +
                    " lost task(s), although no fault happened");
    std::map<std::string, std::vector<int64_t>> per_source;
    for (std::size_t i = 0; i < s.elements.size(); ++i) {
      auto v = scalar_value(s.elements[i]);
      if (!v || *v < 0 || (n > 0 && *v >= n)) {
        out.push_back("OFF: " + s.consumer + " got " + show(s.elements[i]) + ", which range(" +
                      std::to_string(n) + ").repeat() does not hold");
        return out;
      }
      per_source[i < s.sources.size() ? s.sources[i] : "?"].push_back(*v);
    }
    int64_t off_sequence = 0;
    for (const auto& [src, seq] : per_source) {
      for (std::size_t k = 0; k < seq.size(); ++k)
        if (n > 0 && seq[k] != static_cast<int64_t>(k) % n) {
          ++off_sequence;
          if (s.lost_tasks == 0)
            out.push_back("OFF: " + s.consumer + " got " + std::to_string(seq[k]) + " as element " +
                          std::to_string(k) + " of " + src + "'s stream (expected " +
                          std::to_string(static_cast<int64_t>(k) % n) +
                          ") and counted no lost task");
          break;
        }
    }
    if (off_sequence > s.lost_tasks && s.lost_tasks > 0)
      out.push_back("OFF: " + std::to_string(off_sequence) + " of " + s.consumer +
                    "'s task streams have gaps, but it counted only " +
                    std::to_string(s.lost_tasks) + " lost task(s)");
  }
  return out;
}

} // namespace

std::vector<std::string> check_invariants(const Observation& o) {
  if (o.coordinated > 0)
    return check_coordinated(o);
  if (o.take > 0 && !o.cross_trainer_cache && o.policy == ShardingPolicy::off)
    return check_endless_off(o);
  if (o.cross_trainer_cache && o.cache_whole_epoch) {
    // Each trainer reads the whole epoch: its stream alone must pass what a job read by one
    // consumer passes. (The split checks see the job's one production, as for one consumer.)
    std::vector<std::string> out;
    for (const auto& s : o.streams) {
      Observation one = o;
      one.cross_trainer_cache = false;
      one.streams = {s};
      for (auto& f : check_invariants(one))
        if (std::find(out.begin(), out.end(), f) == out.end())
          out.push_back(std::move(f));
    }
    return out;
  }
  if (o.cross_trainer_cache)
    return check_cross_trainer_cache(o);
  std::vector<std::string> out;
  for (const auto& v : o.violations)
    out.push_back("simulator: " + v);
  for (const auto& s : o.streams) {
    if (!s.ended && !s.crashed)
      out.push_back("liveness: " + s.consumer + "'s stream did not end within " + o.time_limit +
                    " of virtual time (" + std::to_string(s.elements.size()) +
                    " element(s) received)");
    else if (s.ended && !s.status.ok() && !o.faults)
      out.push_back(s.consumer +
                    "'s stream failed although no fault happened: " + s.status.to_string());
    if (s.max_unacked > o.credits)
      out.push_back("consumer memory: " + s.consumer + " held " + std::to_string(s.max_unacked) +
                    " delivered but untaken element(s), more than its " +
                    std::to_string(o.credits) + " credit(s)");
  }
  for (const auto& l : o.leaks)
    out.push_back("leak: " + l);
  // The data checks run per job (a consumer whose job is unknown received nothing).
  std::map<uint64_t, std::vector<ObservedStream>> by_job;
  for (const auto& s : o.streams)
    by_job[s.job].push_back(s);
  if (o.one_iteration) {
    // One iteration of a named job is one job: a consumer that came after it ended reads end of
    // sequence, not a new job that produces the data again.
    std::set<uint64_t> jobs;
    for (const auto& s : o.streams)
      if (s.job != 0)
        jobs.insert(s.job);
    if (jobs.size() > 1) {
      std::string list;
      for (const auto& s : o.streams)
        list += (list.empty() ? "" : ", ") + s.consumer + " job " + std::to_string(s.job) + " (" +
                std::to_string(s.elements.size()) + " elements)";
      out.push_back("named job: its consumers read " + std::to_string(jobs.size()) +
                    " jobs of one iteration (" + list + "): a late consumer read the data again");
    }
  }
  if (by_job.size() > 1 && by_job.count(0)) { // received nothing: count it with the first job
    auto none = std::move(by_job[0]);
    by_job.erase(0);
    for (auto& s : none)
      by_job.begin()->second.push_back(std::move(s));
  }
  for (auto& [job, streams] : by_job) {
    Observation part = o;
    part.streams = std::move(streams);
    if (by_job.size() > 1) { // the observer counts splits of all jobs together: skip them
      part.expected_splits = -1;
      part.splits_delivered.clear();
    }
    if (o.policy == ShardingPolicy::dynamic)
      check_dynamic(part, out);
    else if (o.policy == ShardingPolicy::off)
      check_off(part, out);
  }
  return out;
}

} // namespace conveyor::sim
