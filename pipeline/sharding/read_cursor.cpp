#include "pipeline/sharding/read_cursor.hpp"

#include "conveyor/graph.hpp"

#include <algorithm>
#include <set>
#include <iterator>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <vector>

namespace conveyor {

namespace {

constexpr const char* kMagic = "conveyor-read-cursor";

// The complete interval holding `index`, or end().
std::map<int64_t, int64_t>::const_iterator find_interval(const std::map<int64_t, int64_t>& set,
                                                         int64_t index) {
  auto it = set.upper_bound(index);
  if (it == set.begin())
    return set.end();
  --it;
  return index < it->second ? it : set.end();
}

void add_interval(std::map<int64_t, int64_t>& set, int64_t begin, int64_t end) {
  auto it = set.upper_bound(begin);
  if (it != set.begin()) {
    auto prev = std::prev(it);
    if (prev->second >= begin) { // touches or overlaps the one before: grow it
      begin = prev->first;
      end = std::max(end, prev->second);
      it = set.erase(prev);
    }
  }
  while (it != set.end() && it->first <= end) { // swallow the ones it reaches
    end = std::max(end, it->second);
    it = set.erase(it);
  }
  set.emplace(begin, end);
}

} // namespace

ReadCursor ReadCursor::off(std::string fingerprint) {
  ReadCursor c;
  c.mode_ = ShardingPolicy::off;
  c.fingerprint_ = std::move(fingerprint);
  return c;
}

ReadCursor ReadCursor::coordinated(std::string fingerprint, int64_t num_consumers,
                                   int64_t consumer_index) {
  ReadCursor c = off(std::move(fingerprint));
  c.num_consumers_ = num_consumers;
  c.consumer_index_ = consumer_index;
  return c;
}

void ReadCursor::add_slot(int64_t slot, int64_t base) {
  auto [it, fresh] = slots_.try_emplace(slot);
  if (fresh)
    it->second.consumed = std::max<int64_t>(0, base);
}

void ReadCursor::end_slot(int64_t slot) { slots_[slot].ended = true; }

bool ReadCursor::consume(int64_t epoch, int64_t index, int64_t seq, bool split_end) {
  if (mode_ == ShardingPolicy::off) {
    // A task's elements arrive in its order: seq is the slot's next one. (One beyond it would
    // mean the consumer lost elements in between; they count as taken, as the read went on
    // without them.)
    Slot& s = slots_[index];
    if (seq < s.consumed)
      return false;
    s.consumed = seq + 1;
    if (split_end)
      s.ended = true;
    ++consumed_;
    return true;
  }
  const Key key{epoch, index};
  if (!last_.valid || last_.it->first != key) {
    if (complete(epoch, index))
      return false;
    last_.it = partial_.try_emplace(key).first;
    last_.valid = true;
  }
  Progress& p = last_.it->second;
  bool fresh = false;
  if (seq == p.prefix) {
    ++p.prefix;
    while (!p.beyond.empty() && *p.beyond.begin() == p.prefix) {
      p.beyond.erase(p.beyond.begin());
      ++p.prefix;
    }
    fresh = true;
  } else if (seq > p.prefix) {
    fresh = p.beyond.insert(seq).second;
  }
  if (split_end)
    p.end = seq + 1;
  if (fresh)
    ++consumed_;
  if (p.end >= 0 && p.prefix >= p.end)
    mark_complete(key);
  return fresh;
}

void ReadCursor::split_ended(int64_t epoch, int64_t index, int64_t count) {
  if (mode_ != ShardingPolicy::dynamic || complete(epoch, index))
    return;
  const Key key{epoch, index};
  auto it = partial_.try_emplace(key).first;
  it->second.end = count;
  if (it->second.prefix >= count)
    mark_complete(key);
}

void ReadCursor::mark_complete(const Key& key) {
  auto it = partial_.find(key);
  if (it != partial_.end()) {
    if (last_.valid && it == last_.it)
      last_.valid = false;
    partial_.erase(it);
  }
  add_interval(complete_[key.first], key.second, key.second + 1);
}

bool ReadCursor::complete(int64_t epoch, int64_t index) const {
  auto e = complete_.find(epoch);
  return e != complete_.end() && find_interval(e->second, index) != e->second.end();
}

bool ReadCursor::covers(int64_t epoch, int64_t index, int64_t seq) const {
  if (complete(epoch, index))
    return true;
  auto it = partial_.find(Key{epoch, index});
  if (it == partial_.end())
    return false;
  return seq < it->second.prefix || it->second.beyond.count(seq) > 0;
}

int64_t ReadCursor::skip(int64_t epoch, int64_t index) const {
  if (complete(epoch, index))
    return kSkipAll;
  auto it = partial_.find(Key{epoch, index});
  return it == partial_.end() ? 0 : it->second.prefix;
}

std::size_t ReadCursor::complete_splits() const {
  std::size_t n = 0;
  for (const auto& [epoch, set] : complete_)
    for (const auto& [b, e] : set)
      n += static_cast<std::size_t>(e - b);
  return n;
}

// conveyor-read-cursor 3
// mode dynamic|off|coordinated              (version 1: always dynamic, no mode line)
// consumers <n> <index> <job>               (coordinated, version 3: num_consumers, the index,
//                                            the job it was saved in)
// fingerprint <hex>
// split_size <n>
// file_seed <n>                             (only when the job drew one)
// consumed <n>
// complete <epoch> <begin>-<end> ...        (one line per epoch)
// partial <epoch> <index> <prefix> <end> [<seq> ...]
// slot <slot> <consumed> <ended 0|1>        (OFF; no split_size, complete or partial lines;
//                                            coordinated: consumed counts local rounds)
std::string ReadCursor::encode() const {
  std::ostringstream out;
  out << kMagic << ' ' << kVersion << '\n'
      << "mode "
      << (coordinated()                  ? "coordinated"
          : mode_ == ShardingPolicy::off ? "off"
                                         : "dynamic")
      << '\n'
      << "fingerprint " << fingerprint_ << '\n';
  if (coordinated())
    out << "consumers " << num_consumers_ << ' ' << consumer_index_ << ' ' << job_ << '\n';
  if (mode_ == ShardingPolicy::off) {
    out << "consumed " << consumed_ << '\n';
    for (const auto& [slot, s] : slots_)
      out << "slot " << slot << ' ' << s.consumed << ' ' << (s.ended ? 1 : 0) << '\n';
    return out.str();
  }
  out << "split_size " << split_size_ << '\n';
  if (file_seed_ >= 0)
    out << "file_seed " << file_seed_ << '\n';
  out << "consumed " << consumed_ << '\n';
  for (const auto& [epoch, set] : complete_) {
    out << "complete " << epoch;
    for (const auto& [b, e] : set)
      out << ' ' << b << '-' << e;
    out << '\n';
  }
  for (const auto& [key, p] : partial_) {
    out << "partial " << key.first << ' ' << key.second << ' ' << p.prefix << ' ' << p.end;
    for (int64_t s : p.beyond)
      out << ' ' << s;
    out << '\n';
  }
  return out.str();
}

Expected<ReadCursor> ReadCursor::decode(std::string_view blob, const std::string& what) {
  const auto bad = [&](const std::string& why) {
    return invalid_argument(what + " is not a valid conveyor read cursor (" + why +
                            "); expected the bytes of ElementStream::checkpoint() / the "
                            "iterator's state_dict()");
  };
  std::istringstream in{std::string{blob}};
  std::string magic;
  int version = 0;
  if (!(in >> magic >> version) || magic != kMagic)
    return bad("it does not start with \"" + std::string{kMagic} + " <version>\"");
  if (version < 1 || version > kVersion)
    return bad("version " + std::to_string(version) + ", this build reads versions 1 to " +
               std::to_string(kVersion));
  ReadCursor c;
  bool mode_seen = false, split_lines = false, coordinated = false;
  std::string line;
  std::getline(in, line); // rest of the first line
  while (std::getline(in, line)) {
    if (line.empty())
      continue;
    std::istringstream ls{line};
    std::string field;
    ls >> field;
    if (field == "mode" && version >= 2 && !mode_seen) {
      std::string mode;
      ls >> mode;
      if (mode == "off" || (mode == "coordinated" && version >= 3))
        c.mode_ = ShardingPolicy::off;
      else if (mode != "dynamic")
        return bad("mode \"" + mode + "\", expected dynamic or off" +
                   std::string{version >= 3 ? " or coordinated" : ""});
      coordinated = mode == "coordinated";
      mode_seen = true;
    } else if (field == "consumers" && coordinated && c.num_consumers_ == 0) {
      if (!(ls >> c.num_consumers_ >> c.consumer_index_ >> c.job_) || c.num_consumers_ <= 0 ||
          c.consumer_index_ < 0 || c.consumer_index_ >= c.num_consumers_ || c.job_ < 0)
        return bad("a consumers line must be NUM_CONSUMERS CONSUMER_INDEX JOB with 0 <= "
                   "CONSUMER_INDEX < NUM_CONSUMERS");
    } else if (field == "slot" && version >= 2) {
      int64_t slot = 0;
      Slot s;
      int ended = 0;
      if (!(ls >> slot >> s.consumed >> ended) || slot < 0 || s.consumed < 0 ||
          (ended != 0 && ended != 1))
        return bad("a slot line must be SLOT CONSUMED ENDED(0|1)");
      s.ended = ended == 1;
      if (!c.slots_.emplace(slot, s).second)
        return bad("slot " + std::to_string(slot) + " appears twice");
    } else if (field == "fingerprint") {
      ls >> c.fingerprint_;
    } else if (field == "split_size") {
      split_lines = true;
      if (!(ls >> c.split_size_) || c.split_size_ <= 0)
        return bad("split_size must be positive");
    } else if (field == "file_seed") {
      if (!(ls >> c.file_seed_) || c.file_seed_ < 0)
        return bad("file_seed must be at least 0");
    } else if (field == "consumed") {
      if (!(ls >> c.consumed_) || c.consumed_ < 0)
        return bad("consumed must be at least 0");
    } else if (field == "complete") {
      split_lines = true;
      int64_t epoch = 0;
      if (!(ls >> epoch) || epoch < 0)
        return bad("a complete line without its epoch");
      std::string range;
      while (ls >> range) {
        auto dash = range.find('-');
        int64_t b = 0, e = 0;
        try {
          if (dash == std::string::npos)
            throw std::invalid_argument(range);
          b = std::stoll(range.substr(0, dash));
          e = std::stoll(range.substr(dash + 1));
        } catch (const std::exception&) {
          return bad("\"" + range + "\" is not a split interval BEGIN-END");
        }
        if (b < 0 || e <= b)
          return bad("empty or negative split interval \"" + range + "\"");
        add_interval(c.complete_[epoch], b, e);
      }
    } else if (field == "partial") {
      split_lines = true;
      int64_t epoch = 0, index = 0;
      Progress p;
      if (!(ls >> epoch >> index >> p.prefix >> p.end) || epoch < 0 || index < 0 || p.prefix < 0 ||
          p.end < -1)
        return bad("a partial line must be EPOCH INDEX PREFIX END [SEQ...]");
      int64_t s = 0;
      while (ls >> s) {
        if (s <= p.prefix)
          return bad("a partial split's sequence numbers must lie beyond its prefix");
        p.beyond.insert(s);
      }
      if (!ls.eof())
        return bad("a partial line must be EPOCH INDEX PREFIX END [SEQ...]");
      c.partial_[{epoch, index}] = std::move(p);
    } else {
      return bad("unknown field \"" + field + "\"");
    }
  }
  if (version >= 2 && !mode_seen)
    return bad("it has no mode line");
  if (coordinated && c.num_consumers_ == 0)
    return bad("a coordinated cursor needs its consumers line");
  if (c.fingerprint_.empty())
    return bad("it names no dataset fingerprint");
  if (c.mode_ == ShardingPolicy::off) {
    if (split_lines)
      return bad("an OFF cursor has slots, not splits");
    return c;
  }
  if (!c.slots_.empty())
    return bad("a DYNAMIC cursor has splits, not slots");
  if (c.split_size_ <= 0)
    return bad("it names no split size");
  return c;
}

// --- OFF: which pipelines may resume ------------------------------------------------------------

namespace {

std::string unrepeatable_node(const Node& n) {
  const auto attr = [&](const char* key) { return n.attrs.find(key); };
  if (n.op == "shuffle" || n.op == "random" || n.op == "list_files") {
    auto seed = attr("seed");
    const bool unseeded = seed == n.attrs.end() || std::get_if<int64_t>(&seed->second) == nullptr ||
                          std::get<int64_t>(seed->second) == kNoSeed;
    const bool shuffles = n.op != "list_files" || n.bool_attr("shuffle");
    if (unseeded && shuffles)
      return "`" + n.op + "` without a seed draws another order on every run";
  }
  if (n.op == "map" || n.op == "interleave") {
    auto det = attr("deterministic");
    if (det != n.attrs.end() && std::get_if<bool>(&det->second) && !std::get<bool>(det->second))
      return "`" + n.op + "` with deterministic=False gives an order that depends on timing";
  }
  return {};
}

} // namespace

std::string off_resume_refusal(const Dataset& dataset) {
  std::vector<NodePtr> pending{dataset.node()};
  std::set<const Node*> seen;
  while (!pending.empty()) { // iterative with a visited set, as Dataset::validate
    NodePtr n = pending.back();
    pending.pop_back();
    if (!n || !seen.insert(n.get()).second)
      continue;
    if (auto why = unrepeatable_node(*n); !why.empty())
      return why;
    for (const NodePtr& in : n->inputs)
      pending.push_back(in);
  }
  return {};
}

namespace {
std::string mode_name(ShardingPolicy p) {
  if (p == ShardingPolicy::dynamic)
    return "DYNAMIC (distributed_epoch)";
  if (p == ShardingPolicy::off)
    return "OFF (parallel_epochs)";
  return to_string(p);
}
} // namespace

std::string resume_mode_refusal(ShardingPolicy cursor_mode, ShardingPolicy policy) {
  if (policy != ShardingPolicy::dynamic && policy != ShardingPolicy::off)
    return "`resume_from` needs the DYNAMIC (distributed_epoch) or OFF (parallel_epochs) "
           "processing mode: only their elements can be counted per split or task; got "
           "processing mode " +
           std::string{to_string(policy)};
  if (cursor_mode != policy)
    return "`resume_from` is the cursor of " +
           std::string{cursor_mode == ShardingPolicy::off ? "an " : "a "} + mode_name(cursor_mode) +
           " read, but this read is " + mode_name(policy) +
           ": a cursor resumes a read of its own mode";
  return {};
}

std::string coordinated_resume_refusal(const ReadCursor& cursor, int64_t num_consumers,
                                       int64_t consumer_index) {
  if (!cursor.coordinated()) {
    if (num_consumers > 0)
      return "`resume_from` is the cursor of a read that was not coordinated; this read is "
             "coordinated (num_consumers " +
             std::to_string(num_consumers) +
             "): a coordinated read resumes from the cursor of its own trainer's share";
    return {};
  }
  const std::string saved = "`resume_from` is the cursor of consumer_index " +
                            std::to_string(cursor.consumer_index()) + " of a coordinated read by " +
                            std::to_string(cursor.num_consumers()) + " consumers";
  if (num_consumers <= 0)
    return saved + ", but this read is not coordinated: set num_consumers " +
           std::to_string(cursor.num_consumers()) + " and consumer_index " +
           std::to_string(cursor.consumer_index());
  if (num_consumers != cursor.num_consumers())
    return saved + ", but this read has num_consumers " + std::to_string(num_consumers) +
           ": the rounds are not re-divided among another number of trainers; resume all " +
           std::to_string(cursor.num_consumers()) + " trainers, or start a new read for " +
           std::to_string(num_consumers);
  if (consumer_index != cursor.consumer_index())
    return saved + ", but this read has consumer_index " + std::to_string(consumer_index) +
           ": each trainer resumes from its own index's cursor";
  return {};
}

// --- resuming a job ----------------------------------------------------------------------------

namespace {

class ResumingSplitProvider : public SplitProvider {
public:
  ResumingSplitProvider(std::unique_ptr<SplitProvider> inner,
                        std::shared_ptr<const ReadCursor> cursor)
    : inner_(std::move(inner)), cursor_(std::move(cursor)) {}

