#include "numpy_convert.hpp"

#include <algorithm>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "pipeline/functions/python/numpy_dtypes.hpp"
#include "pipeline/tensor/tensor_internals.hpp"
#include "py_status.hpp"

namespace py = pybind11;
using namespace conveyor;
using conveyor::python::dtype_of_numpy;
using conveyor::python::numpy_dtype;

namespace conveyor_python {

namespace {

// The base object of a received element's arrays: it holds the Element inline, in one small
// Python allocation (a capsule needed a heap Element besides, and its name compared on
// release), and destroys it when the last array over its storage goes.
struct ElementOwner {
  PyObject_HEAD Element element;
};

void element_owner_dealloc(PyObject* self) {
  reinterpret_cast<ElementOwner*>(self)->element.~Element();
  PyTypeObject* type = Py_TYPE(self);
  type->tp_free(self);
  Py_DECREF(type); // instances of a heap type hold a reference to it
}

} // namespace

PyTypeObject* element_owner_type() {
  // Made once (the GIL serializes the first call); lives as long as the process.
  static PyTypeObject* type = [] {
    static PyType_Slot slots[] = {
      {Py_tp_dealloc, reinterpret_cast<void*>(&element_owner_dealloc)},
      {Py_tp_doc, const_cast<char*>("Owns a received element; the base of its arrays.")},
      {0, nullptr}};
    static PyType_Spec spec = {"conveyor._conveyor._ElementOwner",
                               static_cast<int>(sizeof(ElementOwner)), 0, Py_TPFLAGS_DEFAULT,
                               slots};
    PyObject* made = PyType_FromSpec(&spec);
    if (made == nullptr)
      throw py::error_already_set();
    return reinterpret_cast<PyTypeObject*>(made);
  }();
  return type;
}

namespace {

// Takes `e` over.
py::object own_element(Element&& e) {
  PyTypeObject* type = element_owner_type();
  PyObject* self = type->tp_alloc(type, 0);
  if (self == nullptr)
    throw py::error_already_set();
  new (&reinterpret_cast<ElementOwner*>(self)->element) Element(std::move(e));
  return py::reinterpret_steal<py::object>(self);
}

// A numeric tensor as an array over its own storage; `owner` becomes the array's base, so the
// storage lives as long as any array (or view) over it. Made with numpy's C API directly: shape
// on the stack, strides computed by numpy (C order), no intermediate vectors.
py::object tensor_view(const Tensor& t, py::handle owner) {
  constexpr int kMaxDims = 32; // NPY_MAXDIMS
  const py::dtype& dtype = numpy_dtype(t.dtype());
  if (t.num_elements() == 0 || t.rank() > kMaxDims) { // nothing to share / numpy refuses it
    std::vector<py::ssize_t> shape(t.shape().begin(), t.shape().end());
    return py::array(dtype, shape);
  }
  Py_intptr_t dims[kMaxDims];
  for (int i = 0; i < t.rank(); ++i)
    dims[i] = static_cast<Py_intptr_t>(t.shape()[static_cast<std::size_t>(i)]);
  auto& api = py::detail::npy_api::get();
  // Writeable, as the arrays pybind11's py::array made over a base were (callers may rely on it).
  void* data = const_cast<unsigned char*>(t.data<unsigned char>());
  PyObject* array =
    api.PyArray_NewFromDescr_(api.PyArray_Type_, dtype.inc_ref().ptr(), t.rank(), dims, nullptr,
                              data, py::detail::npy_api::NPY_ARRAY_WRITEABLE_, nullptr);
  if (array == nullptr)
    throw py::error_already_set();
  auto out = py::reinterpret_steal<py::object>(array);
  if (api.PyArray_SetBaseObject_(array, owner.inc_ref().ptr()) != 0) // (steals the reference)
    throw py::error_already_set();
  return out;
}

// Strings cannot be shared with numpy: a scalar becomes `bytes`-holding 0-d object array and a
// tensor an object array of `bytes` (as tf.data's as_numpy_iterator gives).
py::array string_array(const Tensor& t) {
  std::vector<py::ssize_t> shape(t.shape().begin(), t.shape().end());
  py::array out(numpy_dtype(DType::string), shape);
  auto** items = static_cast<PyObject**>(out.mutable_data());
  const auto& strings = t.strings();
  for (std::size_t i = 0; i < strings.size(); ++i) {
    PyObject* b =
      PyBytes_FromStringAndSize(strings[i].data(), static_cast<Py_ssize_t>(strings[i].size()));
    if (b == nullptr)
      throw py::error_already_set();
    Py_XDECREF(items[i]); // numpy filled object arrays with None
    items[i] = b;
  }
  return out;
}

} // namespace

namespace {

// The components [next, next + s.flat_size()) nested as `s`: tuples as tuples, dicts as dicts
// (in sorted key order, as tf.nest packs them).
template <class Convert>
py::object pack(const Structure& s, const Element& e, std::size_t& next, const Convert& convert) {
  switch (s.kind()) {
    case Structure::Kind::leaf: return convert(e[next++]);
    case Structure::Kind::tuple: {
      py::tuple out(s.children().size());
      for (std::size_t i = 0; i < s.children().size(); ++i)
        out[i] = pack(s.children()[i], e, next, convert);
      return std::move(out);
    }
    case Structure::Kind::dict: {
      py::dict out;
      for (std::size_t i = 0; i < s.children().size(); ++i)
        out[py::str(s.keys()[i])] = pack(s.children()[i], e, next, convert);
      return std::move(out);
    }
  }
  return py::none();
}

} // namespace

// Element -> one array (one component) or a tuple of arrays, or nested as `structure` when it
// is given and matches the element's size. Takes the Element over.
py::object element_to_python(Element&& e, const Structure* structure) {
  py::object owner = own_element(std::move(e));
  const Element* owned = &reinterpret_cast<ElementOwner*>(owner.ptr())->element;
  const auto convert = [&](const Tensor& t) -> py::object {
    if (t.dtype() == DType::string && t.rank() == 0) {
      const std::string& s = t.strings()[0];
      return py::bytes(s.data(), s.size()); // as tf.data's as_numpy_iterator
    }
    if (t.dtype() == DType::string)
      return string_array(t);
    return tensor_view(t, owner);
  };
  if (structure != nullptr && !structure->is_flat()) {
    if (structure->flat_size() != owned->size())
      raise(internal_error("an element of " + std::to_string(owned->size()) +
                           " component(s) does not fit its dataset's structure " +
                           structure->to_string()));
    std::size_t next = 0;
    return pack(*structure, *owned, next, convert);
  }
  if (owned->size() == 1)
    return convert((*owned)[0]);
  py::tuple out(owned->size());
  for (std::size_t i = 0; i < owned->size(); ++i)
    out[i] = convert((*owned)[i]);
  return std::move(out);
}

// ---------------------------------------------------------------- python -> elements

namespace {

// A whole numeric tensor of a received element handed back as it came (a trainer-side map that
// returns its input or one of its components): that tensor, sharing its storage, not a copy.
// Only where the caller asks for it: the arrays are writable, and a dataset made from one must
// not change when the array does later.
std::optional<Tensor> received_tensor(py::handle value) {
  if (!py::isinstance<py::array>(value))
    return std::nullopt;
  auto arr = py::reinterpret_borrow<py::array>(value);
  py::object base = arr.base();
  if (!base || Py_TYPE(base.ptr()) != element_owner_type() ||
      (arr.flags() & py::array::c_style) == 0)
    return std::nullopt;
  const Element& owned = reinterpret_cast<ElementOwner*>(base.ptr())->element;
  for (const Tensor& t : owned.components) {
    if (t.dtype() == DType::string || t.num_elements() == 0 ||
        t.data<unsigned char>() != arr.data() || t.rank() != arr.ndim())
      continue;
    if (!std::equal(t.shape().begin(), t.shape().end(), arr.shape()))
      continue;
    if (py::detail::npy_api::get().PyArray_EquivTypes_(numpy_dtype(t.dtype()).ptr(),
                                                       arr.dtype().ptr()))
      return t;
  }
  return std::nullopt;
}

} // namespace

Tensor tensor_from_python(py::handle value, const char* what) {
  py::module_ np = py::module_::import("numpy");
  py::array arr = np.attr("asarray")(value);
  const char kind = arr.dtype().kind();
  Shape shape(arr.shape(), arr.shape() + arr.ndim());
  if (kind == 'O' || kind == 'S' || kind == 'U')
    return unwrap(conveyor::python::string_tensor_from_numpy(arr, what));
  const std::optional<DType> dtype = dtype_of_numpy(arr.dtype());
  if (!dtype)
    raise(invalid_argument(std::string{what} + ": unsupported numpy dtype " +
                           std::string(py::str(arr.dtype())) + "; conveyor tensors are " +
                           dtype_names() + " (bfloat16: see conveyor.bfloat16)"));
  // Uninitialized: every byte is copied below (and big storage goes to the shared arena, where
  // a pool process reads it in place).
  Tensor t = conveyor::TensorInternals::uninitialized(*dtype, shape);
  // Tensors hold native-order values: a big-endian array (dtype '>i4', as read from a file
  // format that stores them so) is converted, not copied byte for byte into wrong numbers.
  if (!arr.dtype().attr("isnative").cast<bool>())
    arr = arr.attr("astype")(arr.dtype().attr("newbyteorder")("="));
  py::array contiguous = np.attr("ascontiguousarray")(arr);
  if (t.num_elements() > 0)
    std::memcpy(t.mutable_data<unsigned char>(), contiguous.data(), t.bytes().size());
  return t;
}

namespace {

std::string key_path(const std::string& path, const std::string& key) {
  return path + "[" + quote_structure_key(key) + "]";
}

// Appends the leaves of `value` to `out` (their paths to `paths`) and returns its structure.
Structure flatten(py::handle value, const char* what, const std::string& path, int depth,
                  bool share_received, NestedElement& out) {
  if (depth > 100)
    raise(invalid_argument(std::string{what} + ": the element" + path +
                           " is nested deeper than 100 levels"));
  if (py::isinstance<py::tuple>(value)) {
    std::vector<Structure> items;
    std::size_t i = 0;
    for (py::handle item : value)
      items.push_back(flatten(item, what, path + "[" + std::to_string(i++) + "]", depth + 1,
                              share_received, out));
    return Structure::tuple(std::move(items));
  }
  if (py::isinstance<py::dict>(value)) {
    // tf.nest: a dict's leaves come in sorted key order; keys must be strings.
    std::vector<std::pair<std::string, py::handle>> entries;
    for (auto item : py::reinterpret_borrow<py::dict>(value)) {
      if (!py::isinstance<py::str>(item.first))
        raise(invalid_argument(std::string{what} + ": the dict" + (path.empty() ? "" : " at ") +
                               path + " has the key " + std::string(py::repr(item.first)) +
                               " of type " + Py_TYPE(item.first.ptr())->tp_name +
                               "; dict keys must be strings"));
      entries.emplace_back(item.first.cast<std::string>(), item.second);
    }
    std::sort(entries.begin(), entries.end(),
              [](const auto& a, const auto& b) { return a.first < b.first; });
    std::vector<std::pair<std::string, Structure>> structure;
    for (const auto& [key, item] : entries)
      structure.emplace_back(
        key, flatten(item, what, key_path(path, key), depth + 1, share_received, out));
    return unwrap(Structure::dict(std::move(structure)));
  }
  std::optional<Tensor> same = share_received ? received_tensor(value) : std::nullopt;
  out.element.components.push_back(
    same ? std::move(*same)
         : tensor_from_python(value, path.empty() ? what : (std::string{what} + path).c_str()));
  out.paths.push_back(path);
  return Structure::leaf();
}

} // namespace

// tf.data's nesting rules: a tuple is a structure, a dict a structure keyed by strings, anything
// else (a list, an array, a scalar) one tensor.
NestedElement nested_from_python(py::handle value, const char* what, bool share_received) {
  NestedElement out;
  out.structure = flatten(value, what, "", 0, share_received, out);
  if (out.element.size() == 0)
    raise(invalid_argument(std::string{what} + ": an element needs at least one component"));
  return out;
}

// A tuple is a multi-component element; anything else one tensor (as tf.data's from_tensors).
Element element_from_python(py::handle value, const char* what) {
  if (py::isinstance<py::tuple>(value)) {
    std::vector<Tensor> parts;
    for (py::handle item : value)
      parts.push_back(tensor_from_python(item, what));
    if (parts.empty())
      raise(invalid_argument(std::string{what} + ": an element needs at least one component"));
    return Element{std::move(parts)};
  }
  return Element{tensor_from_python(value, what)};
}

} // namespace conveyor_python
