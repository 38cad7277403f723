// Fault values and the --faults syntax (sim/sim.hpp).
#include <cctype>
#include <cmath>
#include <cstdio>

#include "sim/sim.hpp"

namespace conveyor {

namespace {

using us = std::chrono::microseconds;

const char* kind_name(Fault::Kind k) {
  switch (k) {
    case Fault::Kind::crash: return "crash";
    case Fault::Kind::restart: return "restart";
    case Fault::Kind::partition: return "partition";
    case Fault::Kind::disconnect: return "disconnect";
    case Fault::Kind::slow: return "slow";
    case Fault::Kind::drain: return "drain";
  }
  return "?";
}

std::optional<Fault::Kind> kind_from(std::string_view name) {
  for (auto k : {Fault::Kind::crash, Fault::Kind::restart, Fault::Kind::partition,
                 Fault::Kind::disconnect, Fault::Kind::slow, Fault::Kind::drain})
    if (name == kind_name(k))
      return k;
  return std::nullopt;
}

bool has_peer(Fault::Kind k) {
  return k == Fault::Kind::partition || k == Fault::Kind::disconnect || k == Fault::Kind::slow;
}

bool has_duration(Fault::Kind k) {
  return k == Fault::Kind::restart || k == Fault::Kind::partition || k == Fault::Kind::slow ||
         k == Fault::Kind::drain;
}

std::string format_duration(us d) {
  auto n = d.count();
  if (n % 1000000 == 0)
    return std::to_string(n / 1000000) + "s";
  if (n % 1000 == 0)
    return std::to_string(n / 1000) + "ms";
  return std::to_string(n) + "us";
}

std::string trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front())))
    s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back())))
    s.remove_suffix(1);
  return std::string{s};
}

// "200ms", "1.5s", "300us", "0".
Expected<us> parse_duration(std::string_view text, const std::string& item) {
  std::string t = trim(text);
  std::size_t i = 0;
  while (i < t.size() && (std::isdigit(static_cast<unsigned char>(t[i])) || t[i] == '.'))
    ++i;
  if (i == 0)
    return invalid_argument("fault `" + item + "`: expected a duration like 200ms, got \"" + t +
                            "\"");
  double value = std::strtod(t.substr(0, i).c_str(), nullptr);
  std::string unit = t.substr(i);
  double factor = 0;
  if (unit == "us")
    factor = 1;
  else if (unit == "ms")
    factor = 1e3;
  else if (unit == "s")
    factor = 1e6;
  else if (unit.empty() && value == 0)
    factor = 1;
  else
    return invalid_argument("fault `" + item + "`: unknown time unit \"" + unit +
                            "\" (use us, ms or s)");
  return us{static_cast<int64_t>(std::llround(value * factor))};
}

Status parse_explicit(const std::string& item, FaultSpec& out) {
  auto open = item.find('(');
  auto close = item.find(')');
  auto atpos = item.find('@');
  if (open == std::string::npos || close == std::string::npos || close < open ||
      atpos == std::string::npos || atpos < close)
    return invalid_argument("fault `" + item +
                            "`: expected KIND(NODE[,PEER])@WHEN[+DURATION], e.g. "
                            "crash(worker-1)@200ms or partition(worker-0,dispatcher)@30%+2s");
  auto kind = kind_from(trim(std::string_view{item}.substr(0, open)));
  if (!kind)
    return invalid_argument(
      "fault `" + item +
      "`: unknown kind (expected crash, restart, partition, disconnect, slow or drain)");
  Fault f;
  f.kind = *kind;
  std::string args = item.substr(open + 1, close - open - 1);
  auto comma = args.find(',');
  f.node = trim(std::string_view{args}.substr(0, comma));
  if (comma != std::string::npos)
    f.peer = trim(std::string_view{args}.substr(comma + 1));
  if (f.node.empty())
    return invalid_argument("fault `" + item + "`: the node name is empty");
  if (has_peer(f.kind) && f.peer.empty())
    return invalid_argument("fault `" + item + "`: " + kind_name(f.kind) + " needs two nodes");
  if (!has_peer(f.kind) && !f.peer.empty())
    return invalid_argument("fault `" + item + "`: " + kind_name(f.kind) + " takes one node");
  std::string when = item.substr(atpos + 1);
  std::string dur;
  if (auto plus = when.find('+'); plus != std::string::npos) {
    dur = when.substr(plus + 1);
    when = when.substr(0, plus);
  }
  when = trim(when);
  if (!when.empty() && when.back() == '%') {
    char* end = nullptr;
    double pct = std::strtod(when.c_str(), &end);
    if (end != when.c_str() + when.size() - 1 || pct < 0 || pct > 100)
      return invalid_argument("fault `" + item + "`: progress must be 0%..100%, got " + when);
    f.at_progress = pct / 100.0;
  } else {
    auto at = parse_duration(when, item);
    if (!at.ok())
      return at.status();
    f.at = *at;
  }
  if (has_duration(f.kind)) {
    if (dur.empty())
      return invalid_argument("fault `" + item + "`: " + kind_name(f.kind) +
                              " needs a duration, e.g. @200ms+1s");
    auto d = parse_duration(dur, item);
    if (!d.ok())
      return d.status();
    f.duration = *d;
  } else if (!dur.empty()) {
    return invalid_argument("fault `" + item + "`: " + kind_name(f.kind) + " takes no duration");
  }
  out.explicit_faults.push_back(std::move(f));
  return Status::OK();
}

} // namespace

