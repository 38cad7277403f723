// The binary form of a dataset graph (serialize.hpp), written with cereal's portable binary
// archive in little-endian order:
//
//   "CNVG" | u32 version (little-endian, written before cereal so any version can be named)
//   | u8 cereal endianness flag | node
//   node     := string op | u64 n, node * n (inputs) | u64 n, (string name | attr) * n
//   attr     := u8 kind (AttrValue index) | value of that kind:
//               bool u8 | int64 i64 | float64 f64 | string | int64_list u64 n, i64 * n
//               | string_list u64 n, string * n | element | function
//   element  := u64 n, tensor * n
//   tensor   := u8 dtype | u64 rank, i64 * rank | numeric: u64 n, n raw little-endian bytes
//                                                | string:  u64 n, string * n
//   function := string name | u64 n, (string key | u8 kind (Scalar index) | scalar) * n
//   string   := u64 n, n bytes
//
// Shared inputs are written once per use (the graph travels as a tree). Reading checks every
// count against the bytes that are left, every node against its op schema and every tensor's
// payload against its shape, so garbage gives data_loss and never a crash or a huge allocation.
#include "pipeline/graph/serialize.hpp"

#include <cereal/archives/portable_binary.hpp>

#include <cstring>
#include <sstream>
#include <streambuf>

#include "pipeline/graph/ops.hpp"
#include "pipeline/graph/serialize_checks.hpp"

namespace conveyor {

namespace serial {

std::optional<int64_t> entries_within(const Shape& shape, int64_t limit) {
  for (int64_t d : shape)
    if (d < 0)
      return std::nullopt;
  for (int64_t d : shape)
    if (d == 0)
      return 0;
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d > limit / n)
      return std::nullopt;
    n *= d;
  }
  return n;
}

void check_loaded_node(const Node& node) {
  Status st = check_node_schema(node);
  if (!st.ok())
    throw CorruptGraph(st.message());
  for (const auto& [name, value] : node.attrs) {
    const auto* e = std::get_if<Element>(&value);
    if (e == nullptr)
      continue;
    for (const Tensor& t : e->components)
      if (t.dtype() == DType::boolean)
        for (unsigned char b : t.bytes())
          if (b > 1)
            throw CorruptGraph("bool tensor in argument `" + name + "` of `" + node.op +
                               "` holds the byte " + std::to_string(b));
  }
}

} // namespace serial

namespace {

using serial::CorruptGraph;

constexpr char kMagic[4] = {'C', 'N', 'V', 'G'};
constexpr std::size_t kHeaderSize = 8;

// ---------------------------------------------------------------------------------- writing

class BinaryWriter {
public:
  explicit BinaryWriter(cereal::PortableBinaryOutputArchive& ar) : ar_(ar) {}

  void node(const Node& n) {
    string(n.op);
    size(n.inputs.size());
    for (const auto& in : n.inputs)
      node(*in);
    size(n.attrs.size());
    for (const auto& [name, value] : n.attrs) {
      string(name);
      attr(value);
    }
  }

private:
  void size(std::size_t n) { ar_(static_cast<uint64_t>(n)); }
  void string(const std::string& s) {
    size(s.size());
    ar_(cereal::binary_data(s.data(), s.size()));
  }

  void attr(const AttrValue& value) {
    ar_(static_cast<uint8_t>(value.index()));
    std::visit(
      [this](const auto& v) {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, bool>) {
          ar_(static_cast<uint8_t>(v ? 1 : 0));
        } else if constexpr (std::is_same_v<T, int64_t> || std::is_same_v<T, double>) {
          ar_(v);
        } else if constexpr (std::is_same_v<T, std::string>) {
          string(v);
        } else if constexpr (std::is_same_v<T, std::vector<int64_t>>) {
          size(v.size());
          for (int64_t i : v)
            ar_(i);
        } else if constexpr (std::is_same_v<T, std::vector<std::string>>) {
          size(v.size());
          for (const auto& s : v)
            string(s);
        } else if constexpr (std::is_same_v<T, Element>) {
          element(v);
        } else {
          function(v);
        }
      },
      value);
  }

