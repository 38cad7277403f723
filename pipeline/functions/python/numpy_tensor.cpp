// Tensors <-> numpy (see the header). Errors are values: a worker must not throw into a kernel.
#include "pipeline/functions/python/numpy_tensor.hpp"
#include "pipeline/functions/python/array_releaser.hpp"
#include "pipeline/functions/python/numpy_dtypes.hpp"
#include "pipeline/tensor/tensor_internals.hpp"

#include <pybind11/numpy.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <vector>

namespace py = pybind11;

namespace conveyor::python {

namespace {

constexpr const char* kCapsuleName = "conveyor.WorkerElement";

// Leaked: used until the process ends, and never released after the interpreter is gone.
py::module_& numpy() {
  static auto* module = new py::module_(py::module_::import("numpy"));
  return *module;
}

// The DType of a numpy dtype (numpy_dtypes.hpp), remembered per numpy type number for dtypes
// without metadata (a bfloat16-marked uint16 shares uint16's number). Error: numpy's name.
Expected<DType> dtype_of(const py::dtype& dtype) {
  static std::optional<DType> known[64];
  const int num = py::detail::array_descriptor_proxy(dtype.ptr())->type_num;
  const bool plain = dtype.attr("metadata").is_none();
  if (plain && num >= 0 && num < 64 && known[num])
    return *known[num];
  std::optional<DType> found = dtype_of_numpy(dtype);
  if (!found)
    return invalid_argument(py::str(py::handle(dtype)).cast<std::string>());
  if (plain && num >= 0 && num < 64)
    known[num] = found;
  return *found;
}

} // namespace

py::object tensor_to_numpy(const Tensor& t, py::handle owner) {
  std::vector<py::ssize_t> shape(t.shape().begin(), t.shape().end());
  if (t.dtype() == DType::string) {
    if (t.rank() == 0) {
      const std::string_view s = t.string_at(0);
      return py::bytes(s.data(), s.size());
    }
    py::array out(numpy_dtype(DType::string), shape);
    auto** items = static_cast<PyObject**>(out.mutable_data());
    for (int64_t i = 0; i < t.num_elements(); ++i) {
      const std::string_view s = t.string_at(i);
      PyObject* b = PyBytes_FromStringAndSize(s.data(), static_cast<Py_ssize_t>(s.size()));
      if (b == nullptr)
        throw py::error_already_set();
      Py_XDECREF(items[i]); // numpy filled object arrays with None
      items[i] = b;
    }
    return std::move(out);
  }
  py::array out = t.num_elements() == 0
                    ? py::array(numpy_dtype(t.dtype()), shape)
                    : py::array(numpy_dtype(t.dtype()), std::move(shape),
                                std::vector<py::ssize_t>{}, t.data<unsigned char>(), owner);
  // The storage is shared (other elements, the dataset's own tensors): a function that writes
  // into its argument gets numpy's "read-only" error instead of changing them.
  out.attr("flags").attr("writeable") = false;
  return std::move(out);
}

py::tuple element_to_arguments(const Element& element) {
  auto* held = new Element(element); // shares the storage; the capsule releases it
  py::capsule owner(held, kCapsuleName, [](PyObject* capsule) {
    delete static_cast<Element*>(PyCapsule_GetPointer(capsule, kCapsuleName));
  });
  py::tuple args(held->size());
  for (std::size_t i = 0; i < held->size(); ++i)
    args[i] = tensor_to_numpy((*held)[i], owner);
  return args;
}

Expected<Tensor> tensor_from_python(py::handle value, const std::string& what) {
  if (value.is_none())
    return invalid_argument(what + " is None; a function must return a value (an array, a "
                                   "number, bytes/str, or a tuple of them)");
  py::array arr = py::array::check_(value) ? py::reinterpret_borrow<py::array>(value)
                                           : py::array(numpy().attr("asarray")(value));
  const char kind = arr.dtype().kind();
  Shape shape(arr.shape(), arr.shape() + arr.ndim());
  if (kind == 'O' || kind == 'S' || kind == 'U')
    return string_tensor_from_numpy(arr, what);
  // Tensors hold native-order values: a big-endian array is converted, not copied byte for byte.
  if (py::detail::array_descriptor_proxy(arr.dtype().ptr())->byteorder == '>')
    arr = arr.attr("astype")(arr.dtype().attr("newbyteorder")("="));
  auto dtype = dtype_of(arr.dtype());
  if (!dtype.ok())
    return invalid_argument(what + " has numpy dtype " + dtype.status().message() +
                            ", which conveyor tensors do not hold");
  if ((arr.flags() & py::array::c_style) == 0)
    arr = numpy().attr("ascontiguousarray")(arr);
  if (arr.size() == 0)
    return Tensor(*dtype, std::move(shape));
  // Every byte is copied over, so no zero-fill first (a second pass over a 1 MiB result).
  Tensor t = TensorInternals::uninitialized(*dtype, std::move(shape));
  std::memcpy(t.mutable_data<unsigned char>(), arr.data(), t.bytes().size());
  return t;
}

namespace {

// Results this big are worth adopting (below it a copy costs less than the release's hand-off).
constexpr py::ssize_t kAdoptBytes = 64 << 10;

// A function's result array as the tensor's storage, without a copy, when nothing but the result
// (or its tuple) refers to it: a new array the function made (`x + 1`), which no one else can
// reach and so change. nullopt: copy it (kept elsewhere, a view, a subclass, small, ...).
std::optional<Tensor> adopted(py::handle item) {
  auto& api = py::detail::npy_api::get();
  if (Py_TYPE(item.ptr()) != api.PyArray_Type_ || Py_REFCNT(item.ptr()) != 1)
    return std::nullopt;
  constexpr int kNeed = py::detail::npy_api::NPY_ARRAY_C_CONTIGUOUS_ |
                        py::detail::npy_api::NPY_ARRAY_OWNDATA_ |
                        py::detail::npy_api::NPY_ARRAY_ALIGNED_;
  if ((py::detail::array_proxy(item.ptr())->flags & kNeed) != kNeed)
    return std::nullopt;
  auto arr = py::reinterpret_borrow<py::array>(item);
  const char kind = arr.dtype().kind();
  if (arr.nbytes() < kAdoptBytes || kind == 'O' || kind == 'S' || kind == 'U' ||
      py::detail::array_descriptor_proxy(arr.dtype().ptr())->byteorder == '>')
    return std::nullopt;
  auto dtype = dtype_of(arr.dtype());
  if (!dtype.ok())
    return std::nullopt; // (tensor_from_python names it)
  const std::size_t size = static_cast<std::size_t>(arr.nbytes());
  const auto* data = static_cast<const unsigned char*>(arr.data());
  if (static_cast<std::size_t>(arr.size()) * dtype_size(*dtype) != size ||
      reinterpret_cast<std::uintptr_t>(data) % dtype_size(*dtype) != 0)
    return std::nullopt;
  PyObject* held = arr.inc_ref().ptr(); // ours until the last tensor viewing it goes
  StorageOwner owner(static_cast<const void*>(held), [](const void* array) {
    release_array_later(static_cast<PyObject*>(const_cast<void*>(array)));
  });
  return Tensor::numeric_view(*dtype, Shape(arr.shape(), arr.shape() + arr.ndim()),
                              std::move(owner), data, size);
}

// `item` itself when it is one of the arguments (returned unchanged: `lambda image, label:
// (augment(image), label)`), a new array adopted, else a copy.
Expected<Tensor> component_from_python(py::handle item, const std::string& what,
                                       const Arguments* passed) {
  if (passed != nullptr && passed->element != nullptr)
    for (std::size_t j = 0; j < passed->args.size() && j < passed->element->size(); ++j)
      if (passed->args[j].ptr() == item.ptr())
        return (*passed->element)[j];
  if (passed != nullptr) // a function's result (the caller holds it: see adopted())
    if (auto t = adopted(item))
      return std::move(*t);
  return tensor_from_python(item, what);
}

} // namespace

Expected<Element> element_from_python(py::handle value, const std::string& what,
                                      const Arguments* passed) {
  if (py::isinstance<py::tuple>(value)) {
    std::vector<Tensor> parts;
    std::size_t i = 0;
    for (py::handle item : value) {
      auto t =
        component_from_python(item, what + " (component " + std::to_string(i++) + ")", passed);
      if (!t.ok())
        return t.status();
      parts.push_back(std::move(*t));
    }
    if (parts.empty())
      return invalid_argument(what + " is an empty tuple; an element needs a component");
    return Element{std::move(parts)};
  }
  auto t = component_from_python(value, what, passed);
  if (!t.ok())
    return t.status();
  return Element{std::move(*t)};
}

} // namespace conveyor::python