  Status get_next(Split& out, bool& end_of_splits) override {
    if (pending_end_) { // the held-back split was the epoch's last word
      pending_end_ = false;
      end_of_splits = true;
      return Status::OK();
    }
    for (;;) {
      Split s;
      bool end = false;
      CONVEYOR_RETURN_IF_ERROR(inner_->get_next(s, end));
      if (end) {
        end_of_splits = true;
        if (!handed_in_epoch_ && held_) {
          // Every split of this epoch is complete: hand out one that produces nothing.
          out = std::move(*held_);
          out.skip = ReadCursor::kSkipAll;
          held_.reset();
          end_of_splits = false;
          pending_end_ = true;
        }
        handed_in_epoch_ = false;
        held_.reset();
        return Status::OK();
      }
      if (cursor_->complete(s.epoch, s.index)) {
        held_ = std::move(s);
        continue;
      }
      s.skip = cursor_->skip(s.epoch, s.index);
      handed_in_epoch_ = true;
      out = std::move(s);
      end_of_splits = false;
      return Status::OK();
    }
  }

  SplitPosition position() const override { return inner_->position(); }

  Status restore(const SplitPosition& pos) override {
    pending_end_ = false;
    handed_in_epoch_ = false;
    held_.reset();
    return inner_->restore(pos);
  }

private:
  std::unique_ptr<SplitProvider> inner_;
  std::shared_ptr<const ReadCursor> cursor_;
  bool handed_in_epoch_ = false;
  bool pending_end_ = false;
  std::optional<Split> held_;
};

} // namespace

std::unique_ptr<SplitProvider> resuming_split_provider(std::unique_ptr<SplitProvider> inner,
                                                       std::shared_ptr<const ReadCursor> cursor) {
  return std::make_unique<ResumingSplitProvider>(std::move(inner), std::move(cursor));
}

} // namespace conveyor
