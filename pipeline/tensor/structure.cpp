// Structure: building, printing and parsing the nesting of an element's components.
#include "conveyor/structure.hpp"

#include <algorithm>
#include <cctype>
#include <cstdio>

namespace conveyor {

namespace {

// Nesting deeper than this is refused by the parser, so that recursion stays within the stack.
constexpr int kMaxStructureDepth = 100;

class StructureParser {
public:
  explicit StructureParser(std::string_view s) : s_(s) {}

  Expected<Structure> parse_all() {
    auto out = value(0);
    if (!out.ok())
      return out;
    skip_space();
    if (i_ != s_.size())
      return error("expected the end of the structure, found `" + std::string(1, s_[i_]) + "`");
    return out;
  }

private:
  Status error(const std::string& message) const {
    return invalid_argument("structure, column " + std::to_string(i_ + 1) + ": " + message);
  }
  void skip_space() {
    while (i_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[i_])))
      ++i_;
  }
  bool eat(char c) {
    skip_space();
    if (i_ < s_.size() && s_[i_] == c) {
      ++i_;
      return true;
    }
    return false;
  }
  std::string found() const {
    return i_ < s_.size() ? "`" + std::string(1, s_[i_]) + "`" : std::string{"the end"};
  }

  Expected<Structure> value(int depth) {
    if (depth > kMaxStructureDepth)
      return error("nested deeper than " + std::to_string(kMaxStructureDepth) + " levels");
    if (eat('_'))
      return Structure::leaf();
    if (eat('('))
      return tuple(depth);
    if (eat('{'))
      return dict(depth);
    skip_space();
    return error("expected `_` (a tensor), `(` (a tuple) or `{` (a dict), found " + found());
  }

  Expected<Structure> tuple(int depth) {
    std::vector<Structure> items;
    bool trailing_comma = false;
    while (!eat(')')) {
      auto item = value(depth + 1);
      if (!item.ok())
        return item;
      items.push_back(std::move(*item));
      trailing_comma = eat(',');
      skip_space();
      if (!trailing_comma && !(i_ < s_.size() && s_[i_] == ')'))
        return error("expected `,` or `)` in a tuple, found " + found());
    }
    // `(_)` is just `_`, as in Python; `(_,)` is a one-entry tuple.
    if (items.size() == 1 && !trailing_comma)
      return std::move(items[0]);
    return Structure::tuple(std::move(items));
  }

  Expected<std::string> key() {
    skip_space();
    if (i_ >= s_.size() || (s_[i_] != '"' && s_[i_] != '\''))
      return error("expected a quoted string key in a dict, found " + found());
    const char quote = s_[i_++];
    std::string out;
    while (i_ < s_.size() && s_[i_] != quote) {
      char c = s_[i_++];
      if (c == '\\' && i_ < s_.size()) {
        char e = s_[i_++];
        if (e == 'x' && i_ + 2 <= s_.size()) {
          unsigned value = 0;
          if (std::sscanf(std::string(s_.substr(i_, 2)).c_str(), "%2x", &value) != 1)
            return error("a \\x escape needs two hex digits");
          i_ += 2;
          out += static_cast<char>(value);
        } else if (e == 'n') {
          out += '\n';
        } else if (e == 't') {
          out += '\t';
        } else {
          out += e;
        }
      } else {
        out += c;
      }
    }
    if (i_ >= s_.size())
      return error("unterminated string key");
    ++i_;
    return out;
  }

  Expected<Structure> dict(int depth) {
    std::vector<std::pair<std::string, Structure>> entries;
    while (!eat('}')) {
      auto k = key();
      if (!k.ok())
        return k.status();
      if (!eat(':'))
        return error("expected `:` after the dict key \"" + *k + "\", found " + found());
      auto v = value(depth + 1);
      if (!v.ok())
        return v;
      entries.emplace_back(std::move(*k), std::move(*v));
      if (!eat(',')) {
        skip_space();
        if (!(i_ < s_.size() && s_[i_] == '}'))
          return error("expected `,` or `}` in a dict, found " + found());
      }
    }
    return Structure::dict(std::move(entries));
  }

  std::string_view s_;
  std::size_t i_ = 0;
};

} // namespace

Structure Structure::tuple(std::vector<Structure> items) {
  Structure s;
  s.kind_ = Kind::tuple;
  s.flat_size_ = 0;
  for (const Structure& item : items)
    s.flat_size_ += item.flat_size_;
  s.children_ = std::move(items);
  return s;
}

