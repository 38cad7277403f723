// Tensor construction, scalar conversion, slicing and stacking (to_string lives in
// tensor_format.cpp).
#include "pipeline/tensor.hpp"

#include <algorithm>
#include <cassert>

namespace conveyor {

namespace {

// "(2, 3)", "(4,)" or "()" — Python's tuple spelling, as tf.TensorShape prints.
std::string shape_string(const Shape& shape) {
  std::string out = "(";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i > 0)
      out += ", ";
    out += std::to_string(shape[i]);
  }
  if (shape.size() == 1)
    out += ",";
  return out + ")";
}

template <class T>
Tensor make_scalar(T v) {
  Tensor t{dtype_of<T>::value, Shape{}};
  std::memcpy(t.mutable_bytes().data(), &v, sizeof(T));
  return t;
}

} // namespace

const char* dtype_name(DType dtype) {
  switch (dtype) {
    case DType::boolean: return "bool";
    case DType::int32: return "int32";
    case DType::int64: return "int64";
    case DType::float32: return "float32";
    case DType::float64: return "float64";
    case DType::string: return "string";
  }
  return "unknown";
}

std::optional<DType> dtype_from_name(std::string_view name) {
  for (DType d : {DType::boolean, DType::int32, DType::int64, DType::float32, DType::float64, DType::string})
    if (name == dtype_name(d))
      return d;
  return std::nullopt;
}

std::size_t dtype_size(DType dtype) {
  switch (dtype) {
    case DType::boolean: return 1;
    case DType::int32: return 4;
    case DType::int64: return 8;
    case DType::float32: return 4;
    case DType::float64: return 8;
    case DType::string: return 0;
  }
  return 0;
}

Tensor::Tensor() : Tensor(DType::int64, Shape{}) {}

Tensor::Tensor(DType dtype, Shape shape) : dtype_(dtype), shape_(std::move(shape)) {
  // A negative dimension is a caller bug; it holds no entries rather than a huge allocation.
  assert(std::all_of(shape_.begin(), shape_.end(), [](int64_t d) { return d >= 0; }));
  const auto n = static_cast<std::size_t>(num_elements());
  if (dtype_ == DType::string)
    strings_.resize(n);
  else
    bytes_.resize(n * dtype_size(dtype_));
}

Tensor Tensor::scalar(bool v) {
  Tensor t{DType::boolean, Shape{}};
  t.bytes_[0] = v ? 1 : 0;
  return t;
}
Tensor Tensor::scalar(int32_t v) { return make_scalar(v); }
Tensor Tensor::scalar(int64_t v) { return make_scalar(v); }
Tensor Tensor::scalar(float v) { return make_scalar(v); }
Tensor Tensor::scalar(double v) { return make_scalar(v); }
Tensor Tensor::scalar(std::string v) {
  Tensor t{DType::string, Shape{}};
  t.strings_[0] = std::move(v);
  return t;
}

int64_t Tensor::num_elements() const {
  int64_t n = 1;
  for (int64_t d : shape_)
    n *= std::max<int64_t>(d, 0);
  return n;
}

int64_t Tensor::as_int64() const {
  assert(num_elements() == 1 && dtype_ != DType::string);
  switch (dtype_) {
    case DType::boolean: return bytes_[0] != 0 ? 1 : 0;
    case DType::int32: return at<int32_t>(0);
    case DType::int64: return at<int64_t>(0);
    case DType::float32: return static_cast<int64_t>(at<float>(0));
    case DType::float64: return static_cast<int64_t>(at<double>(0));
    case DType::string: break;
  }
  return 0;
}

double Tensor::as_double() const {
  assert(num_elements() == 1 && dtype_ != DType::string);
  switch (dtype_) {
    case DType::boolean: return bytes_[0] != 0 ? 1.0 : 0.0;
    case DType::int32: return at<int32_t>(0);
    case DType::int64: return static_cast<double>(at<int64_t>(0));
    case DType::float32: return at<float>(0);
    case DType::float64: return at<double>(0);
    case DType::string: break;
  }
  return 0.0;
}

Tensor Tensor::slice(int64_t i) const {
  assert(rank() >= 1 && i >= 0 && i < shape_[0]);
  Tensor out{dtype_, Shape(shape_.begin() + 1, shape_.end())};
  const int64_t per_row = out.num_elements();
  if (dtype_ == DType::string) {
    auto first = strings_.begin() + i * per_row;
    std::copy(first, first + per_row, out.strings_.begin());
  } else {
    const std::size_t row_bytes = static_cast<std::size_t>(per_row) * dtype_size(dtype_);
    if (row_bytes > 0)
      std::memcpy(out.bytes_.data(), bytes_.data() + i * row_bytes, row_bytes);
  }
  return out;
}

Expected<Tensor> Tensor::stack(const std::vector<Tensor>& parts) {
  if (parts.empty())
    return invalid_argument("stack: needs at least one tensor, got none");
  const Tensor& first = parts.front();
  for (std::size_t i = 1; i < parts.size(); ++i) {
    if (parts[i].dtype_ != first.dtype_ || parts[i].shape_ != first.shape_)
      return invalid_argument("stack: tensor " + std::to_string(i) + " has dtype " +
                              dtype_name(parts[i].dtype_) + " and shape " + shape_string(parts[i].shape_) +
                              ", expected dtype " + dtype_name(first.dtype_) + " and shape " +
                              shape_string(first.shape_) + " like tensor 0");
  }
  Shape shape;
  shape.reserve(first.shape_.size() + 1);
  shape.push_back(static_cast<int64_t>(parts.size()));
  shape.insert(shape.end(), first.shape_.begin(), first.shape_.end());
  Tensor out{first.dtype_, std::move(shape)};
  if (first.dtype_ == DType::string) {
    auto dst = out.strings_.begin();
    for (const Tensor& p : parts)
      dst = std::copy(p.strings_.begin(), p.strings_.end(), dst);
  } else {
    unsigned char* dst = out.bytes_.data();
    for (const Tensor& p : parts) {
      if (!p.bytes_.empty())
        std::memcpy(dst, p.bytes_.data(), p.bytes_.size());
      dst += p.bytes_.size();
    }
  }
  return out;
}

std::size_t Tensor::byte_size() const {
  if (dtype_ != DType::string)
    return bytes_.size();
  std::size_t n = 0;
  for (const auto& s : strings_)
    n += s.size();
  return n;
}

} // namespace conveyor
