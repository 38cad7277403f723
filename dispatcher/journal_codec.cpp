// The journal's record codec: one inspector that writes and one that reads, over the inspect()
// of every record and entry, so a new record field is journaled without codec changes.
#include "dispatcher/journal.hpp"

#include <set>
#include <type_traits>

#include "dispatcher/journal_format.hpp"

namespace conveyor::actors {

using namespace journal_format;

namespace {

template <class T>
struct is_seq : std::false_type {};
template <class T, class A>
struct is_seq<std::vector<T, A>> : std::true_type {};
template <class T>
struct is_set : std::false_type {};
template <class T, class C, class A>
struct is_set<std::set<T, C, A>> : std::true_type {};

class Encoder {
public:
  using result_type = void;
  static constexpr bool reads_state = true;
  static constexpr bool writes_state = false;
  explicit Encoder(std::string& out) : out_(out) {}

  template <class... Ts>
  void operator()(Ts&... xs) {
    (put(xs), ...);
  }

  template <class T>
  void put(const T& x) {
    if constexpr (std::is_same_v<T, bool>) {
      out_.push_back(x ? 1 : 0);
    } else if constexpr (std::is_integral_v<T>) {
      using U = std::make_unsigned_t<T>;
      U v = static_cast<U>(x);
      for (std::size_t i = 0; i < sizeof(T); ++i)
        out_.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
    } else if constexpr (std::is_enum_v<T>) {
      put(static_cast<std::underlying_type_t<T>>(x));
    } else if constexpr (std::is_same_v<T, std::string>) {
      put(static_cast<uint64_t>(x.size()));
      out_.append(x);
    } else if constexpr (is_seq<T>::value || is_set<T>::value) {
      put(static_cast<uint64_t>(x.size()));
      for (const auto& e : x)
        put(e);
    } else {
      inspect(*this, const_cast<T&>(x));
    }
  }

private:
  std::string& out_;
};

class Decoder {
public:
  using result_type = void;
  static constexpr bool reads_state = false;
  static constexpr bool writes_state = true;
  explicit Decoder(std::string_view in) : in_(in) {}

  template <class... Ts>
  void operator()(Ts&... xs) {
    (get(xs), ...);
  }

  template <class T>
  void get(T& x) {
    if (!ok_)
      return;
    if constexpr (std::is_same_v<T, bool>) {
      uint8_t b = 0;
      get(b);
      if (b > 1)
        fail("a bool is neither 0 nor 1");
      x = b == 1;
    } else if constexpr (std::is_integral_v<T>) {
      if (in_.size() - pos_ < sizeof(T))
        return fail("the record ends inside a number");
      using U = std::make_unsigned_t<T>;
      U v = 0;
      for (std::size_t i = 0; i < sizeof(T); ++i)
        v |= static_cast<U>(static_cast<unsigned char>(in_[pos_ + i])) << (8 * i);
      pos_ += sizeof(T);
      x = static_cast<T>(v);
    } else if constexpr (std::is_enum_v<T>) {
      std::underlying_type_t<T> v{};
      get(v);
      x = static_cast<T>(v);
    } else if constexpr (std::is_same_v<T, std::string>) {
      uint64_t n = 0;
      get(n);
      if (!ok_ || n > in_.size() - pos_)
        return fail("a string is longer than the record");
      x.assign(in_.data() + pos_, n);
      pos_ += n;
    } else if constexpr (is_seq<T>::value || is_set<T>::value) {
      uint64_t n = 0;
      get(n);
      if (!ok_ || n > in_.size() - pos_) // every element takes at least one byte
        return fail("a list is longer than the record");
      x.clear();
      for (uint64_t i = 0; i < n && ok_; ++i) {
        typename T::value_type e{};
        get(e);
        if constexpr (is_seq<T>::value)
          x.push_back(std::move(e));
        else
          x.insert(std::move(e));
      }
    } else {
      inspect(*this, x);
    }
  }

  bool ok() const { return ok_; }
  bool at_end() const { return pos_ == in_.size(); }
  const std::string& error() const { return error_; }
  void fail(std::string why) {
    if (ok_) {
      ok_ = false;
      error_ = std::move(why);
    }
  }

private:
  std::string_view in_;
  std::size_t pos_ = 0;
  bool ok_ = true;
  std::string error_;
};

template <std::size_t I = 0>
bool decode_alternative(Decoder& d, std::size_t tag, msg::Update& out) {
  if constexpr (I < std::variant_size_v<msg::Update>) {
    if (tag == I) {
      std::variant_alternative_t<I, msg::Update> record{};
      d.get(record);
      out = std::move(record);
      return true;
    }
    return decode_alternative<I + 1>(d, tag, out);
  } else {
    return false;
  }
}

} // namespace

// --- codec

std::string Journal::encode(const msg::Update& update) {
  std::string out;
  out.push_back(static_cast<char>(update.index()));
  Encoder e{out};
  std::visit([&](const auto& record) { e.put(record); }, update);
  return out;
}

Expected<msg::Update> Journal::decode(std::string_view payload) {
  if (payload.empty())
    return data_loss("an empty record");
  auto tag = static_cast<unsigned char>(payload[0]);
  Decoder d{payload.substr(1)};
  msg::Update out;
  if (!decode_alternative(d, tag, out))
    return data_loss("unknown record type " + std::to_string(tag) +
                     " (written by a newer conveyor?)");
  if (!d.ok())
    return data_loss("record type " + std::to_string(tag) + ": " + d.error());
  if (!d.at_end())
    return data_loss("record type " + std::to_string(tag) + " has trailing bytes");
  return out;
}

std::string Journal::encode_snapshot(const StateSnapshot& snapshot) {
  std::string out;
  Encoder e{out};
  e.put(snapshot);
  return out;
}

Expected<StateSnapshot> Journal::decode_snapshot(std::string_view payload) {
  Decoder d{payload};
  StateSnapshot s;
  d.get(s);
  if (!d.ok())
    return data_loss("snapshot: " + d.error());
  if (!d.at_end())
    return data_loss("snapshot has trailing bytes");
  return s;
}

} // namespace conveyor::actors
