// DType names and sizes, the float16/bfloat16 bit conversions, and the per-entry conversions
// behind tf.cast (dtype_convert.hpp).
#include <cmath>
#include <cstring>
#include <limits>

#include "pipeline/tensor/dtype_convert.hpp"

namespace conveyor {

const char* dtype_name(DType dtype) {
  switch (dtype) {
    case DType::boolean: return "bool";
    case DType::int8: return "int8";
    case DType::int16: return "int16";
    case DType::int32: return "int32";
    case DType::int64: return "int64";
    case DType::uint8: return "uint8";
    case DType::uint16: return "uint16";
    case DType::uint32: return "uint32";
    case DType::uint64: return "uint64";
    case DType::float16: return "float16";
    case DType::bfloat16: return "bfloat16";
    case DType::float32: return "float32";
    case DType::float64: return "float64";
    case DType::complex64: return "complex64";
    case DType::complex128: return "complex128";
    case DType::string: return "string";
  }
  return "unknown";
}

std::optional<DType> dtype_from_name(std::string_view name) {
  for (DType d : kAllDTypes)
    if (name == dtype_name(d))
      return d;
  return std::nullopt;
}

std::optional<DType> dtype_from_code(unsigned code) {
  if (code >= kNumDTypes)
    return std::nullopt;
  return kAllDTypes[code];
}

std::string dtype_names() {
  // In the order a reader looks for them, not the codes' order.
  static const DType order[] = {DType::boolean, DType::int8,      DType::int16,      DType::int32,
                                DType::int64,   DType::uint8,     DType::uint16,     DType::uint32,
                                DType::uint64,  DType::float16,   DType::bfloat16,   DType::float32,
                                DType::float64, DType::complex64, DType::complex128, DType::string};
  std::string out;
  for (DType d : order)
    out += (out.empty() ? "" : ", ") + std::string{dtype_name(d)};
  return out;
}

std::size_t dtype_size(DType dtype) {
  switch (dtype) {
    case DType::boolean:
    case DType::int8:
    case DType::uint8: return 1;
    case DType::int16:
    case DType::uint16:
    case DType::float16:
    case DType::bfloat16: return 2;
    case DType::int32:
    case DType::uint32:
    case DType::float32: return 4;
    case DType::int64:
    case DType::uint64:
    case DType::float64:
    case DType::complex64: return 8;
    case DType::complex128: return 16;
    case DType::string: return 0;
  }
  return 0;
}

std::size_t dtype_alignment(DType dtype) {
  if (dtype_is_complex(dtype))
    return dtype_size(dtype) / 2;
  return dtype == DType::string ? 1 : dtype_size(dtype);
}

bool dtype_is_integer(DType d) {
  switch (d) {
    case DType::int8:
    case DType::int16:
    case DType::int32:
    case DType::int64:
    case DType::uint8:
    case DType::uint16:
    case DType::uint32:
    case DType::uint64: return true;
    default: return false;
  }
}

bool dtype_is_unsigned(DType d) {
  return d == DType::uint8 || d == DType::uint16 || d == DType::uint32 || d == DType::uint64;
}

bool dtype_is_floating(DType d) {
  return d == DType::float16 || d == DType::bfloat16 || d == DType::float32 || d == DType::float64;
}

bool dtype_is_complex(DType d) { return d == DType::complex64 || d == DType::complex128; }

// ---------------------------------------------------------------- float16 / bfloat16

namespace {

uint32_t float_bits(float v) {
  uint32_t x;
  std::memcpy(&x, &v, sizeof x);
  return x;
}

float bits_float(uint32_t x) {
  float v;
  std::memcpy(&v, &x, sizeof v);
  return v;
}

} // namespace

float16 float16::from_float(float v) {
  const uint32_t x = float_bits(v);
  const auto sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  const uint32_t exp = (x >> 23) & 0xffu;
  uint32_t man = x & 0x7fffffu;
  if (exp == 0xff) { // inf, or NaN keeping the payload's top bits (and staying a NaN)
    if (man == 0)
      return from_bits(static_cast<uint16_t>(sign | 0x7c00u));
    const uint32_t m = man >> 13;
    return from_bits(static_cast<uint16_t>(sign | 0x7c00u | (m != 0 ? m : 0x200u)));
  }
  const int e = static_cast<int>(exp) - 127 + 15;
  if (e >= 31)
    return from_bits(static_cast<uint16_t>(sign | 0x7c00u));
  if (e <= 0) { // a float16 subnormal, or zero
    if (e < -10)
      return from_bits(sign);
    man |= 0x800000u;
    const auto shift = static_cast<uint32_t>(14 - e);
    uint32_t h = man >> shift;
    const uint32_t rem = man & ((1u << shift) - 1);
    const uint32_t halfway = 1u << (shift - 1);
    if (rem > halfway || (rem == halfway && (h & 1u)))
      ++h; // a carry into the exponent gives the smallest normal, as it should
    return from_bits(static_cast<uint16_t>(sign | h));
  }
  uint32_t h = (static_cast<uint32_t>(e) << 10) | (man >> 13);
  const uint32_t rem = man & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u)))
    ++h; // may carry up to the infinity pattern: right for values that round past the max
  return from_bits(static_cast<uint16_t>(sign | h));
}

float float16::to_float() const {
  const uint32_t sign = static_cast<uint32_t>(bits & 0x8000u) << 16;
  const uint32_t exp = (bits >> 10) & 0x1fu;
  uint32_t man = bits & 0x3ffu;
  if (exp == 0x1f)
    return bits_float(sign | 0x7f800000u | (man << 13));
  if (exp == 0) {
    if (man == 0)
      return bits_float(sign);
    int e = -14;
    while ((man & 0x400u) == 0) {
      man <<= 1;
      --e;
    }
    man &= 0x3ffu;
    return bits_float(sign | (static_cast<uint32_t>(e + 127) << 23) | (man << 13));
  }
  return bits_float(sign | ((exp - 15 + 127) << 23) | (man << 13));
}

