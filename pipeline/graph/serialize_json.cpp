// The JSON form of a dataset graph (serialize.hpp), for people to read, written and read with
// cereal's JSON archives:
//
//   {"format": "conveyor.graph", "version": 1, "graph": NODE}
//   NODE   = {"op": "batch", "inputs": [NODE...], "attrs": [ATTR...]}
//   ATTR   = {"name": "batch_size", "kind": "int64", "value": 8}
//            kinds: bool, int64, float64, string, int64_list, string_list,
//                   element (value: [TENSOR...]), function (value: FUNC)
//   TENSOR = {"dtype": "int32", "shape": [2], "encoding": "plain", "values": [1, 2]}
//   FUNC   = {"name": "scale", "params": [{"name": "factor", "kind": "float64", "value": 2.5}]}
//
// Members are found by name, so their order does not matter. JSON cannot carry everything a
// graph can hold, so the rare values it would change are written in hex instead, and nothing is
// lost: strings containing a NUL byte (cereal reads JSON strings as C strings) and NaNs other
// than the standard quiet NaN (JSON has one NaN). Such values use the kinds string_hex,
// string_list_hex, float64_hex (the 8 little-endian bytes) and tensors "encoding": "hex"
// (each entry's little-endian bytes, or a string's bytes).
#include <cereal/archives/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <sstream>

#include "pipeline/graph/serialize.hpp"
#include "pipeline/graph/serialize_checks.hpp"

namespace conveyor {

namespace {

using cereal::JSONInputArchive;
using cereal::JSONOutputArchive;
using serial::CorruptGraph;

constexpr const char* kFormatName = "conveyor.graph";
// Each graph level is an object inside an array; tensors and functions add a few more.
constexpr int kMaxJsonNesting = 2 * serial::kMaxGraphDepth + 16;

// ------------------------------------------------------------------------------- encodings

std::string to_hex(const void* data, std::size_t n) {
  static const char digits[] = "0123456789abcdef";
  const auto* p = static_cast<const unsigned char*>(data);
  std::string out;
  out.reserve(2 * n);
  for (std::size_t i = 0; i < n; ++i) {
    out += digits[p[i] >> 4];
    out += digits[p[i] & 15];
  }
  return out;
}

std::string from_hex(const std::string& hex) {
  auto digit = [](char c) -> int {
    if (c >= '0' && c <= '9')
      return c - '0';
    if (c >= 'a' && c <= 'f')
      return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
      return c - 'A' + 10;
    throw CorruptGraph(std::string{"hex value has the non-hex character `"} + c + "`");
  };
  if (hex.size() % 2 != 0)
    throw CorruptGraph("hex value has an odd number of digits");
  std::string out(hex.size() / 2, '\0');
  for (std::size_t i = 0; i < out.size(); ++i)
    out[i] = static_cast<char>(digit(hex[2 * i]) * 16 + digit(hex[2 * i + 1]));
  return out;
}

bool has_nul(const std::string& s) { return s.find('\0') != std::string::npos; }

// JSON has one NaN; any other NaN bit pattern would come back changed.
template <class F>
bool json_keeps(F v) {
  if (!std::isnan(v))
    return true;
  F canonical = std::numeric_limits<F>::quiet_NaN();
  return std::memcmp(&v, &canonical, sizeof v) == 0;
}

// Tensor numeric storage is little-endian (tensor.hpp), as are the hex forms here.
template <class T>
T load_le(const std::string& bytes) {
  if (bytes.size() != sizeof(T))
    throw CorruptGraph("hex value has " + std::to_string(bytes.size()) + " bytes, expected " +
                       std::to_string(sizeof(T)));
  T v;
  std::memcpy(&v, bytes.data(), sizeof v);
  return v;
}

// ---------------------------------------------------------------------------------- writing

class JsonWriter {
public:
  explicit JsonWriter(JSONOutputArchive& ar) : ar_(ar) {}

  void node(const Node& n) {
    ar_(cereal::make_nvp("op", n.op));
    begin_array("inputs");
    for (const auto& in : n.inputs) {
      ar_.startNode();
      node(*in);
      ar_.finishNode();
    }
    ar_.finishNode();
    begin_array("attrs");
    for (const auto& [name, value] : n.attrs) {
      ar_.startNode();
      ar_(cereal::make_nvp("name", name));
      attr(value);
      ar_.finishNode();
    }
    ar_.finishNode();
  }

private:
  void begin_array(const char* name) {
    ar_.setNextName(name);
    ar_.startNode();
    ar_.makeArray();
  }
  void kind(const char* k) { ar_(cereal::make_nvp("kind", std::string{k})); }

