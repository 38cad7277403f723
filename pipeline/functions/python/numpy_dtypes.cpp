#include "pipeline/functions/python/numpy_dtypes.hpp"

#include <string>
#include <vector>

namespace py = pybind11;

namespace conveyor::python {

namespace {

// The numpy dtype of each DType. bfloat16 has none in numpy: its tensors come out as uint16
// arrays of the bit patterns whose dtype carries the metadata {"conveyor_dtype": "bfloat16"}
// (conveyor.bfloat16_dtype), which is how such an array is recognized on the way back in.
const char* numpy_dtype_name(DType d) {
  // tf.data's dtype names are numpy's, but for strings (objects) and bfloat16 (marked uint16).
  if (d == DType::string)
    return "object";
  return d == DType::bfloat16 ? "uint16" : dtype_name(d);
}

constexpr const char* kDTypeMetadataKey = "conveyor_dtype";

} // namespace

// numpy dtype objects, made once per DType (leaked: used until the process exits).
const py::dtype& numpy_dtype(DType d) {
  static std::vector<py::dtype*> cache(kNumDTypes, nullptr);
  auto i = static_cast<std::size_t>(d);
  if (cache[i] == nullptr) {
    if (d == DType::bfloat16) {
      py::dict metadata;
      metadata[kDTypeMetadataKey] = "bfloat16";
      py::object dt =
        py::module_::import("numpy").attr("dtype")("uint16", py::arg("metadata") = metadata);
      cache[i] = new py::dtype(py::reinterpret_borrow<py::dtype>(dt));
    } else {
      cache[i] = new py::dtype(numpy_dtype_name(d));
    }
  }
  return *cache[i];
}

// The DType of a numpy array's dtype; nullopt for one conveyor has no dtype for.
std::optional<DType> dtype_of_numpy(const py::dtype& dt) {
  const char kind = dt.kind();
  const auto size = dt.itemsize();
  py::object metadata = dt.attr("metadata"); // None, or a read-only mapping
  if (!metadata.is_none() && size == 2 && (kind == 'u' || kind == 'i')) {
    py::object tag = metadata.attr("get")(kDTypeMetadataKey);
    if (!tag.is_none() && py::str(tag).cast<std::string>() == "bfloat16")
      return DType::bfloat16;
  }
  if (kind == 'V' && size == 2 && py::str(dt.attr("name")).cast<std::string>() == "bfloat16")
    return DType::bfloat16; // ml_dtypes' bfloat16, where it is installed
  const auto sized = [size](DType one, DType two, DType four, DType eight) -> std::optional<DType> {
    switch (size) {
      case 1: return one;
      case 2: return two;
      case 4: return four;
      case 8: return eight;
      default: return std::nullopt;
    }
  };
  switch (kind) {
    case 'b': return DType::boolean;
    case 'i': return sized(DType::int8, DType::int16, DType::int32, DType::int64);
    case 'u': return sized(DType::uint8, DType::uint16, DType::uint32, DType::uint64);
    case 'f':
      if (size == 2)
        return DType::float16;
      if (size == 4)
        return DType::float32;
      if (size == 8)
        return DType::float64;
      return std::nullopt;
    case 'c':
      if (size == 8)
        return DType::complex64;
      if (size == 16)
        return DType::complex128;
      return std::nullopt;
    default: return std::nullopt;
  }
}

Expected<Tensor> string_tensor_from_numpy(const py::array& arr, const std::string& what) {
  Tensor t(DType::string, Shape(arr.shape(), arr.shape() + arr.ndim()));
  py::list flat = arr.attr("reshape")(-1).attr("tolist")();
  auto& strings = t.mutable_strings();
  for (std::size_t i = 0; i < strings.size(); ++i) {
    py::handle item = flat[i];
    if (!py::isinstance<py::bytes>(item) && !py::isinstance<py::str>(item))
      return invalid_argument(what + ": an object array must hold bytes or str, got " +
                              py::str(py::type::of(item).attr("__name__")).cast<std::string>());
    strings[i] = item.cast<std::string>(); // str as UTF-8
  }
  return t;
}

} // namespace conveyor::python
