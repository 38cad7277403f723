// Tensor construction, scalar conversion, slicing and stacking (to_string lives in
// tensor_format.cpp).
#include "pipeline/tensor/tensor.hpp"

#include "pipeline/tensor/dtype_convert.hpp"
#include "pipeline/tensor/shared_arena.hpp"
#include "pipeline/tensor/tensor_internals.hpp"

#include <algorithm>
#include <cassert>
#include <mutex>
#include <utility>

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
  std::memcpy(t.template mutable_data<T>(), &v, sizeof(T));
  return t;
}

} // namespace

struct Tensor::StringViews {
  std::vector<std::string_view> views;
  std::size_t total = 0;
  std::once_flag once;
  std::vector<std::string> materialized; // built by strings() on first use
};

// The int64 scalar 0 (dtype, mode and zeroed inline bytes are the members' defaults): no call
// through allocate(), since decoders start every tensor they build from this.
Tensor::Tensor() : inline_size_(sizeof(int64_t)) {}

Tensor::Tensor(DType dtype, Shape shape) : dtype_(dtype), shape_(std::move(shape)) {
  // A negative dimension is a caller bug; it holds no entries rather than a huge allocation.
  assert(std::all_of(shape_.begin(), shape_.end(), [](int64_t d) { return d >= 0; }));
  const auto n = static_cast<std::size_t>(num_elements());
  if (dtype_ == DType::string) {
    mode_ = Mode::owned_strings;
    strings_ = std::make_shared<std::vector<std::string>>(n);
  } else {
    allocate(n * dtype_size(dtype_));
  }
}

void Tensor::allocate(std::size_t bytes) {
  if (bytes <= kInlineBytes) {
    mode_ = Mode::inline_bytes;
    inline_size_ = static_cast<unsigned char>(bytes);
    std::memset(inline_, 0, sizeof inline_);
    owned_.reset();
  } else {
    mode_ = Mode::owned_bytes;
    owned_ = std::make_shared<std::vector<unsigned char>>(bytes);
  }
  keep_.reset();
  view_data_ = nullptr;
  view_size_ = 0;
}

Tensor Tensor::numeric_view(DType dtype, Shape shape, StorageOwner owner, const unsigned char* data,
                            std::size_t size) {
  assert(dtype != DType::string);
  Tensor t;
  t.dtype_ = dtype;
  t.shape_ = std::move(shape);
  assert(static_cast<std::size_t>(t.num_elements()) * dtype_size(dtype) == size);
  assert(reinterpret_cast<std::uintptr_t>(data) % dtype_alignment(dtype) == 0);
  if (size <= kInlineBytes) { // small: inline is cheaper than holding the owner
    t.inline_size_ = static_cast<unsigned char>(size);
    if (size > 0)
      std::memcpy(t.inline_, data, size);
    return t;
  }
  t.mode_ = Mode::viewed_bytes;
  t.keep_ = std::move(owner);
  t.view_data_ = data;
  t.view_size_ = size;
  return t;
}

Tensor Tensor::single_string_view(Shape shape, StorageOwner owner, std::string_view string) {
  Tensor t;
  TensorInternals::make_single_string_view(t, std::move(shape), owner, string);
  return t;
}

void TensorInternals::make_single_string_view(Tensor& t, Shape shape, const StorageOwner& owner,
                                              std::string_view string) {
  make_scalar_string_view(t, owner, string);
  t.shape_ = std::move(shape);
  assert(t.num_elements() == 1);
}

Tensor Tensor::string_view_of(Shape shape, StorageOwner owner,
                              std::vector<std::string_view> strings) {
  if (strings.size() == 1)
    return single_string_view(std::move(shape), std::move(owner), strings.front());
  Tensor t;
  t.dtype_ = DType::string;
  t.shape_ = std::move(shape);
  assert(static_cast<std::size_t>(t.num_elements()) == strings.size());
  t.mode_ = Mode::viewed_strings;
  t.keep_ = std::move(owner);
  t.views_ = std::make_shared<StringViews>();
  for (auto v : strings)
    t.views_->total += v.size();
  t.views_->views = std::move(strings);
  return t;
}