  // The "kind" and "value" members of an attribute or parameter.
  void attr(const AttrValue& value) {
    std::visit(
      [this](const auto& v) {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, bool>) {
          kind("bool");
          ar_(cereal::make_nvp("value", v));
        } else if constexpr (std::is_same_v<T, int64_t>) {
          kind("int64");
          ar_(cereal::make_nvp("value", v));
        } else if constexpr (std::is_same_v<T, double>) {
          float64(v);
        } else if constexpr (std::is_same_v<T, std::string>) {
          string(v);
        } else if constexpr (std::is_same_v<T, std::vector<int64_t>>) {
          kind("int64_list");
          begin_array("value");
          for (int64_t i : v)
            ar_(i);
          ar_.finishNode();
        } else if constexpr (std::is_same_v<T, std::vector<std::string>>) {
          bool hex = std::any_of(v.begin(), v.end(), has_nul);
          kind(hex ? "string_list_hex" : "string_list");
          begin_array("value");
          for (const auto& s : v)
            ar_(hex ? to_hex(s.data(), s.size()) : s);
          ar_.finishNode();
        } else if constexpr (std::is_same_v<T, Element>) {
          kind("element");
          begin_array("value");
          for (const Tensor& t : v.components) {
            ar_.startNode();
            tensor(t);
            ar_.finishNode();
          }
          ar_.finishNode();
        } else {
          kind("function");
          ar_.setNextName("value");
          ar_.startNode();
          function(v);
          ar_.finishNode();
        }
      },
      value);
  }

  void float64(double v) {
    if (json_keeps(v)) {
      kind("float64");
      ar_(cereal::make_nvp("value", v));
    } else {
      kind("float64_hex");
      ar_(cereal::make_nvp("value", to_hex(&v, sizeof v)));
    }
  }

  void string(const std::string& s) {
    if (has_nul(s)) {
      kind("string_hex");
      ar_(cereal::make_nvp("value", to_hex(s.data(), s.size())));
    } else {
      kind("string");
      ar_(cereal::make_nvp("value", s));
    }
  }

  void tensor(const Tensor& t) {
    ar_(cereal::make_nvp("dtype", std::string{dtype_name(t.dtype())}));
    begin_array("shape");
    for (int64_t d : t.shape())
      ar_(d);
    ar_.finishNode();
    bool hex = !plain_keeps(t);
    ar_(cereal::make_nvp("encoding", std::string{hex ? "hex" : "plain"}));
    begin_array("values");
    int64_t n = t.num_elements();
    std::size_t width = dtype_size(t.dtype());
    for (int64_t i = 0; i < n; ++i) {
      if (t.dtype() == DType::string) {
        const std::string& s = t.strings()[static_cast<std::size_t>(i)];
        ar_(hex ? to_hex(s.data(), s.size()) : s);
      } else if (hex) {
        ar_(to_hex(t.bytes().data() + static_cast<std::size_t>(i) * width, width));
      } else {
        switch (t.dtype()) {
          case DType::boolean: ar_(t.bytes()[static_cast<std::size_t>(i)] != 0); break;
          case DType::int32: ar_(static_cast<int64_t>(t.at<int32_t>(i))); break;
          case DType::int64: ar_(t.at<int64_t>(i)); break;
          case DType::float32: ar_(static_cast<double>(t.at<float>(i))); break;
          case DType::float64: ar_(t.at<double>(i)); break;
          default: break; // plain_keeps() sends every other dtype hex-encoded
        }
      }
    }
    ar_.finishNode();
  }

  static bool plain_keeps(const Tensor& t) {
    int64_t n = t.num_elements();
    switch (t.dtype()) {
      case DType::string: return std::none_of(t.strings().begin(), t.strings().end(), has_nul);
      case DType::float32:
        for (int64_t i = 0; i < n; ++i)
          if (!json_keeps(t.at<float>(i)))
            return false;
        return true;
      case DType::float64:
        for (int64_t i = 0; i < n; ++i)
          if (!json_keeps(t.at<double>(i)))
            return false;
        return true;
      case DType::boolean:
      case DType::int32:
      case DType::int64: return true;
      default: return false; // uint64 exceeds JSON's int64, half floats and complex have no form
    }
  }

  void function(const FunctionRef& f) {
    ar_(cereal::make_nvp("name", f.name));
    begin_array("params");
    for (const auto& [key, value] : f.params) {
      ar_.startNode();
      ar_(cereal::make_nvp("name", key));
      std::visit([this](const auto& v) { attr(AttrValue{v}); }, value);
      ar_.finishNode();
    }
    ar_.finishNode();
  }

