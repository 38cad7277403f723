#include "dataset_ops.hpp"

#include <pybind11/stl.h>

#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "py_status.hpp"
#include "pipeline/io/example.hpp"
#include "pipeline/io/files.hpp"
#include "pipeline/graph/spec_rules.hpp"

namespace py = pybind11;
using namespace conveyor;

namespace conveyor_python {

namespace {

[[noreturn]] void fail(const Status& st) { raise(st); }

std::string type_name(py::handle v) { return py::str(py::type::of(v).attr("__name__")); }

// One Python value (bool, int, float, str, bytes, a numpy scalar or 0-d array) as a scalar
// tensor. Numbers keep their kind only: padded_batch and FeatureSpec convert them to the
// component's / feature's dtype (a float64 0.5 pads a float32 component).
std::optional<Tensor> scalar_tensor(py::handle v) {
  if (py::isinstance<py::bool_>(v))
    return Tensor::scalar(v.cast<bool>());
  if (py::isinstance<py::bytes>(v) || py::isinstance<py::str>(v))
    return Tensor::scalar(v.cast<std::string>());
  py::module_ np = py::module_::import("numpy");
  py::object arr = np.attr("asarray")(v);
  if (arr.attr("ndim").cast<int>() != 0)
    return std::nullopt;
  const std::string kind = py::str(arr.attr("dtype").attr("kind"));
  py::object item = arr.attr("item")();
  if (kind == "b")
    return Tensor::scalar(item.cast<bool>());
  if (kind == "i" || kind == "u")
    return Tensor::scalar(item.cast<int64_t>());
  if (kind == "f")
    return Tensor::scalar(item.cast<double>());
  if (py::isinstance<py::bytes>(item) || py::isinstance<py::str>(item))
    return Tensor::scalar(item.cast<std::string>());
  return std::nullopt;
}

// padding_values: one entry per component, None = the dtype's zero ("" for strings).
std::vector<Tensor> padding_tensors(const Dataset& d, const std::vector<py::object>& values) {
  std::optional<ElementSpec> spec;
  std::vector<Tensor> out;
  for (std::size_t c = 0; c < values.size(); ++c) {
    const std::string where =
      values.size() == 1 ? std::string{} : " (component " + std::to_string(c) + ")";
    if (values[c].is_none()) {
      if (!spec) {
        auto s = d.element_spec();
        if (!s.ok())
          fail(s.status().with_context("padded_batch: a `padding_values` entry of None needs the "
                                       "input's dtypes"));
        spec = std::move(*s);
      }
      if (c >= spec->components.size())
        fail(invalid_argument("padded_batch: `padding_values` has " +
                              std::to_string(values.size()) +
                              " entries but the input's elements have " +
                              std::to_string(spec->components.size()) + " component(s)"));
      out.emplace_back(spec->components[c].dtype, Shape{});
      continue;
    }
    auto t = scalar_tensor(values[c]);
    if (!t)
      fail(invalid_argument("padded_batch: `padding_values`" + where +
                            " must be a scalar (a number, bool, str or bytes), got " +
                            type_name(values[c]) + ": " + std::string(py::repr(values[c]))));
    out.push_back(std::move(*t));
  }
  return out;
}

Dataset padded_batch(const Dataset& d, int64_t batch_size,
                     std::optional<std::vector<PartialShape>> shapes,
                     std::optional<std::vector<py::object>> values, bool drop_remainder) {
  if (batch_size < 1)
    fail(invalid_argument("padded_batch: `batch_size` must be positive, got " +
                          std::to_string(batch_size)));
  std::vector<Tensor> pads = values ? padding_tensors(d, *values) : std::vector<Tensor>{};
  Dataset out = d.padded_batch(batch_size, shapes.value_or(std::vector<PartialShape>{}),
                               std::move(pads), drop_remainder);
  // The arguments against the input's element_spec now (counts, ranks, dtypes, sizes), as tf.data
  // checks them when the dataset is built. An input whose spec is unknown here (a function only
  // the workers load) is checked when the dataset is validated or registered.
  if (d.element_spec().ok()) {
    auto spec = out.element_spec();
    if (!spec.ok())
      fail(spec.status());
  }
  return out;
}

// A default_value as a tensor: a scalar, or the values of a (nested) list / array row-major.
Tensor default_tensor(const std::string& feature, py::handle value) {
  if (auto t = scalar_tensor(value))
    return std::move(*t);
  py::module_ np = py::module_::import("numpy");
  py::list flat =
    np.attr("asarray")(value, py::arg("dtype") = "object").attr("ravel")().attr("tolist")();
  std::vector<Tensor> items;
  bool strings = false, floats = false;
  for (py::handle item : flat) {
    auto t = scalar_tensor(item);
    if (!t)
      fail(invalid_argument("parse_example: feature `" + feature + "`: `default_value` holds a " +
                            type_name(item) + "; expected numbers or strings"));
    strings = strings || t->dtype() == DType::string;
    floats = floats || t->dtype() == DType::float64;
    items.push_back(std::move(*t));
  }
  const auto n = static_cast<int64_t>(items.size());
  if (strings) {
    Tensor out(DType::string, Shape{n});
    for (int64_t i = 0; i < n; ++i) {
      if (items[i].dtype() != DType::string)
        fail(invalid_argument("parse_example: feature `" + feature +
                              "`: `default_value` mixes strings and numbers"));
      out.mutable_strings()[i] = items[i].strings()[0];
    }
    return out;
  }
  std::vector<double> as_double;
  std::vector<int64_t> as_int;
  for (const Tensor& t : items) {
    as_double.push_back(t.as_double());
    as_int.push_back(t.dtype() == DType::float64 ? 0 : t.as_int64());
  }
  return floats ? Tensor::vector<double>(as_double) : Tensor::vector<int64_t>(as_int);
}

// tf.data's compression_type of file sources: None or "" (none), "ZLIB", "GZIP".
std::string file_compression(const std::optional<std::string>& type, const char* op) {
  const std::string name = type.value_or("");
  auto c = compression_from_name(name, std::string{op} + ": `compression_type`");
  if (!c.ok())
    fail(c.status());
  return name;
}

Dataset interleave(const Dataset& d, FunctionRef fn, std::optional<int64_t> cycle_length,
                   std::optional<int64_t> block_length, std::optional<int64_t> num_parallel_calls,
                   std::optional<bool> deterministic) {
  // tf.data: None reads the cycle sequentially; AUTOTUNE or N > 1 in parallel.
  return d.interleave(std::move(fn), cycle_length.value_or(kAutotune), block_length.value_or(1),
                      num_parallel_calls.value_or(1), deterministic.value_or(true));
}

// features: (name, dtype name, var_len, shape, default or None) in output order.
using FeatureArgs = std::tuple<std::string, std::string, bool, Shape, py::object>;

Dataset parse_example(const Dataset& d, const std::vector<FeatureArgs>& features) {
  FeatureSpec spec;
  for (const auto& [name, dtype_text, var_len, shape, default_value] : features) {
    auto dtype = dtype_from_name(dtype_text);
    if (!dtype)
      fail(invalid_argument("parse_example: feature `" + name + "`: unknown dtype `" + dtype_text +
                            "`; expected int64, float32 or string"));
    if (var_len)
      spec.var_len(name, *dtype);
    else if (default_value.is_none())
      spec.fixed(name, *dtype, shape);
    else
      spec.fixed(name, *dtype, shape, default_tensor(name, default_value));
  }
  check(spec.check());
  return d.parse_example(spec);
}

} // namespace

void bind_dataset_ops(py::class_<Dataset>& ds) {
  using Files = std::vector<std::string>;
  const auto none = py::none();
  ds.def_static(
      "text_lines",
      [](Files files, std::optional<std::string> compression) {
        return Dataset::text_lines(std::move(files), file_compression(compression, "text_lines"));
      },
      py::arg("filenames"), py::arg("compression_type") = none)
    .def_static(
      "text_lines",
      [](std::string file, std::optional<std::string> compression) {
        return Dataset::text_lines({std::move(file)}, file_compression(compression, "text_lines"));
      },
      py::arg("filenames"), py::arg("compression_type") = none)
    .def_static(
      "tfrecord",
      [](Files files, std::optional<std::string> compression) {
        return Dataset::tfrecord(std::move(files), file_compression(compression, "tfrecord"));
      },
      py::arg("filenames"), py::arg("compression_type") = none)
    .def_static(
      "tfrecord",
      [](std::string file, std::optional<std::string> compression) {
        return Dataset::tfrecord({std::move(file)}, file_compression(compression, "tfrecord"));
      },
      py::arg("filenames"), py::arg("compression_type") = none)
    .def("interleave", &interleave, py::arg("map_func"), py::arg("cycle_length") = none,
         py::arg("block_length") = none, py::arg("num_parallel_calls") = none,
         py::arg("deterministic") = none);
  ds.def("_padded_batch", &padded_batch, py::arg("batch_size"), py::arg("padded_shapes"),
         py::arg("padding_values"), py::arg("drop_remainder"))
    .def("_parse_example", &parse_example, py::arg("features"))
    .def("_parse_example_text",
         [](const Dataset& d, const std::string& text) {
           auto spec = FeatureSpec::parse(text);
           if (!spec.ok())
             fail(spec.status()); // "parse_example: feature spec, character N: ..."
           check(spec->check());
           return d.parse_example(*spec);
         })
    .def("ignore_errors", &Dataset::ignore_errors, py::arg("log_warning") = false,
         "Drops the elements whose production failed (tf.data's ignore_errors); the number\n"
         "dropped is always logged, each error too with log_warning=True.");
  ds.def_static(
      "random", [](std::optional<int64_t> seed) { return Dataset::random(seed ? *seed : kNoSeed); },
      py::arg("seed") = none,
      "Pseudo-random int64 scalars, forever (tf.data's Dataset.random); the same sequence for\n"
      "the same seed. It has external state: see register_dataset's external_state_policy.")
    .def(
      "concatenate",
      [](const Dataset& d, const Dataset& other) {
        // tf.data raises TypeError at once for incompatible elements; a spec that cannot be
        // known yet (a function not registered so far) is left to validate().
        auto a = d.element_spec();
        auto b = other.element_spec();
        if (a.ok() && b.ok()) {
          auto joined = concatenate_spec(*a, *b);
          if (!joined.ok())
            throw py::type_error(joined.status().message());
        }
        return d.concatenate(other);
      },
      py::arg("dataset"), "This dataset's elements, then `dataset`'s (tf.data's concatenate).");
}

} // namespace conveyor_python