Tensor TensorInternals::uninitialized(DType dtype, Shape shape) {
  assert(dtype != DType::string);
  Tensor t;
  t.dtype_ = dtype;
  t.shape_ = std::move(shape);
  const std::size_t size = static_cast<std::size_t>(t.num_elements()) * dtype_size(dtype);
  if (size <= Tensor::kInlineBytes) { // inline bytes are zeroed already: nothing to save
    t.inline_size_ = static_cast<unsigned char>(size);
    return t;
  }
  // Big storage in shared memory, where a pool process reads it in place (shared_arena.hpp);
  // else new[] without "()", which leaves the bytes as they are (its alignment suits every dtype).
  if (size >= SharedArena::kMinBytes)
    t.keep_ = SharedArena::instance().allocate(size);
  if (!t.keep_)
    t.keep_ = std::shared_ptr<unsigned char>(new unsigned char[size],
                                             std::default_delete<unsigned char[]>());
  t.mode_ = Tensor::Mode::owned_raw;
  t.inline_size_ = 0;
  t.view_data_ = static_cast<const unsigned char*>(t.keep_.get());
  t.view_size_ = size;
  return t;
}

const unsigned char* Tensor::raw() const {
  switch (mode_) {
    case Mode::inline_bytes: return inline_;
    case Mode::owned_bytes: return owned_->data();
    case Mode::owned_raw:
    case Mode::viewed_bytes: return view_data_;
    default: return nullptr;
  }
}

std::size_t Tensor::raw_size() const {
  switch (mode_) {
    case Mode::inline_bytes: return inline_size_;
    case Mode::owned_bytes: return owned_->size();
    case Mode::owned_raw:
    case Mode::viewed_bytes: return view_size_;
    default: return 0;
  }
}

unsigned char* Tensor::mutable_raw() {
  switch (mode_) {
    case Mode::inline_bytes: return inline_;
    case Mode::owned_bytes:
      if (owned_.use_count() > 1) // shared: copy on write
        owned_ = std::make_shared<std::vector<unsigned char>>(*owned_);
      return owned_->data();
    case Mode::owned_raw:
      // This tensor allocated the bytes (writable); a slice or storage_owner() holder shares them.
      if (keep_.use_count() == 1)
        return const_cast<unsigned char*>(view_data_);
      [[fallthrough]];
    case Mode::viewed_bytes: {
      auto copy = std::make_shared<std::vector<unsigned char>>(view_data_, view_data_ + view_size_);
      keep_.reset();
      view_data_ = nullptr;
      view_size_ = 0;
      mode_ = Mode::owned_bytes;
      owned_ = std::move(copy);
      return owned_->data();
    }
    default: return nullptr;
  }
}

std::vector<unsigned char>& Tensor::mutable_bytes() {
  static thread_local std::vector<unsigned char> none; // string tensors have no numeric bytes
  if (dtype_ == DType::string) {
    none.clear();
    return none;
  }
  if (mode_ == Mode::inline_bytes) {
    owned_ = std::make_shared<std::vector<unsigned char>>(inline_, inline_ + inline_size_);
    mode_ = Mode::owned_bytes;
    inline_size_ = 0;
  } else if (mode_ == Mode::owned_raw) { // the caller wants a vector: move the bytes into one
    owned_ = std::make_shared<std::vector<unsigned char>>(view_data_, view_data_ + view_size_);
    keep_.reset();
    view_data_ = nullptr;
    view_size_ = 0;
    mode_ = Mode::owned_bytes;
  }
  mutable_raw();
  return *owned_;
}

std::string_view Tensor::string_at(int64_t i) const {
  const auto k = static_cast<std::size_t>(i);
  if (mode_ == Mode::viewed_string)
    return single_view();
  if (mode_ == Mode::viewed_strings)
    return views_->views[k];
  if (mode_ == Mode::owned_strings)
    return (*strings_)[k];
  return {};
}