  JSONOutputArchive& ar_;
};

// ---------------------------------------------------------------------------------- reading

class JsonReader {
public:
  explicit JsonReader(JSONInputArchive& ar) : ar_(ar) {}

  NodePtr node(int depth) {
    if (depth > serial::kMaxGraphDepth)
      throw CorruptGraph("graph nested deeper than " + std::to_string(serial::kMaxGraphDepth) +
                         " ops");
    auto n = std::make_shared<Node>();
    n->op = get<std::string>("op");
    std::size_t num_inputs = enter_array("inputs");
    for (std::size_t i = 0; i < num_inputs; ++i) {
      ar_.startNode();
      n->inputs.push_back(node(depth + 1));
      ar_.finishNode();
    }
    ar_.finishNode();
    std::size_t num_attrs = enter_array("attrs");
    for (std::size_t i = 0; i < num_attrs; ++i) {
      ar_.startNode();
      auto name = get<std::string>("name");
      AttrValue value = attr(name, get<std::string>("kind"));
      if (!n->attrs.emplace(name, std::move(value)).second)
        throw CorruptGraph("attribute `" + name + "` of `" + n->op + "` appears twice");
      ar_.finishNode();
    }
    ar_.finishNode();
    serial::check_loaded_node(*n);
    return n;
  }

private:
  template <class T>
  T get(const char* name) {
    T v;
    ar_(cereal::make_nvp(name, v));
    return v;
  }
  template <class T>
  T next() {
    T v;
    ar_(v);
    return v;
  }
  std::size_t enter_array(const char* name) {
    ar_.setNextName(name);
    ar_.startNode();
    cereal::size_type n = 0;
    ar_.loadSize(n);
    return static_cast<std::size_t>(n);
  }

  // Reads the "value" member of an attribute or parameter of the given kind.
  AttrValue attr(const std::string& name, const std::string& kind) {
    if (kind == "bool")
      return get<bool>("value");
    if (kind == "int64")
      return get<int64_t>("value");
    if (kind == "float64")
      return get<double>("value");
    if (kind == "float64_hex")
      return load_le<double>(from_hex(get<std::string>("value")));
    if (kind == "string")
      return get<std::string>("value");
    if (kind == "string_hex")
      return from_hex(get<std::string>("value"));
    if (kind == "int64_list" || kind == "string_list" || kind == "string_list_hex" ||
        kind == "element") {
      std::size_t n = enter_array("value");
      AttrValue out;
      if (kind == "int64_list") {
        std::vector<int64_t> v;
        for (std::size_t i = 0; i < n; ++i)
          v.push_back(next<int64_t>());
        out = std::move(v);
      } else if (kind == "element") {
        Element e;
        for (std::size_t i = 0; i < n; ++i) {
          ar_.startNode();
          e.components.push_back(tensor());
          ar_.finishNode();
        }
        out = std::move(e);
      } else {
        std::vector<std::string> v;
        for (std::size_t i = 0; i < n; ++i)
          v.push_back(kind == "string_list" ? next<std::string>() : from_hex(next<std::string>()));
        out = std::move(v);
      }
      ar_.finishNode();
      return out;
    }
    if (kind == "function") {
      ar_.setNextName("value");
      ar_.startNode();
      FunctionRef f = function();
      ar_.finishNode();
      return f;
    }
    throw CorruptGraph("attribute `" + name + "` has unknown kind `" + kind + "`");
  }

