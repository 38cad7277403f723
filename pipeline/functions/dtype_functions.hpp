// The built-in functions that change dtypes, as map(cast(dtype="uint8")) and
// map(bitcast(dtype="float16")) in the text form:
//   cast     tf.cast on every component (numeric and bool; strings are refused)
//   bitcast  tf.bitcast on every component: the same bytes read as another numeric dtype. A
//            narrower target adds a last dimension (int64 -> uint16 gives [..., 4]); a wider one
//            needs a last dimension of exactly the ratio and removes it.
#pragma once

#include "conveyor/functions.hpp"

namespace conveyor {

FunctionDef cast_function();
FunctionDef bitcast_function();

} // namespace conveyor
