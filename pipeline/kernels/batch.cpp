// batch(batch_size, drop_remainder): stacks consecutive elements along a new first dimension; the
// last, smaller batch is kept unless drop_remainder. unbatch(): the inverse, one element per row.
#include "pipeline/kernels/grouping.hpp"
#include "pipeline/kernels/kernel.hpp"

namespace conveyor::kernels {

namespace {

// Stacks component by component; every element must have the same dtypes and shapes as the first.
Expected<Element> stack_elements(const std::vector<Element>& elements) {
  const Element& first = elements.front();
  for (std::size_t e = 1; e < elements.size(); ++e) {
    const Element& other = elements[e];
    if (other.size() != first.size())
      return invalid_argument("`batch`: element " + std::to_string(e) + " has " +
                              std::to_string(other.size()) + " components, element 0 has " +
                              std::to_string(first.size()));
    for (std::size_t c = 0; c < first.size(); ++c) {
      if (other[c].dtype() != first[c].dtype())
        return invalid_argument(std::string("`batch`: cannot batch component ") +
                                std::to_string(c) + " of dtypes " + dtype_name(first[c].dtype()) +
                                " (element 0) and " + dtype_name(other[c].dtype()) + " (element " +
                                std::to_string(e) + ")");
      if (other[c].shape() != first[c].shape())
        return invalid_argument(
          "`batch`: cannot batch component " + std::to_string(c) + " of shapes " +
          shape_string(first[c].shape()) + " (element 0) and " + shape_string(other[c].shape()) +
          " (element " + std::to_string(e) + "); all elements of a batch need the same shape");
    }
  }
  std::vector<Tensor> stacked;
  stacked.reserve(first.size());
  for (std::size_t c = 0; c < first.size(); ++c) {
    // Checked against the budget before it is allocated (the parts are already charged).
    int64_t bytes = 0;
    for (const Element& element : elements)
      bytes += static_cast<int64_t>(element[c].byte_size());
    if (first[c].dtype() == DType::string)
      bytes +=
        static_cast<int64_t>(elements.size() * first[c].num_elements() * sizeof(std::string));
    CONVEYOR_RETURN_IF_ERROR(check_allocation(bytes, "batch"));
    std::vector<Tensor> parts;
    parts.reserve(elements.size());
    for (const Element& element : elements)
      parts.push_back(element[c]);
    auto tensor = Tensor::stack(parts);
    if (!tensor.ok())
      return tensor.status().with_context("`batch` component " + std::to_string(c));
    stacked.push_back(std::move(*tensor));
  }
  return Element{std::move(stacked)};
}

class UnbatchIterator : public Iterator {
public:
  explicit UnbatchIterator(IteratorPtr input) : input_(std::move(input)) {}

  Status get_next(Element& out, bool& end_of_sequence) override {
    end_of_sequence = false;
    while (row_ >= rows_) { // skips elements with zero rows
      bool end = false;
      CONVEYOR_RETURN_IF_ERROR(input_->get_next(current_, end));
      if (end) {
        end_of_sequence = true;
        return Status::OK();
      }
      CONVEYOR_RETURN_IF_ERROR(count_rows());
    }
    std::vector<Tensor> parts;
    parts.reserve(current_.size());
    for (const Tensor& component : current_.components)
      parts.push_back(component.slice(row_));
    ++row_;
    out = Element{std::move(parts)};
    return Status::OK();
  }

  Status save(IteratorStateWriter& out) override {
    out.put_tag("unbatch");
    out.put_int(row_);
    out.put_int(rows_);
    if (row_ < rows_) // the rest of the current batch
      out.put_element(current_);
    return input_->save(out);
  }

  Status restore(IteratorStateReader& in) override {
    CONVEYOR_RETURN_IF_ERROR(in.expect_tag("unbatch"));
    const int64_t row = in.get_int();
    const int64_t rows = in.get_int();
    if (row < rows)
      current_ = in.get_element();
    CONVEYOR_RETURN_IF_ERROR(in.status());
    if (row < rows) {
      CONVEYOR_RETURN_IF_ERROR(count_rows());
      if (rows_ != rows || row < 0)
        return data_loss("pipeline state: `unbatch` holds a batch of " + std::to_string(rows_) +
                         " rows where its state says " + std::to_string(rows));
    }
    row_ = row;
    rows_ = rows;
    return input_->restore(in);
  }

private:
  Status count_rows() {
    row_ = rows_ = 0;
    if (current_.size() == 0)
      return invalid_argument("`unbatch` got an element without components");
    for (std::size_t c = 0; c < current_.size(); ++c) {
      const Shape& shape = current_[c].shape();
      if (shape.empty())
        return invalid_argument("`unbatch`: component " + std::to_string(c) +
                                " is a scalar; every component needs a leading batch dimension");
      if (shape[0] != current_[0].shape()[0])
        return invalid_argument("`unbatch`: components have different leading dimensions, shapes " +
                                shape_string(current_[0].shape()) + " and " + shape_string(shape) +
                                " (component " + std::to_string(c) + ")");
    }
    rows_ = current_[0].shape()[0];
    return Status::OK();
  }

  IteratorPtr input_;
  Element current_;
  int64_t row_ = 0;
  int64_t rows_ = 0;
};

} // namespace

MakeResult make_batch(const NodePtr& node, const KernelContext& kctx) {
  const int64_t batch_size = node->int_attr("batch_size");
  if (batch_size < 1)
    return invalid_argument("`batch` argument `batch_size` must be positive, got " +
                            std::to_string(batch_size));
  auto input = make_input(node, kctx);
  if (!input.ok())
    return input.status();
  return IteratorPtr(std::make_unique<GroupingIterator>(
    std::move(*input), batch_size, node->bool_attr("drop_remainder"), kctx.memory(), "batch",
    stack_elements, kctx.stop()));
}

MakeResult make_unbatch(const NodePtr& node, const KernelContext& kctx) {
  auto input = make_input(node, kctx);
  if (!input.ok())
    return input.status();
  return IteratorPtr(std::make_unique<UnbatchIterator>(std::move(*input)));
}

} // namespace conveyor::kernels
