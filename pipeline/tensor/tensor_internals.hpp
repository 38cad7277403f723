// What decoders inside pipeline/ may do to a Tensor that users may not: take storage whose bytes
// are not initialized yet. Not installed; every caller overwrites all the bytes before the tensor
// leaves it, so no user ever sees them.
#pragma once

#include "conveyor/tensor.hpp"

namespace conveyor {

struct TensorInternals {
  // A numeric tensor (dtype != string) of `shape` whose bytes are uninitialized, unshared and
  // writable through mutable_data<T>() in place (inline ones, up to Tensor::kInlineBytes, are
  // zeroed). Saves the zero-fill of Tensor(dtype, shape) where the caller overwrites every byte.
  static Tensor uninitialized(DType dtype, Shape shape);
  // Makes `t`, a default Tensor, Tensor::single_string_view(shape, owner, string) in place: a
  // decoder fills the tensor it put in the element instead of moving a built one in.
  static void make_single_string_view(Tensor& t, Shape shape, const StorageOwner& owner,
                                      std::string_view string);
};

} // namespace conveyor