  Tensor tensor() {
    auto dtype_text = get<std::string>("dtype");
    auto dtype = dtype_from_name(dtype_text);
    if (!dtype)
      throw CorruptGraph("tensor has unknown dtype `" + dtype_text + "`");
    Shape shape;
    std::size_t rank = enter_array("shape");
    for (std::size_t i = 0; i < rank; ++i)
      shape.push_back(next<int64_t>());
    ar_.finishNode();
    auto encoding = get<std::string>("encoding");
    if (encoding != "plain" && encoding != "hex")
      throw CorruptGraph("tensor has unknown encoding `" + encoding + "`");
    bool hex = encoding == "hex";
    std::size_t n = enter_array("values");
    auto entries = serial::entries_within(shape, static_cast<int64_t>(n));
    if (!entries || static_cast<std::size_t>(*entries) != n)
      throw CorruptGraph("tensor has " + std::to_string(n) +
                         " values, which does not match its shape");
    Tensor t{*dtype, shape};
    std::size_t width = dtype_size(*dtype);
    for (std::size_t i = 0; i < n; ++i) {
      auto k = static_cast<int64_t>(i);
      if (*dtype == DType::string) {
        t.mutable_strings()[i] = hex ? from_hex(next<std::string>()) : next<std::string>();
      } else if (hex) {
        std::string bytes = from_hex(next<std::string>());
        if (bytes.size() != width)
          throw CorruptGraph("hex tensor entry has " + std::to_string(bytes.size()) +
                             " bytes, expected " + std::to_string(width));
        std::memcpy(t.mutable_bytes().data() + i * width, bytes.data(), width);
      } else {
        switch (*dtype) {
          case DType::boolean: t.mutable_bytes()[i] = next<bool>() ? 1 : 0; break;
          case DType::int32: {
            auto v = next<int64_t>();
            if (v < std::numeric_limits<int32_t>::min() || v > std::numeric_limits<int32_t>::max())
              throw CorruptGraph("int32 tensor holds " + std::to_string(v));
            t.mutable_data<int32_t>()[k] = static_cast<int32_t>(v);
            break;
          }
          case DType::int64: t.mutable_data<int64_t>()[k] = next<int64_t>(); break;
          case DType::float32:
            t.mutable_data<float>()[k] = static_cast<float>(next<double>());
            break;
          case DType::float64: t.mutable_data<double>()[k] = next<double>(); break;
          default:
            throw CorruptGraph(std::string{"a "} + dtype_name(*dtype) +
                               " tensor must have the hex encoding, found plain");
        }
      }
    }
    ar_.finishNode();
    return t;
  }

  FunctionRef function() {
    FunctionRef f{get<std::string>("name")};
    std::size_t n = enter_array("params");
    for (std::size_t i = 0; i < n; ++i) {
      ar_.startNode();
      auto key = get<std::string>("name");
      auto kind = get<std::string>("kind");
      AttrValue v = attr(key, kind);
      Scalar value;
      if (auto* b = std::get_if<bool>(&v))
        value = *b;
      else if (auto* i64 = std::get_if<int64_t>(&v))
        value = *i64;
      else if (auto* d = std::get_if<double>(&v))
        value = *d;
      else if (auto* s = std::get_if<std::string>(&v))
        value = std::move(*s);
      else
        throw CorruptGraph("parameter `" + key + "` of `" + f.name + "` has kind `" + kind +
                           "`, expected bool, int64, float64 or string");
      if (!f.params.emplace(key, std::move(value)).second)
        throw CorruptGraph("parameter `" + key + "` of `" + f.name + "` appears twice");
      ar_.finishNode();
    }
    ar_.finishNode();
    return f;
  }

  JSONInputArchive& ar_;
};

// The deepest [ / { nesting outside strings; rapidjson parses recursively, so this is checked
// before handing it the text.
int json_nesting(std::string_view json) {
  int depth = 0, deepest = 0;
  bool in_string = false;
  for (std::size_t i = 0; i < json.size(); ++i) {
    char c = json[i];
    if (in_string) {
      if (c == '\\')
        ++i;
      else if (c == '"')
        in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      deepest = std::max(deepest, ++depth);
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return deepest;
}

} // namespace

std::string to_json(const Dataset& dataset) {
  std::ostringstream out;
  {
    JSONOutputArchive ar(out);
    ar(cereal::make_nvp("format", std::string{kFormatName}));
    ar(cereal::make_nvp("version", static_cast<int64_t>(kGraphFormatVersion)));
    ar.setNextName("graph");
    ar.startNode();
    JsonWriter{ar}.node(*dataset.node());
    ar.finishNode();
  }
  return std::move(out).str();
}

Expected<Dataset> from_json(std::string_view json) {
  if (json_nesting(json) > kMaxJsonNesting)
    return data_loss("dataset graph JSON is nested deeper than " + std::to_string(kMaxJsonNesting) +
                     " levels");
  try {
    std::istringstream in{std::string{json}};
    JSONInputArchive ar(in);
    std::string format;
    ar(cereal::make_nvp("format", format));
    if (format != kFormatName)
      return data_loss("JSON has \"format\": \"" + format + "\", expected \"" + kFormatName + "\"");
    int64_t version = 0;
    ar(cereal::make_nvp("version", version));
    if (version != kGraphFormatVersion)
      return Status{ErrorCode::version_mismatch,
                    "dataset graph JSON has format version " + std::to_string(version) +
                      ", this build reads version " + std::to_string(kGraphFormatVersion)};
    ar.setNextName("graph");
    ar.startNode();
    NodePtr root = JsonReader{ar}.node(1);
    ar.finishNode();
    return Dataset{std::move(root)};
  } catch (const std::exception& e) {
    return data_loss(std::string{"corrupt dataset graph JSON: "} + e.what());
  }
}

} // namespace conveyor
