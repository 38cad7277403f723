// Shared helpers for the codec tests: sample tensors of every dtype and rank.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "pipeline/tensor/codec.hpp"

namespace conveyor::test {

inline int64_t entries_of(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

// A tensor whose entries all differ (where the dtype allows), so that a reordering shows.
inline Tensor sample_tensor(DType dtype, const Shape& shape) {
  const int64_t n = entries_of(shape);
  switch (dtype) {
    case DType::boolean: {
      std::vector<bool> v;
      for (int64_t i = 0; i < n; ++i)
        v.push_back(i % 3 == 1);
      return *Tensor::from_values<bool>(shape, v);
    }
    case DType::int32: {
      std::vector<int32_t> v;
      for (int64_t i = 0; i < n; ++i)
        v.push_back(static_cast<int32_t>(i * 7919 - 100000));
      return *Tensor::from_values<int32_t>(shape, v);
    }
    case DType::int64: {
      std::vector<int64_t> v;
      for (int64_t i = 0; i < n; ++i)
        v.push_back(i * 1000000007LL - (int64_t{1} << 40));
      return *Tensor::from_values<int64_t>(shape, v);
    }
    case DType::float32: {
      std::vector<float> v;
      for (int64_t i = 0; i < n; ++i)
        v.push_back(static_cast<float>(i) * 0.25f - 3.5f);
      return *Tensor::from_values<float>(shape, v);
    }
    case DType::float64: {
      std::vector<double> v;
      for (int64_t i = 0; i < n; ++i)
        v.push_back(static_cast<double>(i) / 3.0 - 1e300 * (i % 2));
      return *Tensor::from_values<double>(shape, v);
    }
    case DType::string: {
      std::vector<std::string> v;
      for (int64_t i = 0; i < n; ++i)
        v.push_back(std::string(static_cast<std::size_t>(i % 5), static_cast<char>('a' + i % 26)) +
                    std::string("\0x", 2));
      return *Tensor::from_values<std::string>(shape, v);
    }
    default: { // the later dtypes: distinct byte patterns (any pattern is a valid entry)
      Tensor t{dtype, shape};
      auto& bytes = t.mutable_bytes();
      for (std::size_t i = 0; i < bytes.size(); ++i)
        bytes[i] = static_cast<unsigned char>(i * 37 + 11);
      return t;
    }
  }
}

inline const std::vector<DType>& all_dtypes() {
  static const std::vector<DType> d(kAllDTypes.begin(), kAllDTypes.end());
  return d;
}

inline const std::vector<Shape>& sample_shapes() {
  static const std::vector<Shape> s{{},           {1}, {5},    {2, 3},   {3, 1, 4},
                                    {2, 2, 2, 2}, {0}, {3, 0}, {0, 4, 5}};
  return s;
}

} // namespace conveyor::test