Fault Fault::crash(std::string node, us at) {
  Fault f;
  f.kind = Kind::crash;
  f.node = std::move(node);
  f.at = at;
  return f;
}

Fault Fault::restart(std::string node, us at, us downtime) {
  Fault f = crash(std::move(node), at);
  f.kind = Kind::restart;
  f.duration = downtime;
  return f;
}

Fault Fault::drain(std::string worker, us at, us downtime) {
  Fault f = crash(std::move(worker), at);
  f.kind = Kind::drain;
  f.duration = downtime;
  return f;
}

Fault Fault::partition(std::string a, std::string b, us at, us duration) {
  Fault f;
  f.kind = Kind::partition;
  f.node = std::move(a);
  f.peer = std::move(b);
  f.at = at;
  f.duration = duration;
  return f;
}

Fault Fault::disconnect(std::string a, std::string b, us at) {
  Fault f = partition(std::move(a), std::move(b), at, us{0});
  f.kind = Kind::disconnect;
  return f;
}

Fault Fault::slow(std::string a, std::string b, us at, us duration) {
  Fault f = partition(std::move(a), std::move(b), at, duration);
  f.kind = Kind::slow;
  return f;
}

Fault Fault::at_fraction(double progress) const {
  Fault f = *this;
  f.at_progress = progress;
  return f;
}

std::string Fault::to_string() const {
  std::string s = kind_name(kind);
  s += "(" + node;
  if (has_peer(kind))
    s += "," + peer;
  s += ")@";
  if (at_progress) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%g%%", *at_progress * 100.0);
    s += buf;
  } else {
    s += format_duration(at);
  }
  if (has_duration(kind))
    s += "+" + format_duration(duration);
  return s;
}

Expected<FaultSpec> parse_faults(const std::string& spec) {
  FaultSpec out;
  out.text = spec;
  // Split at top-level commas (commas inside parentheses separate node names).
  std::vector<std::string> items;
  std::string cur;
  int depth = 0;
  for (char c : spec) {
    if (c == '(')
      ++depth;
    if (c == ')')
      --depth;
    if (c == ',' && depth == 0) {
      items.push_back(trim(cur));
      cur.clear();
    } else {
      cur += c;
    }
  }
  items.push_back(trim(cur));
  for (const auto& item : items) {
    if (item.empty() || item == "none")
      continue;
    if (item.find('(') != std::string::npos) {
      CONVEYOR_RETURN_IF_ERROR(parse_explicit(item, out));
      continue;
    }
    auto colon = item.find(':');
    std::string kind = trim(std::string_view{item}.substr(0, colon));
    if (kind != "any" && kind != "dispatcher" && kind != "trainer" && !kind_from(kind))
      return invalid_argument("fault `" + item +
                              "`: unknown kind (expected crash, restart, partition, disconnect, "
                              "slow, drain, dispatcher, trainer or any)");
    int count = 1;
    if (colon != std::string::npos) {
      std::string n = trim(std::string_view{item}.substr(colon + 1));
      char* end = nullptr;
      long v = std::strtol(n.c_str(), &end, 10);
      if (n.empty() || *end != '\0' || v < 0 || v > 1000)
        return invalid_argument("fault `" + item + "`: the count must be 0..1000, got \"" + n +
                                "\"");
      count = static_cast<int>(v);
    }
    out.random_faults.push_back(FaultSpec::Random{kind, count});
  }
  return out;
}

} // namespace conveyor
