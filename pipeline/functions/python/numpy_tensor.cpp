// Tensors <-> numpy (see the header). Errors are values: a worker must not throw into a kernel.
#include "pipeline/functions/python/numpy_tensor.hpp"

#include <pybind11/numpy.h>

#include <cstring>
#include <memory>
#include <vector>

namespace py = pybind11;

namespace conveyor::python {

namespace {

constexpr const char* kCapsuleName = "conveyor.WorkerElement";

// numpy's name for a DType: tf.data's names are numpy's, except that strings are objects.
py::dtype numpy_dtype(DType d) {
  return py::dtype(d == DType::string ? std::string{"object"} : std::string{dtype_name(d)});
}

std::string type_name(py::handle value) {
  return py::str(py::type::of(value).attr("__name__")).cast<std::string>();
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
  py::module_ np = py::module_::import("numpy");
  py::array arr = np.attr("asarray")(value);
  const char kind = arr.dtype().kind();
  Shape shape(arr.shape(), arr.shape() + arr.ndim());
  if (kind == 'O' || kind == 'S' || kind == 'U') {
    Tensor t(DType::string, shape);
    py::list flat = arr.attr("reshape")(-1).attr("tolist")();
    auto& strings = t.mutable_strings();
    for (std::size_t i = 0; i < strings.size(); ++i) {
      py::handle item = flat[i];
      if (py::isinstance<py::bytes>(item) || py::isinstance<py::str>(item))
        strings[i] = item.cast<std::string>(); // str as UTF-8
      else
        return invalid_argument(what + ": an object array must hold bytes or str, got " +
                                type_name(item));
    }
    return t;
  }
  const std::string numpy_name = py::str(arr.dtype()).cast<std::string>();
  std::optional<DType> dtype = dtype_from_name(numpy_name);
  if (!dtype || *dtype == DType::string)
    return invalid_argument(what + " has numpy dtype " + numpy_name +
                            ", which conveyor tensors do not hold");
  Tensor t(*dtype, shape);
  // Tensors hold native-order values: a big-endian array is converted, not copied byte for byte.
  if (!arr.dtype().attr("isnative").cast<bool>())
    arr = arr.attr("astype")(arr.dtype().attr("newbyteorder")("="));
  py::array contiguous = np.attr("ascontiguousarray")(arr);
  if (t.num_elements() > 0)
    std::memcpy(t.mutable_data<unsigned char>(), contiguous.data(), t.bytes().size());
  return t;
}

Expected<Element> element_from_python(py::handle value, const std::string& what) {
  if (py::isinstance<py::tuple>(value)) {
    std::vector<Tensor> parts;
    std::size_t i = 0;
    for (py::handle item : value) {
      auto t = tensor_from_python(item, what + " (component " + std::to_string(i++) + ")");
      if (!t.ok())
        return t.status();
      parts.push_back(std::move(*t));
    }
    if (parts.empty())
      return invalid_argument(what + " is an empty tuple; an element needs a component");
    return Element{std::move(parts)};
  }
  auto t = tensor_from_python(value, what);
  if (!t.ok())
    return t.status();
  return Element{std::move(*t)};
}

} // namespace conveyor::python
