// Tensor: a dtype, a shape and contiguous storage — the unit of data inside an Element.
// Numeric tensors keep their values in one little-endian byte vector (row-major);
// string tensors keep one std::string per entry (row-major).
#pragma once

#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "pipeline/status.hpp"

namespace conveyor {

enum class DType : unsigned char { boolean = 0, int32, int64, float32, float64, string };

// "bool", "int32", "int64", "float32", "float64", "string" (tf.data's names).
const char* dtype_name(DType dtype);
std::optional<DType> dtype_from_name(std::string_view name);
// Bytes per entry; 0 for string.
std::size_t dtype_size(DType dtype);

// Maps a C++ type to its DType: bool, int32_t, int64_t, float, double, std::string.
template <class T> struct dtype_of;
template <> struct dtype_of<bool> { static constexpr DType value = DType::boolean; };
template <> struct dtype_of<int32_t> { static constexpr DType value = DType::int32; };
template <> struct dtype_of<int64_t> { static constexpr DType value = DType::int64; };
template <> struct dtype_of<float> { static constexpr DType value = DType::float32; };
template <> struct dtype_of<double> { static constexpr DType value = DType::float64; };
template <> struct dtype_of<std::string> { static constexpr DType value = DType::string; };

using Shape = std::vector<int64_t>; // fully known dimensions of a concrete tensor

class Tensor {
public:
  // A scalar int64 zero.
  Tensor();
  // Zero-filled (or empty strings) tensor of the given dtype and shape.
  Tensor(DType dtype, Shape shape);

  // Scalars.
  static Tensor scalar(bool v);
  static Tensor scalar(int32_t v);
  static Tensor scalar(int64_t v);
  static Tensor scalar(float v);
  static Tensor scalar(double v);
  static Tensor scalar(std::string v);
  static Tensor scalar(const char* v) { return scalar(std::string{v}); }

  // A tensor of the given shape from row-major values; values.size() must equal the
  // product of shape (checked: returns invalid_argument otherwise).
  template <class T>
  static Expected<Tensor> from_values(Shape shape, const std::vector<T>& values);
  // A rank-1 tensor.
  template <class T>
  static Tensor vector(const std::vector<T>& values) {
    return std::move(from_values<T>(Shape{static_cast<int64_t>(values.size())}, values)).value();
  }

  DType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  int rank() const { return static_cast<int>(shape_.size()); }
  int64_t num_elements() const; // product of the shape (1 for a scalar)

  // Numeric access (T must match dtype(); bool is stored as one byte per entry).
  template <class T> const T* data() const { return reinterpret_cast<const T*>(bytes_.data()); }
  template <class T> T* mutable_data() { return reinterpret_cast<T*>(bytes_.data()); }
  template <class T> T at(int64_t flat_index) const {
    T v;
    std::memcpy(&v, bytes_.data() + flat_index * sizeof(T), sizeof(T));
    return v;
  }
  // Raw numeric storage (empty for string tensors).
  const std::vector<unsigned char>& bytes() const { return bytes_; }
  std::vector<unsigned char>& mutable_bytes() { return bytes_; }

  // String access (dtype() == string).
  const std::vector<std::string>& strings() const { return strings_; }
  std::vector<std::string>& mutable_strings() { return strings_; }

  // The scalar's value as int64 / double, converting any numeric or bool dtype.
  // Precondition: num_elements() == 1 and dtype() != string.
  int64_t as_int64() const;
  double as_double() const;

  // The i-th sub-tensor along dimension 0 (rank must be >= 1, 0 <= i < shape[0]).
  Tensor slice(int64_t i) const;
  // Stacks equal-dtype, equal-shape tensors along a new leading dimension.
  static Expected<Tensor> stack(const std::vector<Tensor>& parts);

  // Bytes of payload (numeric bytes, or the sum of string sizes).
  std::size_t byte_size() const;

  // Literal in the pipeline text form: 3, 2.5, true, "a\"b", [[1, 2], [3, 4]];
  // non-default dtypes are wrapped in a cast so that parsing gives back the same tensor:
  // int32([1, 2]), float64(0.5). (int64 and float32 are the literal defaults, like tf.constant.)
  std::string to_string() const;

  friend bool operator==(const Tensor& a, const Tensor& b) {
    return a.dtype_ == b.dtype_ && a.shape_ == b.shape_ && a.bytes_ == b.bytes_ &&
           a.strings_ == b.strings_;
  }
  friend bool operator!=(const Tensor& a, const Tensor& b) { return !(a == b); }

private:
  DType dtype_ = DType::int64;
  Shape shape_;
  std::vector<unsigned char> bytes_;
  std::vector<std::string> strings_;
};

template <class T>
Expected<Tensor> Tensor::from_values(Shape shape, const std::vector<T>& values) {
  Tensor t{dtype_of<T>::value, std::move(shape)};
  if (static_cast<int64_t>(values.size()) != t.num_elements())
    return invalid_argument("tensor of shape with " + std::to_string(t.num_elements()) +
                            " entries cannot take " + std::to_string(values.size()) + " values");
  if constexpr (std::is_same_v<T, std::string>) {
    t.strings_ = values;
  } else if constexpr (std::is_same_v<T, bool>) {
    for (std::size_t i = 0; i < values.size(); ++i)
      t.bytes_[i] = values[i] ? 1 : 0;
  } else {
    if (!values.empty())
      std::memcpy(t.bytes_.data(), values.data(), values.size() * sizeof(T));
  }
  return t;
}

} // namespace conveyor
