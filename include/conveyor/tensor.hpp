// Tensor: a dtype, a shape and contiguous storage — the unit of data inside an Element.
// Numeric tensors keep their values as little-endian bytes (row-major); string tensors keep one
// string per entry (row-major). Storage is shared and immutable once produced (see Tensor).
#pragma once

#include <atomic>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "conveyor/dtype.hpp"
#include "conveyor/status.hpp"

namespace conveyor {

using Shape = std::vector<int64_t>; // fully known dimensions of a concrete tensor

// A read-only view of a numeric tensor's bytes (what Tensor::bytes() returns). It reads like
// the `const std::vector<unsigned char>&` it replaces: data(), size(), empty(), [], iteration,
// comparison; to_vector() copies.
class ByteView {
public:
  ByteView() = default;
  ByteView(const unsigned char* data, std::size_t size) : data_(data), size_(size) {}
  const unsigned char* data() const { return data_; }
  std::size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  const unsigned char* begin() const { return data_; }
  const unsigned char* end() const { return data_ + size_; }
  unsigned char operator[](std::size_t i) const { return data_[i]; }
  std::vector<unsigned char> to_vector() const { return {begin(), end()}; }
  friend bool operator==(const ByteView& a, const ByteView& b) {
    return a.size_ == b.size_ && (a.size_ == 0 || std::memcmp(a.data_, b.data_, a.size_) == 0);
  }
  friend bool operator!=(const ByteView& a, const ByteView& b) { return !(a == b); }
  friend bool operator==(const ByteView& a, const std::vector<unsigned char>& b) {
    return a == ByteView{b.data(), b.size()};
  }

private:
  const unsigned char* data_ = nullptr;
  std::size_t size_ = 0;
};

// Keeps the storage a tensor views alive (a received frame, a decompressed body, another
// tensor's storage). Anything owned by a shared_ptr will do (aliasing, like TF's TensorBuffer root).
using StorageOwner = std::shared_ptr<const void>;

// A tensor's storage is shared and immutable once produced (as TF's TensorBuffer): copying a
// Tensor, slicing it along dimension 0 and caching it share the bytes instead of copying them,
// and a decoded tensor can view the received buffer it came in. Writing through a mutable_*
// accessor copies first when the storage is shared (copy on write), so a tensor never changes
// under another one. Numeric tensors of at most kInlineBytes bytes live inline (no allocation).
class Tensor {
public:
  static constexpr std::size_t kInlineBytes = 16;

  // A scalar int64 zero.
  Tensor();
  // Zero-filled (or empty strings) tensor of the given dtype and shape.
  Tensor(DType dtype, Shape shape);

  // Copies share the storage. Written out because a one-string view builds its strings() cache
  // lazily in a const call: the copy reads that pointer atomically, as strings() writes it.
  Tensor(const Tensor& other);
  Tensor& operator=(const Tensor& other);
  Tensor(Tensor&&) noexcept = default;
  Tensor& operator=(Tensor&&) noexcept = default;
  ~Tensor() = default;

  // Scalars.
  static Tensor scalar(bool v);
  static Tensor scalar(int8_t v);
  static Tensor scalar(int16_t v);
  static Tensor scalar(int32_t v);
  static Tensor scalar(int64_t v);
  static Tensor scalar(uint8_t v);
  static Tensor scalar(uint16_t v);
  static Tensor scalar(uint32_t v);
  static Tensor scalar(uint64_t v);
  static Tensor scalar(float16 v);
  static Tensor scalar(bfloat16 v);
  static Tensor scalar(float v);
  static Tensor scalar(double v);
  static Tensor scalar(std::complex<float> v);
  static Tensor scalar(std::complex<double> v);
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

  // Zero-copy construction over storage someone else owns. `owner` keeps [data, data + size)
  // alive and unchanged for as long as any tensor views it. A numeric view must be aligned to
  // its dtype's size and hold exactly num_elements x dtype_size bytes (asserted; the codec
  // checks it before calling). The strings of a string view are the given ranges.
  static Tensor numeric_view(DType dtype, Shape shape, StorageOwner owner,
                             const unsigned char* data, std::size_t size);
  static Tensor string_view_of(Shape shape, StorageOwner owner,
                               std::vector<std::string_view> strings);
  // A string view with exactly one entry (the shape's product must be 1: a scalar, [1], ...):
  // the common scalar-bytes element (a snapshot or TFRecord record, an encoded image) held
  // without allocating, its one view inline in the tensor.
  static Tensor single_string_view(Shape shape, StorageOwner owner, std::string_view string);

  DType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  int rank() const { return static_cast<int>(shape_.size()); }
  int64_t num_elements() const; // product of the shape (1 for a scalar)

  // Numeric access (T must match dtype(), as dtype_of<T> names it; bool is stored as one byte
  // per entry, float16 and bfloat16 as their 16-bit patterns).
  template <class T>
  const T* data() const {
    return reinterpret_cast<const T*>(raw());
  }
  template <class T>
  T* mutable_data() {
    return reinterpret_cast<T*>(mutable_raw());
  }
  template <class T>
  T at(int64_t flat_index) const {
    T v;
    std::memcpy(&v, raw() + flat_index * sizeof(T), sizeof(T));
    return v;
  }
  // Raw numeric storage (empty for string tensors).
  ByteView bytes() const { return ByteView{raw(), raw_size()}; }
  // Writable numeric storage (unshared first). Prefer mutable_data<T>(): this one moves inline
  // storage to the heap. Resizing the vector is not allowed.
  std::vector<unsigned char>& mutable_bytes();

