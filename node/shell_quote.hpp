// One argument as one /bin/sh word: for the command lines conveyor prints (the simulator's replay
// line) and runs (`conveyor run --autoscale`'s scale command).
#pragma once

#include <string>

namespace conveyor {

inline std::string shell_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'')
      out += "'\\''";
    else
      out += c;
  }
  return out + "'";
}

} // namespace conveyor
