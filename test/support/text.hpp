// Small text checks the tests share.
#pragma once

#include <string>

namespace conveyor::testing {

inline bool contains(const std::string& text, const std::string& needle) {
  return text.find(needle) != std::string::npos;
}

} // namespace conveyor::testing