bfloat16 bfloat16::from_float(float v) {
  const uint32_t x = float_bits(v);
  if (std::isnan(v)) { // truncate, keeping it a NaN even if the payload was in the low bits
    auto h = static_cast<uint16_t>(x >> 16);
    if ((h & 0x7fu) == 0)
      h |= 0x40u;
    return from_bits(h);
  }
  const uint32_t rounded = x + 0x7fffu + ((x >> 16) & 1u);
  return from_bits(static_cast<uint16_t>(rounded >> 16));
}

float bfloat16::to_float() const { return bits_float(static_cast<uint32_t>(bits) << 16); }

// ---------------------------------------------------------------- entry conversions

namespace {

template <class T>
T read(const Tensor& t, int64_t i) {
  return t.at<T>(i);
}

template <class T>
void write(Tensor& t, int64_t i, T v) {
  std::memcpy(t.mutable_data<unsigned char>() + static_cast<std::size_t>(i) * sizeof(T), &v,
              sizeof(T));
}

// An integer entry: wraps an integral source, saturates a floating one (NaN: 0).
template <class I>
I to_integer(const EntryValue& v) {
  const long double x = v.re;
  if (v.integral) {
    // Two's complement wrap: reduce through the 64-bit unsigned pattern of the exact value.
    const uint64_t bits =
      x < 0 ? static_cast<uint64_t>(static_cast<int64_t>(x)) : static_cast<uint64_t>(x);
    return static_cast<I>(bits);
  }
  if (std::isnan(x))
    return 0;
  if (x <= static_cast<long double>(std::numeric_limits<I>::min()))
    return std::numeric_limits<I>::min();
  if (x >= static_cast<long double>(std::numeric_limits<I>::max()))
    return std::numeric_limits<I>::max();
  return static_cast<I>(x);
}

} // namespace

EntryValue load_entry(const Tensor& t, int64_t i) {
  EntryValue v;
  v.integral = t.dtype() == DType::boolean || dtype_is_integer(t.dtype());
  switch (t.dtype()) {
    case DType::boolean: v.re = t.bytes()[static_cast<std::size_t>(i)] != 0 ? 1 : 0; break;
    case DType::int8: v.re = read<int8_t>(t, i); break;
    case DType::int16: v.re = read<int16_t>(t, i); break;
    case DType::int32: v.re = read<int32_t>(t, i); break;
    case DType::int64: v.re = static_cast<long double>(read<int64_t>(t, i)); break;
    case DType::uint8: v.re = read<uint8_t>(t, i); break;
    case DType::uint16: v.re = read<uint16_t>(t, i); break;
    case DType::uint32: v.re = read<uint32_t>(t, i); break;
    case DType::uint64: v.re = static_cast<long double>(read<uint64_t>(t, i)); break;
    case DType::float16: v.re = read<float16>(t, i).to_float(); break;
    case DType::bfloat16: v.re = read<bfloat16>(t, i).to_float(); break;
    case DType::float32: v.re = read<float>(t, i); break;
    case DType::float64: v.re = read<double>(t, i); break;
    case DType::complex64: {
      const auto c = read<std::complex<float>>(t, i);
      v.re = c.real();
      v.im = c.imag();
      break;
    }
    case DType::complex128: {
      const auto c = read<std::complex<double>>(t, i);
      v.re = c.real();
      v.im = c.imag();
      break;
    }
    case DType::string: break;
  }
  return v;
}

void store_entry(Tensor& t, int64_t i, const EntryValue& v) {
  switch (t.dtype()) {
    case DType::boolean: write<unsigned char>(t, i, v.re != 0 || v.im != 0 ? 1 : 0); break;
    case DType::int8: write(t, i, to_integer<int8_t>(v)); break;
    case DType::int16: write(t, i, to_integer<int16_t>(v)); break;
    case DType::int32: write(t, i, to_integer<int32_t>(v)); break;
    case DType::int64: write(t, i, to_integer<int64_t>(v)); break;
    case DType::uint8: write(t, i, to_integer<uint8_t>(v)); break;
    case DType::uint16: write(t, i, to_integer<uint16_t>(v)); break;
    case DType::uint32: write(t, i, to_integer<uint32_t>(v)); break;
    case DType::uint64: write(t, i, to_integer<uint64_t>(v)); break;
    case DType::float16: write(t, i, float16::from_float(static_cast<float>(v.re))); break;
    case DType::bfloat16: write(t, i, bfloat16::from_float(static_cast<float>(v.re))); break;
    case DType::float32: write(t, i, static_cast<float>(v.re)); break;
    case DType::float64: write(t, i, static_cast<double>(v.re)); break;
    case DType::complex64:
      write(t, i, std::complex<float>(static_cast<float>(v.re), static_cast<float>(v.im)));
      break;
    case DType::complex128:
      write(t, i, std::complex<double>(static_cast<double>(v.re), static_cast<double>(v.im)));
      break;
    case DType::string: break;
  }
}

Expected<Tensor> cast_tensor(const Tensor& t, DType to, const std::string& what) {
  if (t.dtype() == DType::string || to == DType::string)
    return invalid_argument(what + ": cannot cast " + dtype_name(t.dtype()) + " to " +
                            dtype_name(to) + " (casts convert between numeric and bool dtypes)");
  if (t.dtype() == to)
    return t;
  Tensor out{to, t.shape()};
  for (int64_t i = 0, n = t.num_elements(); i < n; ++i)
    store_entry(out, i, load_entry(t, i));
  return out;
}

} // namespace conveyor