const std::vector<std::string>& Tensor::strings() const {
  static const std::vector<std::string> none;
  if (mode_ == Mode::owned_strings)
    return *strings_;
  if (mode_ == Mode::viewed_strings) {
    StringViews& v = *views_;
    std::call_once(v.once, [&v] {
      v.materialized.reserve(v.views.size());
      for (auto s : v.views)
        v.materialized.emplace_back(s);
    });
    return v.materialized;
  }
  if (mode_ == Mode::viewed_string) {
    // Built on first use and published once: concurrent callers may each build one, the first
    // compare-exchange wins and the others use the winner's (so the reference stays valid).
    std::shared_ptr<StringViews> cache = std::atomic_load(&views_);
    if (!cache) {
      auto fresh = std::make_shared<StringViews>();
      fresh->materialized.emplace_back(single_view());
      if (std::atomic_compare_exchange_strong(&views_, &cache, fresh))
        cache = std::move(fresh);
    }
    return cache->materialized;
  }
  return none;
}

std::vector<std::string>& Tensor::mutable_strings() {
  static thread_local std::vector<std::string> none;
  if (mode_ == Mode::viewed_string) {
    strings_ = std::make_shared<std::vector<std::string>>(1, std::string{single_view()});
    views_.reset();
    keep_.reset();
    view_data_ = nullptr;
    view_size_ = 0;
    mode_ = Mode::owned_strings;
  }
  if (mode_ == Mode::viewed_strings) {
    auto owned = std::make_shared<std::vector<std::string>>();
    owned->reserve(views_->views.size());
    for (auto s : views_->views)
      owned->emplace_back(s);
    views_.reset();
    keep_.reset();
    strings_ = std::move(owned);
    mode_ = Mode::owned_strings;
  }
  if (mode_ != Mode::owned_strings) {
    none.clear();
    return none;
  }
  if (strings_.use_count() > 1)
    strings_ = std::make_shared<std::vector<std::string>>(*strings_);
  return *strings_;
}

bool Tensor::shares_storage() const {
  switch (mode_) {
    case Mode::inline_bytes: return false;
    case Mode::owned_bytes: return owned_.use_count() > 1;
    case Mode::owned_raw: return keep_.use_count() > 1;
    case Mode::owned_strings: return strings_.use_count() > 1;
    default: return true;
  }
}

StorageOwner Tensor::storage_owner() const {
  switch (mode_) {
    case Mode::owned_bytes: return owned_;
    case Mode::owned_strings: return strings_;
    case Mode::owned_raw:
    case Mode::viewed_bytes:
    case Mode::viewed_string:
    case Mode::viewed_strings: return keep_;
    default: return nullptr;
  }
}

bool operator==(const Tensor& a, const Tensor& b) {
  if (a.dtype_ != b.dtype_ || a.shape_ != b.shape_)
    return false;
  if (a.dtype_ != DType::string)
    return a.bytes() == b.bytes();
  const int64_t n = a.num_elements();
  for (int64_t i = 0; i < n; ++i)
    if (a.string_at(i) != b.string_at(i))
      return false;
  return true;
}

Tensor Tensor::scalar(bool v) {
  Tensor t{DType::boolean, Shape{}};
  t.inline_[0] = v ? 1 : 0;
  return t;
}
Tensor Tensor::scalar(int8_t v) { return make_scalar(v); }
Tensor Tensor::scalar(int16_t v) { return make_scalar(v); }
Tensor Tensor::scalar(int32_t v) { return make_scalar(v); }
Tensor Tensor::scalar(int64_t v) { return make_scalar(v); }
Tensor Tensor::scalar(uint8_t v) { return make_scalar(v); }
Tensor Tensor::scalar(uint16_t v) { return make_scalar(v); }
Tensor Tensor::scalar(uint32_t v) { return make_scalar(v); }
Tensor Tensor::scalar(uint64_t v) { return make_scalar(v); }
Tensor Tensor::scalar(float16 v) { return make_scalar(v); }
Tensor Tensor::scalar(bfloat16 v) { return make_scalar(v); }
Tensor Tensor::scalar(float v) { return make_scalar(v); }
Tensor Tensor::scalar(double v) { return make_scalar(v); }
Tensor Tensor::scalar(std::complex<float> v) { return make_scalar(v); }
Tensor Tensor::scalar(std::complex<double> v) { return make_scalar(v); }
Tensor Tensor::scalar(std::string v) {
  Tensor t{DType::string, Shape{}};
  (*t.strings_)[0] = std::move(v);
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
  if (dtype_ == DType::int64)
    return at<int64_t>(0);
  Tensor out{DType::int64, Shape{}};
  store_entry(out, 0, load_entry(*this, 0));
  return out.at<int64_t>(0);
}