  // String access (dtype() == string). string_at() never copies; strings() of a tensor that
  // views a received buffer builds the std::string vector once, on first use.
  std::string_view string_at(int64_t flat_index) const;
  const std::vector<std::string>& strings() const;
  std::vector<std::string>& mutable_strings();

  // Whether this tensor's storage is shared with another tensor or a received buffer.
  bool shares_storage() const;
  // What keeps bytes() (or the strings' bytes) alive and unchanged while held: it shares the
  // storage, so that a later write through a mutable_* accessor copies first. Null for inline
  // storage.
  StorageOwner storage_owner() const;

  // The scalar's value as int64 / double, converting any numeric or bool dtype (a complex one
  // gives its real part). Precondition: num_elements() == 1 and dtype() != string.
  int64_t as_int64() const;
  double as_double() const;

  // The i-th sub-tensor along dimension 0 (rank must be >= 1, 0 <= i < shape[0]). Numeric
  // slices share this tensor's storage (no copy).
  Tensor slice(int64_t i) const;
  // Stacks equal-dtype, equal-shape tensors along a new leading dimension.
  static Expected<Tensor> stack(const std::vector<Tensor>& parts);

  // Bytes of payload (numeric bytes, or the sum of string sizes).
  std::size_t byte_size() const;

  // Literal in the pipeline text form: 3, 2.5, true, "a\"b", [[1, 2], [3, 4]];
  // non-default dtypes are wrapped in a cast so that parsing gives back the same tensor:
  // int32([1, 2]), float64(0.5), complex64([complex(1.0, -2.0)]). (int64 and float32 are the
  // literal defaults, like tf.constant.)
  std::string to_string() const;

  friend bool operator==(const Tensor& a, const Tensor& b);
  friend bool operator!=(const Tensor& a, const Tensor& b) { return !(a == b); }

private:
  friend struct TensorInternals; // uninitialized storage for decoders (pipeline/tensor/)
  struct StringViews; // a string tensor over someone else's storage (defined in tensor.cpp)
  enum class Mode : unsigned char {
    inline_bytes,
    owned_bytes,
    owned_raw, // numeric bytes this tensor allocated uninitialized (keep_), filled by a decoder
    viewed_bytes,
    owned_strings,
    viewed_strings,
    viewed_string // one string view: view_data_/view_size_, owner in keep_
  };

  const unsigned char* raw() const;
  std::size_t raw_size() const;
  std::string_view single_view() const { // viewed_string's one entry
    return {reinterpret_cast<const char*>(view_data_), view_size_};
  }
  unsigned char* mutable_raw();
  void allocate(std::size_t bytes); // zero-filled numeric storage

  DType dtype_ = DType::int64;
  Mode mode_ = Mode::inline_bytes;
  unsigned char inline_size_ = 0;
  alignas(8) unsigned char inline_[kInlineBytes] = {}; // int64/double/complex read in place
  Shape shape_;
  std::shared_ptr<std::vector<unsigned char>> owned_; // owned_bytes
  StorageOwner keep_;                                 // owned_raw / viewed_bytes / viewed_string(s)
  const unsigned char* view_data_ = nullptr;          // owned_raw / viewed_bytes / viewed_string
  std::size_t view_size_ = 0;
  std::shared_ptr<std::vector<std::string>> strings_; // owned_strings
  // viewed_strings: the views, set once at construction. viewed_string: null until strings()
  // builds its cache, which it publishes with an atomic compare-exchange (hence mutable).
  mutable std::shared_ptr<StringViews> views_;
};

inline Tensor::Tensor(const Tensor& other)
  : dtype_(other.dtype_), mode_(other.mode_), inline_size_(other.inline_size_),
    shape_(other.shape_), owned_(other.owned_), keep_(other.keep_), view_data_(other.view_data_),
    view_size_(other.view_size_), strings_(other.strings_),
    views_(other.mode_ == Mode::viewed_string ? std::atomic_load(&other.views_) : other.views_) {
  std::memcpy(inline_, other.inline_, sizeof inline_);
}

inline Tensor& Tensor::operator=(const Tensor& other) {
  if (this != &other)
    *this = Tensor(other);
  return *this;
}

template <class T>
Expected<Tensor> Tensor::from_values(Shape shape, const std::vector<T>& values) {
  Tensor t{dtype_of<T>::value, std::move(shape)};
  if (static_cast<int64_t>(values.size()) != t.num_elements())
    return invalid_argument("tensor of shape with " + std::to_string(t.num_elements()) +
                            " entries cannot take " + std::to_string(values.size()) + " values");
  if constexpr (std::is_same_v<T, std::string>) {
    t.mutable_strings() = values;
  } else if constexpr (std::is_same_v<T, bool>) {
    unsigned char* p = t.mutable_raw();
    for (std::size_t i = 0; i < values.size(); ++i)
      p[i] = values[i] ? 1 : 0;
  } else {
    if (!values.empty())
      std::memcpy(t.mutable_raw(), values.data(), values.size() * sizeof(T));
  }
  return t;
}

} // namespace conveyor
