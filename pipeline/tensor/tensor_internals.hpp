// What decoders inside pipeline/ may do to a Tensor that users may not: take storage whose bytes
// are not initialized yet. Not installed; every caller overwrites all the bytes before the tensor
// leaves it, so no user ever sees them.
#pragma once

#include <cassert>

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
  // The same for a scalar (the default Tensor's shape), inline: the snapshot reader's fast path
  // makes one per element.
  static void make_scalar_string_view(Tensor& t, const StorageOwner& owner,
                                      std::string_view string) {
    assert(t.mode_ == Tensor::Mode::inline_bytes && !t.keep_ && t.shape_.empty()); // a default
    t.dtype_ = DType::string;
    t.mode_ = Tensor::Mode::viewed_string;
    t.inline_size_ = 0;
    t.keep_ = owner;
    t.view_data_ = reinterpret_cast<const unsigned char*>(string.data());
    t.view_size_ = string.size();
  }
};

} // namespace conveyor