Expected<Structure> Structure::dict(std::vector<std::pair<std::string, Structure>> entries) {
  std::sort(entries.begin(), entries.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  Structure s;
  s.kind_ = Kind::dict;
  s.flat_size_ = 0;
  for (std::size_t i = 0; i < entries.size(); ++i) {
    if (i > 0 && entries[i].first == s.keys_.back())
      return invalid_argument("structure: the dict key " + quote_structure_key(entries[i].first) +
                              " appears twice; keys must be unique");
    s.flat_size_ += entries[i].second.flat_size_;
    s.keys_.push_back(std::move(entries[i].first));
    s.children_.push_back(std::move(entries[i].second));
  }
  return s;
}

Structure Structure::flat(std::size_t n) {
  if (n == 1)
    return leaf();
  return tuple(std::vector<Structure>(n));
}

Expected<Structure> Structure::parse(std::string_view text) {
  return StructureParser{text}.parse_all();
}

bool Structure::is_flat() const {
  if (kind_ == Kind::leaf)
    return true;
  if (kind_ != Kind::tuple)
    return false;
  return std::all_of(children_.begin(), children_.end(),
                     [](const Structure& c) { return c.is_leaf(); });
}

std::size_t Structure::child_offset(std::size_t i) const {
  std::size_t offset = 0;
  for (std::size_t k = 0; k < i && k < children_.size(); ++k)
    offset += children_[k].flat_size_;
  return offset;
}

Expected<std::pair<std::size_t, std::size_t>> Structure::range_of(const std::string& key) const {
  if (kind_ != Kind::dict)
    return invalid_argument("key " + quote_structure_key(key) +
                            ": the element is not a dict (its structure is " + to_string() +
                            "); a key needs elements such as {\"" + key + "\": ...}");
  auto it = std::lower_bound(keys_.begin(), keys_.end(), key);
  if (it == keys_.end() || *it != key) {
    std::string known;
    for (const std::string& k : keys_)
      known += (known.empty() ? "" : ", ") + quote_structure_key(k);
    return not_found("key " + quote_structure_key(key) + " is not in the element; its keys are " +
                     known);
  }
  const auto i = static_cast<std::size_t>(it - keys_.begin());
  return std::make_pair(child_offset(i), children_[i].flat_size_);
}

Expected<std::size_t> Structure::index_of(const std::string& key) const {
  auto range = range_of(key);
  if (!range.ok())
    return range.status();
  const auto i =
    static_cast<std::size_t>(std::lower_bound(keys_.begin(), keys_.end(), key) - keys_.begin());
  if (!children_[i].is_leaf())
    return invalid_argument("key " + quote_structure_key(key) + " holds " +
                            children_[i].to_string() + ", not one tensor (`_`)");
  return range->first;
}

std::string quote_structure_key(const std::string& key, char quote) {
  std::string out(1, quote);
  for (char c : key) {
    auto u = static_cast<unsigned char>(c);
    if (c == quote || c == '\\') {
      out += '\\';
      out += c;
    } else if (u < 0x20 || u == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", u);
      out += buf;
    } else {
      out += c;
    }
  }
  return out + quote;
}

void Structure::format_into(const std::vector<std::string>& leaves, char quote, std::size_t& next,
                            std::string& out) const {
  switch (kind_) {
    case Kind::leaf:
      out += next < leaves.size() ? leaves[next] : std::string{"?"};
      ++next;
      return;
    case Kind::tuple:
      out += '(';
      for (std::size_t i = 0; i < children_.size(); ++i) {
        out += i > 0 ? ", " : "";
        children_[i].format_into(leaves, quote, next, out);
      }
      out += children_.size() == 1 ? ",)" : ")";
      return;
    case Kind::dict:
      out += '{';
      for (std::size_t i = 0; i < children_.size(); ++i) {
        out += i > 0 ? ", " : "";
        out += quote_structure_key(keys_[i], quote) + ": ";
        children_[i].format_into(leaves, quote, next, out);
      }
      out += '}';
      return;
  }
}

std::string Structure::format(const std::vector<std::string>& leaves, char quote) const {
  std::string out;
  std::size_t next = 0;
  format_into(leaves, quote, next, out);
  return out;
}

std::string Structure::to_string() const {
  return format(std::vector<std::string>(flat_size_, "_"));
}

} // namespace conveyor
