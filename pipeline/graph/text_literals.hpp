// Spelling of scalar literals, shared by Tensor/Element printing (tensor_format.cpp, which
// implements these) and the dataset text form (text_form.cpp, which parses them back).
#pragma once

#include <string>
#include <string_view>

namespace conveyor::text {

// The shortest text that parses back to exactly `v` (std::to_chars), always with a '.' or an
// exponent so that it reads as a float: 2.5, 3.0, 1e+20, -0.0, inf, -inf, nan, -nan.
// (A NaN's payload bits are not kept: every NaN prints as nan or -nan.)
std::string format_float32(float v);
std::string format_float64(double v);

// Double-quoted with the escapes \\ \" \n \t \r and \xHH for every other byte below 0x20 and
// for 0x7f; bytes >= 0x80 are copied as they are (so UTF-8 text stays readable).
std::string quote_string(std::string_view s);

} // namespace conveyor::text
