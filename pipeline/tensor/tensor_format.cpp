// Tensor::to_string and Element::to_string: literals in the pipeline text form that
// parse_element (text_form.cpp) turns back into exactly the same tensors.
//
// The form, and why each piece is there:
//   3, -7, 2.5, true, "a\"b"         scalars of the default dtypes: int64 for ints, float32 for
//                                    floats (like tf.constant), bool, string
//   [[1, 2], [3, 4]]                 rank >= 1 as nested lists, row-major
//   int32(3), float64([0.5, 1.0])    any other dtype wraps the whole literal in a cast
//   uint8([0, 255]), float16(0.5)    (float16/bfloat16 print their exact value as a float)
//   complex64([complex(1.0, -2.0)])  a complex entry is complex(real, imag); a plain number
//                                    in a complex literal has a zero imaginary part
//   int64([]), string([[], []])      a tensor with no entries always carries a cast, since an
//                                    empty list says nothing about its dtype
//   float32([], shape=[0, 3])        ... and its shape when dimensions follow a zero dimension
//                                    (nested lists stop at the first zero dimension)
//   (1, "a")                         an element of several components is a tuple
// Floats are printed shortest-round-trip and always with a '.' or an exponent (3.0, 1e+20).
#include <array>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <string>

#include "pipeline/tensor/element.hpp"
#include "pipeline/tensor/tensor.hpp"
#include "pipeline/graph/text_literals.hpp"

namespace conveyor {

namespace text {
namespace {

template <class F>
std::string format_floating(F v) {
  if (std::isnan(v))
    return std::signbit(v) ? "-nan" : "nan";
  if (std::isinf(v))
    return v < 0 ? "-inf" : "inf";
  std::array<char, 64> buf{};
  auto [end, ec] = std::to_chars(buf.data(), buf.data() + buf.size(), v);
  (void)ec; // 64 chars always suffice for the shortest form of a float or double
  std::string s(buf.data(), end);
  // "3" would read back as an int; every float literal needs a '.' or an exponent.
  if (s.find_first_of(".e") == std::string::npos)
    s += ".0";
  return s;
}

} // namespace

std::string format_float32(float v) { return format_floating(v); }
std::string format_float64(double v) { return format_floating(v); }

std::string quote_string(std::string_view s) {
  std::string out;
  out.reserve(s.size() + 2);
  out += '"';
  for (char c : s) {
    auto u = static_cast<unsigned char>(c);
    switch (c) {
      case '\\': out += "\\\\"; break;
      case '"': out += "\\\""; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      default:
        if (u < 0x20 || u == 0x7f) {
          char hex[8];
          std::snprintf(hex, sizeof hex, "\\x%02x", u);
          out += hex;
        } else {
          out += c;
        }
    }
  }
  out += '"';
  return out;
}

} // namespace text

namespace {

void append_scalar(const Tensor& t, int64_t i, std::string& out) {
  switch (t.dtype()) {
    case DType::boolean:
      out += t.bytes()[static_cast<std::size_t>(i)] != 0 ? "true" : "false";
      break;
    case DType::int8: out += std::to_string(t.at<int8_t>(i)); break;
    case DType::int16: out += std::to_string(t.at<int16_t>(i)); break;
    case DType::int32: out += std::to_string(t.at<int32_t>(i)); break;
    case DType::int64: out += std::to_string(t.at<int64_t>(i)); break;
    case DType::uint8: out += std::to_string(t.at<uint8_t>(i)); break;
    case DType::uint16: out += std::to_string(t.at<uint16_t>(i)); break;
    case DType::uint32: out += std::to_string(t.at<uint32_t>(i)); break;
    case DType::uint64: out += std::to_string(t.at<uint64_t>(i)); break;
    // A half float's value is exactly a float32, whose shortest form reads back to the same bits.
    case DType::float16: out += text::format_float32(t.at<float16>(i).to_float()); break;
    case DType::bfloat16: out += text::format_float32(t.at<bfloat16>(i).to_float()); break;
    case DType::float32: out += text::format_float32(t.at<float>(i)); break;
    case DType::float64: out += text::format_float64(t.at<double>(i)); break;
    case DType::complex64: {
      const auto c = t.at<std::complex<float>>(i);
      out +=
        "complex(" + text::format_float32(c.real()) + ", " + text::format_float32(c.imag()) + ")";
      break;
    }
    case DType::complex128: {
      const auto c = t.at<std::complex<double>>(i);
      out +=
        "complex(" + text::format_float64(c.real()) + ", " + text::format_float64(c.imag()) + ")";
      break;
    }
    case DType::string: out += text::quote_string(t.string_at(i)); break;
  }
}

// Nested lists over dimensions [dim, rank); `flat` walks the row-major entries.
void append_nested(const Tensor& t, std::size_t dim, int64_t& flat, std::string& out) {
  if (dim == t.shape().size()) {
    append_scalar(t, flat++, out);
    return;
  }
  out += '[';
  for (int64_t i = 0; i < t.shape()[dim]; ++i) {
    if (i > 0)
      out += ", ";
    append_nested(t, dim + 1, flat, out);
  }
  out += ']';
}

// int64 and float32 are what bare int and float literals mean; bool and string literals are
// unambiguous. Everything else needs its cast.
bool is_literal_default(DType d) {
  return d == DType::int64 || d == DType::float32 || d == DType::boolean || d == DType::string;
}

// Nested lists stop at the first zero dimension, so the dimensions after it need `shape=`.
bool shape_lost_in_lists(const Shape& shape) {
  for (std::size_t i = 0; i < shape.size(); ++i)
    if (shape[i] == 0)
      return i + 1 < shape.size();
  return false;
}

} // namespace

std::string Tensor::to_string() const {
  std::string body;
  int64_t flat = 0;
  append_nested(*this, 0, flat, body);
  bool empty = num_elements() == 0;
  if (is_literal_default(dtype_) && !empty)
    return body;
  std::string out = std::string{dtype_name(dtype_)} + "(" + body;
  if (empty && shape_lost_in_lists(shape_)) {
    out += ", shape=[";
    for (std::size_t i = 0; i < shape_.size(); ++i)
      out += (i > 0 ? ", " : "") + std::to_string(shape_[i]);
    out += ']';
  }
  return out + ")";
}

std::string Element::to_string() const { return tuple_to_string(components); }

} // namespace conveyor