  void element(const Element& e) {
    size(e.components.size());
    for (const Tensor& t : e.components) {
      ar_(static_cast<uint8_t>(t.dtype()));
      size(t.shape().size());
      for (int64_t d : t.shape())
        ar_(d);
      if (t.dtype() == DType::string) {
        size(t.strings().size());
        for (const auto& s : t.strings())
          string(s);
      } else {
        size(t.bytes().size());
        ar_(cereal::binary_data(t.bytes().data(), t.bytes().size()));
      }
    }
  }

  void function(const FunctionRef& f) {
    string(f.name);
    size(f.params.size());
    for (const auto& [key, value] : f.params) {
      string(key);
      ar_(static_cast<uint8_t>(value.index()));
      std::visit(
        [this](const auto& v) {
          using T = std::decay_t<decltype(v)>;
          if constexpr (std::is_same_v<T, bool>)
            ar_(static_cast<uint8_t>(v ? 1 : 0));
          else if constexpr (std::is_same_v<T, std::string>)
            string(v);
          else
            ar_(v);
        },
        value);
    }
  }

  cereal::PortableBinaryOutputArchive& ar_;
};

// ---------------------------------------------------------------------------------- reading

// Reads a string_view in place and knows how many bytes are left.
class ViewBuf : public std::streambuf {
public:
  explicit ViewBuf(std::string_view bytes) {
    char* p = const_cast<char*>(bytes.data()); // read-only: no put area, no putback
    setg(p, p, p + bytes.size());
  }
  std::size_t remaining() const { return static_cast<std::size_t>(egptr() - gptr()); }
};

class BinaryReader {
public:
  BinaryReader(cereal::PortableBinaryInputArchive& ar, const ViewBuf& buf) : ar_(ar), buf_(buf) {}

  NodePtr node(int depth) {
    if (depth > serial::kMaxGraphDepth)
      throw CorruptGraph("graph nested deeper than " + std::to_string(serial::kMaxGraphDepth) +
                         " ops");
    auto n = std::make_shared<Node>();
    n->op = string("op name");
    uint64_t num_inputs = count("inputs", 1);
    for (uint64_t i = 0; i < num_inputs; ++i)
      n->inputs.push_back(node(depth + 1));
    uint64_t num_attrs = count("attributes", 1);
    for (uint64_t i = 0; i < num_attrs; ++i) {
      std::string name = string("attribute name");
      AttrValue value = attr(name);
      if (!n->attrs.emplace(name, std::move(value)).second)
        throw CorruptGraph("attribute `" + name + "` of `" + n->op + "` appears twice");
    }
    serial::check_loaded_node(*n);
    return n;
  }

private:
  template <class T>
  T scalar() {
    T v;
    ar_(v);
    return v;
  }

  // A count of things that take at least `min_bytes` each, checked against the bytes left.
  uint64_t count(const char* what, std::size_t min_bytes) {
    auto n = scalar<uint64_t>();
    if (n > buf_.remaining() / min_bytes)
      throw CorruptGraph(std::string{"count of "} + what + " (" + std::to_string(n) +
                         ") exceeds the " + std::to_string(buf_.remaining()) + " bytes left");
    return n;
  }

  std::string string(const char* what) {
    std::string s(count(what, 1), '\0');
    ar_(cereal::binary_data(s.data(), s.size()));
    return s;
  }

  bool boolean() {
    auto b = scalar<uint8_t>();
    if (b > 1)
      throw CorruptGraph("bool byte holds " + std::to_string(b));
    return b == 1;
  }

  AttrValue attr(const std::string& name) {
    auto kind = scalar<uint8_t>();
    switch (kind) {
      case 0: return boolean();
      case 1: return scalar<int64_t>();
      case 2: return scalar<double>();
      case 3: return string("string attribute");
      case 4: {
        std::vector<int64_t> v(count("int list entries", 8));
        for (auto& i : v)
          i = scalar<int64_t>();
        return v;
      }
      case 5: {
        std::vector<std::string> v(count("string list entries", 8));
        for (auto& s : v)
          s = string("string list entry");
        return v;
      }
      case 6: return element();
      case 7: return function();
      default:
        throw CorruptGraph("attribute `" + name + "` has unknown kind " + std::to_string(kind));
    }
  }

  Element element() {
    Element e;
    uint64_t n = count("element components", 17); // dtype, rank and payload count at least
    for (uint64_t i = 0; i < n; ++i)
      e.components.push_back(tensor());
    return e;
  }

