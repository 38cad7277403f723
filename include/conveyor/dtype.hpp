// DType: the element types a tensor can hold (tf.data's and numpy's), and the C++ types that
// stand for them. float16 and bfloat16 have no C++17 type: a tensor carries their raw 16-bit
// patterns, and conveyor::float16 / conveyor::bfloat16 below are those patterns with conversions
// to and from float.
#pragma once

#include <array>
#include <complex>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace conveyor {

// The numbers are the codec's dtype byte (pipeline/tensor/codec.cpp) and the graph format's:
// new dtypes are appended so that the existing ones keep theirs.
enum class DType : unsigned char {
  boolean = 0,
  int32,
  int64,
  float32,
  float64,
  string,
  int8,
  int16,
  uint8,
  uint16,
  uint32,
  uint64,
  float16,
  bfloat16,
  complex64,
  complex128,
};
inline constexpr std::size_t kNumDTypes = 16;
// Every dtype, in the order of their codes.
inline constexpr std::array<DType, kNumDTypes> kAllDTypes = {
  DType::boolean, DType::int32,    DType::int64,     DType::float32,
  DType::float64, DType::string,   DType::int8,      DType::int16,
  DType::uint8,   DType::uint16,   DType::uint32,    DType::uint64,
  DType::float16, DType::bfloat16, DType::complex64, DType::complex128};

// tf.data's names: "bool", "int8" ... "uint64", "float16", "bfloat16", "float32", "float64",
// "complex64", "complex128", "string".
const char* dtype_name(DType dtype);
std::optional<DType> dtype_from_name(std::string_view name);
// The dtype a codec byte stands for; nullopt for a byte no dtype has (a newer peer's, or garbage).
std::optional<DType> dtype_from_code(unsigned code);
// "bool, int8, ..., string": every name, for error messages.
std::string dtype_names();
// Bytes per entry; 0 for string.
std::size_t dtype_size(DType dtype);
// The alignment a view of a tensor's bytes needs (a complex entry is two floats or doubles).
std::size_t dtype_alignment(DType dtype);

bool dtype_is_integer(DType dtype);  // int8..int64, uint8..uint64 (not bool)
bool dtype_is_unsigned(DType dtype); // uint8..uint64
bool dtype_is_floating(DType dtype); // float16, bfloat16, float32, float64
bool dtype_is_complex(DType dtype);  // complex64, complex128

// IEEE 754 binary16 (numpy float16, torch.float16) as its raw bits. from_float rounds to
// nearest even; NaN payloads survive a to_float/from_float round trip where float16 can hold them.
struct float16 {
  uint16_t bits = 0;
  static float16 from_bits(uint16_t b) { return float16{b}; }
  static float16 from_float(float v);
  float to_float() const;
};

// bfloat16 (the upper half of a float32: 8 exponent bits, 7 mantissa bits; torch.bfloat16,
// tf.bfloat16) as its raw bits. from_float rounds to nearest even and keeps NaN a NaN.
struct bfloat16 {
  uint16_t bits = 0;
  static bfloat16 from_bits(uint16_t b) { return bfloat16{b}; }
  static bfloat16 from_float(float v);
  float to_float() const;
};

// Maps a C++ type to its DType: bool, int8_t..int64_t, uint8_t..uint64_t, float16, bfloat16,
// float, double, std::complex<float>, std::complex<double>, std::string.
template <class T>
struct dtype_of;
#define CONVEYOR_DTYPE_OF(T, D)                                                                    \
  template <>                                                                                      \
  struct dtype_of<T> {                                                                             \
    static constexpr DType value = DType::D;                                                       \
  }
CONVEYOR_DTYPE_OF(bool, boolean);
CONVEYOR_DTYPE_OF(int8_t, int8);
CONVEYOR_DTYPE_OF(int16_t, int16);
CONVEYOR_DTYPE_OF(int32_t, int32);
CONVEYOR_DTYPE_OF(int64_t, int64);
CONVEYOR_DTYPE_OF(uint8_t, uint8);
CONVEYOR_DTYPE_OF(uint16_t, uint16);
CONVEYOR_DTYPE_OF(uint32_t, uint32);
CONVEYOR_DTYPE_OF(uint64_t, uint64);
CONVEYOR_DTYPE_OF(float16, float16);
CONVEYOR_DTYPE_OF(bfloat16, bfloat16);
CONVEYOR_DTYPE_OF(float, float32);
CONVEYOR_DTYPE_OF(double, float64);
CONVEYOR_DTYPE_OF(std::complex<float>, complex64);
CONVEYOR_DTYPE_OF(std::complex<double>, complex128);
CONVEYOR_DTYPE_OF(std::string, string);
#undef CONVEYOR_DTYPE_OF

} // namespace conveyor