double Tensor::as_double() const {
  assert(num_elements() == 1 && dtype_ != DType::string);
  return static_cast<double>(load_entry(*this, 0).re);
}

Tensor Tensor::slice(int64_t i) const {
  assert(rank() >= 1 && i >= 0 && i < shape_[0]);
  Shape row_shape(shape_.begin() + 1, shape_.end());
  int64_t per_row = 1;
  for (int64_t d : row_shape)
    per_row *= std::max<int64_t>(d, 0);
  const auto first = static_cast<std::size_t>(i * per_row);
  if (dtype_ == DType::string) {
    // The rows view what this tensor's strings view (a received buffer), or its own strings.
    StorageOwner owner = mode_ == Mode::owned_strings ? StorageOwner{strings_} : keep_;
    if (per_row == 1)
      return single_string_view(std::move(row_shape), std::move(owner),
                                string_at(static_cast<int64_t>(first)));
    std::vector<std::string_view> rows;
    rows.reserve(static_cast<std::size_t>(per_row));
    for (int64_t k = 0; k < per_row; ++k)
      rows.push_back(string_at(static_cast<int64_t>(first) + k));
    return string_view_of(std::move(row_shape), std::move(owner), std::move(rows));
  }
  const std::size_t row_bytes = static_cast<std::size_t>(per_row) * dtype_size(dtype_);
  const unsigned char* p = raw() + first * dtype_size(dtype_);
  if (mode_ == Mode::inline_bytes || row_bytes <= kInlineBytes) {
    Tensor out{dtype_, std::move(row_shape)};
    if (row_bytes > 0)
      std::memcpy(out.mutable_raw(), p, row_bytes);
    return out;
  }
  StorageOwner owner = mode_ == Mode::owned_bytes ? StorageOwner{owned_} : keep_;
  return numeric_view(dtype_, std::move(row_shape), std::move(owner), p, row_bytes);
}

Expected<Tensor> Tensor::stack(const std::vector<Tensor>& parts) {
  if (parts.empty())
    return invalid_argument("stack: needs at least one tensor, got none");
  const Tensor& first = parts.front();
  for (std::size_t i = 1; i < parts.size(); ++i) {
    if (parts[i].dtype_ != first.dtype_ || parts[i].shape_ != first.shape_)
      return invalid_argument(
        "stack: tensor " + std::to_string(i) + " has dtype " + dtype_name(parts[i].dtype_) +
        " and shape " + shape_string(parts[i].shape_) + ", expected dtype " +
        dtype_name(first.dtype_) + " and shape " + shape_string(first.shape_) + " like tensor 0");
  }
  Shape shape;
  shape.reserve(first.shape_.size() + 1);
  shape.push_back(static_cast<int64_t>(parts.size()));
  shape.insert(shape.end(), first.shape_.begin(), first.shape_.end());
  // Numeric parts overwrite every byte of the result: no zero-fill first.
  Tensor out = first.dtype_ == DType::string
                 ? Tensor{first.dtype_, std::move(shape)}
                 : TensorInternals::uninitialized(first.dtype_, std::move(shape));
  if (first.dtype_ == DType::string) {
    auto dst = out.strings_->begin();
    for (const Tensor& p : parts)
      for (int64_t k = 0, n = p.num_elements(); k < n; ++k)
        (dst++)->assign(p.string_at(k));
  } else {
    unsigned char* dst = out.mutable_raw();
    for (const Tensor& p : parts) {
      const std::size_t n = p.raw_size();
      if (n > 0)
        std::memcpy(dst, p.raw(), n);
      dst += n;
    }
  }
  return out;
}

std::size_t Tensor::byte_size() const {
  if (dtype_ != DType::string)
    return raw_size();
  if (mode_ == Mode::viewed_strings)
    return views_->total;
  if (mode_ == Mode::viewed_string)
    return view_size_;
  std::size_t n = 0;
  for (const auto& s : *strings_)
    n += s.size();
  return n;
}

} // namespace conveyor