  Tensor tensor() {
    auto dtype_index = scalar<uint8_t>();
    const std::optional<DType> known = dtype_from_code(dtype_index);
    if (!known)
      throw CorruptGraph("tensor has unknown dtype " + std::to_string(dtype_index));
    const DType dtype = *known;
    Shape shape(count("tensor dimensions", 8));
    for (auto& d : shape)
      d = scalar<int64_t>();
    // Every entry takes at least one byte (a string at least its 8-byte length), so a shape with
    // more entries than bytes left is corrupt.
    auto entries = serial::entries_within(shape, static_cast<int64_t>(buf_.remaining()));
    if (!entries)
      throw CorruptGraph("tensor shape has a negative dimension or more entries than bytes left");
    Tensor t{dtype, shape};
    if (dtype == DType::string) {
      if (count("tensor strings", 8) != static_cast<uint64_t>(*entries))
        throw CorruptGraph("string tensor's entry count does not match its shape");
      for (auto& s : t.mutable_strings())
        s = string("tensor string");
    } else {
      if (count("tensor bytes", 1) != t.bytes().size())
        throw CorruptGraph(std::string{"payload size of a "} + dtype_name(dtype) +
                           " tensor does not match its shape");
      ar_(cereal::binary_data(t.mutable_bytes().data(), t.mutable_bytes().size()));
    }
    return t;
  }

  FunctionRef function() {
    FunctionRef f{string("function name")};
    uint64_t n = count("function parameters", 10);
    for (uint64_t i = 0; i < n; ++i) {
      std::string key = string("parameter name");
      auto kind = scalar<uint8_t>();
      Scalar value;
      switch (kind) {
        case 0: value = boolean(); break;
        case 1: value = scalar<int64_t>(); break;
        case 2: value = scalar<double>(); break;
        case 3: value = string("string parameter"); break;
        default:
          throw CorruptGraph("parameter `" + key + "` has unknown kind " + std::to_string(kind));
      }
      if (!f.params.emplace(key, std::move(value)).second)
        throw CorruptGraph("parameter `" + key + "` of `" + f.name + "` appears twice");
    }
    return f;
  }

  cereal::PortableBinaryInputArchive& ar_;
  const ViewBuf& buf_;
};

uint32_t read_u32_le(const char* p) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i)
    v = (v << 8) | static_cast<unsigned char>(p[i]);
  return v;
}

} // namespace

std::string to_binary(const Dataset& dataset) {
  std::ostringstream out(std::ios::binary);
  out.write(kMagic, sizeof kMagic);
  for (int i = 0; i < 4; ++i)
    out.put(static_cast<char>((kGraphFormatVersion >> (8 * i)) & 0xff));
  {
    cereal::PortableBinaryOutputArchive ar(
      out, cereal::PortableBinaryOutputArchive::Options::LittleEndian());
    BinaryWriter{ar}.node(*dataset.node());
  }
  return std::move(out).str();
}

Expected<Dataset> from_binary(std::string_view bytes) {
  if (bytes.size() < kHeaderSize)
    return data_loss("dataset graph is " + std::to_string(bytes.size()) +
                     " bytes, too short for its " + std::to_string(kHeaderSize) + "-byte header");
  if (std::memcmp(bytes.data(), kMagic, sizeof kMagic) != 0)
    return data_loss("bytes are not a conveyor dataset graph (the magic \"CNVG\" is missing)");
  uint32_t version = read_u32_le(bytes.data() + sizeof kMagic);
  if (version != kGraphFormatVersion)
    return Status{ErrorCode::version_mismatch,
                  "dataset graph has format version " + std::to_string(version) +
                    ", this build reads version " + std::to_string(kGraphFormatVersion)};
  ViewBuf buf{bytes.substr(kHeaderSize)};
  std::istream in(&buf);
  try {
    cereal::PortableBinaryInputArchive ar(
      in, cereal::PortableBinaryInputArchive::Options::LittleEndian());
    NodePtr root = BinaryReader{ar, buf}.node(1);
    if (buf.remaining() != 0)
      return data_loss("dataset graph has " + std::to_string(buf.remaining()) +
                       " unexpected bytes after its end");
    return Dataset{std::move(root)};
  } catch (const std::exception& e) {
    return data_loss(std::string{"corrupt dataset graph: "} + e.what());
  }
}

} // namespace conveyor
