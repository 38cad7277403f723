// padded_batch(batch_size, padded_shapes, padding_values, drop_remainder): like batch, but the
// components of a batch may differ in shape: each is padded to a common shape first, as in
// tf.data's padded_batch.
//   - padded_shapes: per component a rank-1 int tensor (`[]` for a scalar) whose entries are a
//     dimension to pad to, or -1 to pad to the longest in the batch. () = every dimension -1.
//     An element larger than a fixed dimension is an error naming the component and dimension.
//   - padding_values: per component a scalar (numbers convert to the component's dtype; strings
//     only pad strings). () = 0, false or "".
// Every element of a batch has the same dtypes and, per component, the same rank.
#include <cstdint>
#include <cstring>

#include "pipeline/tensor/dtype_convert.hpp"
#include "pipeline/kernels/grouping.hpp"
#include "pipeline/kernels/kernel.hpp"
#include "pipeline/graph/padding.hpp"

namespace conveyor::kernels {

namespace {

// Copies `src` into the leading corner of `dst_row` (a slice of the batch tensor starting at
// entry `base`) whose shape is `target` (each dimension >= the source's).
void copy_padded(const Tensor& src, const Shape& target, Tensor& dst, int64_t base) {
  const Shape& shape = src.shape();
  const int64_t n = src.num_elements();
  if (n == 0)
    return;
  const std::size_t rank = shape.size();
  const int64_t run = rank == 0 ? 1 : shape[rank - 1];
  const bool strings = src.dtype() == DType::string;
  const std::size_t width = dtype_size(src.dtype());
  std::vector<int64_t> index(rank, 0); // over the outer dimensions (all but the last)
  for (int64_t from = 0; from < n; from += run) {
    int64_t to = 0;
    for (std::size_t d = 0; d + 1 < rank; ++d)
      to = to * target[d] + index[d];
    if (rank > 0)
      to *= target[rank - 1];
    to += base;
    if (strings) {
      for (int64_t k = 0; k < run; ++k)
        dst.mutable_strings()[static_cast<std::size_t>(to + k)] =
          src.strings()[static_cast<std::size_t>(from + k)];
    } else {
      std::memcpy(dst.mutable_bytes().data() + to * width, src.bytes().data() + from * width,
                  static_cast<std::size_t>(run) * width);
    }
    for (std::size_t d = rank >= 1 ? rank - 1 : 0; d-- > 0;) { // next outer index
      if (++index[d] < shape[d])
        break;
      index[d] = 0;
    }
  }
}

// The padding scalar converted to the component's dtype as tf.cast would (numbers of any dtype
// pad any numeric or bool component).
std::vector<unsigned char> padding_bytes(const Tensor& scalar, DType dtype) {
  Tensor converted{dtype, Shape{}};
  store_entry(converted, 0, load_entry(scalar, 0));
  return converted.bytes().to_vector();
}

Expected<Element> pad_and_stack(const std::vector<Element>& elements, const PaddingConfig& config) {
  const Element& first = elements.front();
  const std::size_t components = first.size();
  if (!config.shapes.empty() && config.shapes.size() != components)
    return invalid_argument("padded_batch: `padded_shapes` has " +
                            std::to_string(config.shapes.size()) +
                            " component(s), the elements have " + std::to_string(components));
  if (!config.values.empty() && config.values.size() != components)
    return invalid_argument("padded_batch: `padding_values` has " +
                            std::to_string(config.values.size()) +
                            " component(s), the elements have " + std::to_string(components));
  std::vector<Tensor> out;
  out.reserve(components);
  for (std::size_t c = 0; c < components; ++c) {
    const std::string comp = "padded_batch: component " + std::to_string(c);
    const DType dtype = first[c].dtype();
    const std::size_t rank =
      config.shapes.empty() ? first[c].shape().size() : config.shapes[c].size();
    Shape target(rank, 0);
    for (std::size_t e = 0; e < elements.size(); ++e) {
      if (elements[e].size() != components)
        return invalid_argument("padded_batch: element " + std::to_string(e) + " has " +
                                std::to_string(elements[e].size()) + " components, element 0 has " +
                                std::to_string(components));
      const Tensor& t = elements[e][c];
      if (t.dtype() != dtype)
        return invalid_argument(comp + " has dtype " + dtype_name(dtype) + " in element 0 and " +
                                dtype_name(t.dtype()) + " in element " + std::to_string(e));
      if (t.shape().size() != rank)
        return invalid_argument(
          comp + " of element " + std::to_string(e) + " has shape " + shape_string(t.shape()) +
          (config.shapes.empty() ? ", element 0 has rank " : ", the padded shape has rank ") +
          std::to_string(rank));
      for (std::size_t d = 0; d < rank; ++d)
        target[d] = std::max(target[d], t.shape()[d]);
    }
    if (!config.shapes.empty()) {
      for (std::size_t d = 0; d < rank; ++d) {
        const int64_t want = config.shapes[c][d];
        if (want == kUnknownDim)
          continue;
        if (target[d] > want)
          return invalid_argument(
            comp + ": dimension " + std::to_string(d) + " is " + std::to_string(target[d]) +
            " in this batch, larger than its padded size " + std::to_string(want));
        target[d] = want;
      }
    }
    Shape batch_shape = target;
    batch_shape.insert(batch_shape.begin(), static_cast<int64_t>(elements.size()));
    // The padded batch can be far larger than its parts (padded_shapes=[50000000]): checked
    // against the budget before it is allocated. Saturates instead of overflowing.
    const int64_t width = dtype == DType::string ? static_cast<int64_t>(sizeof(std::string))
                                                 : static_cast<int64_t>(dtype_size(dtype));
    int64_t bytes = width;
    for (int64_t d : batch_shape)
      bytes = d != 0 && bytes > INT64_MAX / d ? INT64_MAX : bytes * d;
    CONVEYOR_RETURN_IF_ERROR(check_allocation(bytes, "padded_batch"));
    Tensor batch(dtype, batch_shape);
    int64_t row = 1;
    for (int64_t d : target)
      row *= d;
    if (!config.values.empty()) {
      const Tensor& pad = config.values[c];
      if ((pad.dtype() == DType::string) != (dtype == DType::string))
        return invalid_argument(comp + " of dtype " + dtype_name(dtype) +
                                " cannot be padded with a " + dtype_name(pad.dtype()) + " value");
      if (dtype == DType::string) {
        for (std::string& s : batch.mutable_strings())
          s = pad.strings()[0];
      } else {
        auto bytes = padding_bytes(pad, dtype);
        const std::size_t width = bytes.size();
        for (std::size_t i = 0; i * width < batch.mutable_bytes().size(); ++i)
          std::memcpy(batch.mutable_bytes().data() + i * width, bytes.data(), width);
      }
    }
    for (std::size_t e = 0; e < elements.size(); ++e)
      copy_padded(elements[e][c], target, batch, static_cast<int64_t>(e) * row);
    out.push_back(std::move(batch));
  }
  return Element{std::move(out)};
}

} // namespace

MakeResult make_padded_batch(const NodePtr& node, const KernelContext& kctx) {
  const int64_t batch_size = node->int_attr("batch_size");
  if (batch_size < 1)
    return invalid_argument("`padded_batch` argument `batch_size` must be positive, got " +
                            std::to_string(batch_size));
  auto config = padding_config(*node);
  if (!config.ok())
    return config.status();
  auto input = make_input(node, kctx);
  if (!input.ok())
    return input.status();
  auto combine = [config = std::move(*config)](const std::vector<Element>& elements) {
    return pad_and_stack(elements, config);
  };
  return IteratorPtr(std::make_unique<GroupingIterator>(
    std::move(*input), batch_size, node->bool_attr("drop_remainder"), kctx.memory(), "padded_batch",
    std::move(combine), kctx.stop()));
}

} // namespace conveyor::kernels
