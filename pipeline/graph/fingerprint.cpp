// fingerprint(): 64-bit FNV-1a over a canonical byte encoding of the graph, as 16 lowercase hex
// digits. The encoding is defined here field by field and depends on nothing but the graph's
// values (no pointers, no std::hash, no host byte order), so equal definitions give equal
// fingerprints in every process and on every machine:
//
//   "conveyor.fingerprint.v1"                      (the tag; bump it when the encoding changes)
//   node     := str op | u64 n, node * n (inputs in order)
//               | u64 n, (str name | attr) * n     (attributes in name order; a flat
//                                                   from_tensors* `structure` "" left out)
//   attr     := u8 tag | value        tags: bool 1, int64 2, float64 3, string 4, int64_list 5,
//                                           string_list 6, element 7, function 8
//               bool: u8 0/1 | int64: i64 | float64: u64 bit pattern | string: str
//               int64_list: u64 n, i64 * n | string_list: u64 n, str * n
//               element: u64 n, tensor * n
//               function: str name | u64 n, (str key | attr of tag 1..4) * n  (keys in order)
//   tensor   := u8 dtype (bool 1, int32 2, int64 3, float32 4, float64 5, string 6)
//               | u64 rank, i64 * rank | u64 n entries, each: bool u8 0/1, int32 i32, int64 i64,
//               float32 u32 bits, float64 u64 bits, string str
//   str      := u64 length | bytes
// All integers are fixed-width little-endian.
#include <cstdio>
#include <cstring>

#include "pipeline/graph/serialize.hpp"

namespace conveyor {

namespace {

class CanonicalHasher {
public:
  explicit CanonicalHasher(bool skip_pickles = false) : skip_pickles_(skip_pickles) {}

  void node(const Node& n) {
    str(n.op);
    u64(n.inputs.size());
    for (const auto& in : n.inputs)
      node(*in);
    u64(n.attrs.size() - (omitted(n) ? 1 : 0));
    for (const auto& [name, value] : n.attrs) {
      if (omitted(n) && name == "structure")
        continue;
      str(name);
      attr(value);
    }
  }

  // The `structure` of from_tensors/from_tensor_slices came after the encoding was pinned: flat
  // (""), it is left out, so a flat dataset keeps the fingerprint it always had.
  static bool omitted(const Node& n) {
    auto it = n.attrs.find("structure");
    return (n.op == "from_tensors" || n.op == "from_tensor_slices") && it != n.attrs.end() &&
           it->second == AttrValue{std::string{}};
  }

  void tag(std::string_view t) { bytes(t.data(), t.size()); }
  uint64_t hash() const { return h_; }

private:
  void bytes(const void* data, std::size_t n) {
    const auto* p = static_cast<const unsigned char*>(data);
    for (std::size_t i = 0; i < n; ++i) {
      h_ ^= p[i];
      h_ *= 1099511628211ull; // FNV-1a 64-bit prime
    }
  }
  void le(uint64_t v, int width) {
    unsigned char b[8];
    for (int i = 0; i < width; ++i)
      b[i] = static_cast<unsigned char>(v >> (8 * i));
    bytes(b, static_cast<std::size_t>(width));
  }
  void u8(uint8_t v) { le(v, 1); }
  void u64(uint64_t v) { le(v, 8); }
  void i64(int64_t v) { le(static_cast<uint64_t>(v), 8); }
  void f64(double v) {
    uint64_t bits;
    std::memcpy(&bits, &v, sizeof bits);
    le(bits, 8);
  }
  void str(const std::string& s) {
    u64(s.size());
    bytes(s.data(), s.size());
  }

  void attr(const AttrValue& value) {
    std::visit(
      [this](const auto& v) {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, bool>) {
          u8(1);
          u8(v ? 1 : 0);
        } else if constexpr (std::is_same_v<T, int64_t>) {
          u8(2);
          i64(v);
        } else if constexpr (std::is_same_v<T, double>) {
          u8(3);
          f64(v);
        } else if constexpr (std::is_same_v<T, std::string>) {
          u8(4);
          str(v);
        } else if constexpr (std::is_same_v<T, std::vector<int64_t>>) {
          u8(5);
          u64(v.size());
          for (int64_t i : v)
            i64(i);
        } else if constexpr (std::is_same_v<T, std::vector<std::string>>) {
          u8(6);
          u64(v.size());
          for (const auto& s : v)
            str(s);
        } else if constexpr (std::is_same_v<T, Element>) {
          u8(7);
          u64(v.components.size());
          for (const Tensor& t : v.components)
            tensor(t);
        } else {
          u8(8);
          str(v.name);
          const bool skip = skip_pickles_ && v.params.count("pickle") > 0;
          u64(v.params.size() - (skip ? 1 : 0));
          for (const auto& [key, param] : v.params) {
            if (skip && key == "pickle")
              continue;
            str(key);
            std::visit([this](const auto& p) { attr(AttrValue{p}); }, param);
          }
        }
      },
      value);
  }

  void tensor(const Tensor& t) {
    u8(dtype_tag(t.dtype()));
    u64(t.shape().size());
    for (int64_t d : t.shape())
      i64(d);
    int64_t n = t.num_elements();
    u64(static_cast<uint64_t>(n));
    for (int64_t i = 0; i < n; ++i) {
      switch (t.dtype()) {
        case DType::boolean: u8(t.bytes()[static_cast<std::size_t>(i)] != 0 ? 1 : 0); break;
        case DType::int32: le(static_cast<uint32_t>(t.at<int32_t>(i)), 4); break;
        case DType::int64: i64(t.at<int64_t>(i)); break;
        case DType::float32: {
          uint32_t bits;
          float f = t.at<float>(i);
          std::memcpy(&bits, &f, sizeof bits);
          le(bits, 4);
          break;
        }
        case DType::float64: f64(t.at<double>(i)); break;
        case DType::string: str(t.strings()[static_cast<std::size_t>(i)]); break;
        default: { // the later dtypes: their little-endian bytes, as the codec carries them
          const std::size_t width = dtype_size(t.dtype());
          const unsigned char* p = t.bytes().data() + static_cast<std::size_t>(i) * width;
          for (std::size_t b = 0; b < width; ++b)
            u8(p[b]);
          break;
        }
      }
    }
  }

  static uint8_t dtype_tag(DType d) {
    switch (d) {
      case DType::boolean: return 1;
      case DType::int32: return 2;
      case DType::int64: return 3;
      case DType::float32: return 4;
      case DType::float64: return 5;
      case DType::string: return 6;
      default: break;
    }
    return static_cast<uint8_t>(static_cast<unsigned>(d) + 1); // 7.. for the codes 6..
  }

  uint64_t h_ = 14695981039346656037ull; // FNV-1a 64-bit offset basis
  bool skip_pickles_;
};

std::string hex_fingerprint(const Dataset& dataset, bool skip_pickles) {
  CanonicalHasher hasher(skip_pickles);
  hasher.tag("conveyor.fingerprint.v1");
  hasher.node(*dataset.node());
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(hasher.hash()));
  return hex;
}

} // namespace

std::string fingerprint(const Dataset& dataset) { return hex_fingerprint(dataset, false); }

std::string fingerprint_without_pickles(const Dataset& dataset) {
  return hex_fingerprint(dataset, true);
}

} // namespace conveyor
