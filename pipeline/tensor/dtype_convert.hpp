// Reading and writing one entry of a numeric tensor of any dtype through one wide value, and
// tf.cast built on them. Kernels and functions that do arithmetic or convert use these instead
// of a switch over every dtype of their own.
#pragma once

#include <cstdint>

#include "pipeline/runtime/status.hpp"
#include "pipeline/tensor/tensor.hpp"

namespace conveyor {

// One entry, widened so that no dtype loses a value: long double holds every int64, uint64 and
// double exactly (x86-64's 64-bit mantissa). `integral` says the source was bool or an integer
// (tf.cast wraps those into a narrower integer; floats saturate).
struct EntryValue {
  long double re = 0;
  long double im = 0;
  bool integral = false;
};

// Entry i of a numeric or bool tensor (not string).
EntryValue load_entry(const Tensor& t, int64_t i);
// Writes entry i of a numeric or bool tensor (not string) with tf.cast's conversions: complex
// to real drops the imaginary part; real to complex has a zero imaginary part; to bool is
// "!= 0"; an integer into a narrower integer wraps (two's complement); a float into an integer
// truncates toward zero, saturates at the integer's range and NaN becomes 0; to float16 and
// bfloat16 rounds to nearest even.
void store_entry(Tensor& t, int64_t i, const EntryValue& v);

// tf.cast(t, to): a tensor of dtype `to` and t's shape. A string tensor, or a cast to string,
// is invalid_argument naming `what` (tf.cast has no string conversions either).
Expected<Tensor> cast_tensor(const Tensor& t, DType to, const std::string& what);

} // namespace conveyor
