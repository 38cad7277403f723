#!/usr/bin/env bash
# Lays out every C++ file git knows as .clang-format says (clang-format 14, Debian 12). Boost
# program_options' add_options() chains are fenced with clang-format off/on first: clang-format
# cannot lay out the chained call operator readably (scripts/guard_program_options.py).
set -euo pipefail
cd "$(dirname "$0")/.."
cf=$(command -v clang-format-14 || command -v clang-format)
python3 scripts/guard_program_options.py
git ls-files -z '*.cpp' '*.hpp' '*.h' '*.cc' | xargs -0 "$cf" -i
