// The arguments of padded_batch (ops.cpp) read out of a node, checked: shared by the kernel,
// validate() and element_spec(). See kernels/padded_batch.cpp for the semantics.
#pragma once

#include <vector>

#include "pipeline/tensor/element.hpp"
#include "pipeline/graph/graph.hpp"
#include "pipeline/runtime/status.hpp"

namespace conveyor {

struct PaddingConfig {
  std::vector<PartialShape> shapes; // empty: pad every dimension to the batch's longest
  std::vector<Tensor> values;       // empty: 0 / false / ""; else one scalar per component
};

// invalid_argument naming the argument and component when a padded shape is not a rank-1 int
// tensor of entries >= -1, or a padding value is not a scalar.
Expected<PaddingConfig> padding_config(const Node& padded_batch);

// The `padded_shapes` element for these shapes (kUnknownDim = pad to the longest): one rank-1
// int64 tensor per component. The builder stores it; the text form canonicalises its literal to it
// (`[]` would otherwise be float32, `int32([2])` int32) and prints it back as plain lists:
// padded_shapes=([], [-1, 3]).
Element padded_shapes_element(const std::vector<PartialShape>& shapes);
// Rank-1 components that are empty or int32 become int64; anything else stays for validate().
Element canonical_padded_shapes(Element given);
// "[]", "[-1, 3]" or a tuple of them.
std::string padded_shapes_text(const Element& shapes);

} // namespace conveyor
