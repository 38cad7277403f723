#!/usr/bin/env bash
# The format check (ctest format_check): every C++ file git knows is laid out as .clang-format
# says. Fix with: scripts/format.sh (clang-format -i over the same files).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
cf=$(command -v clang-format-14 || command -v clang-format || true)
if [ -z "$cf" ]; then
  echo "format_check: clang-format not found (Debian: apt-get install clang-format)"; exit 77
fi
if ! "$cf" --version | grep -q 'version 14\.'; then
  # Other versions lay out some constructs differently; the tree is kept in version 14's layout.
  echo "format_check: needs clang-format 14, found: $("$cf" --version)"; exit 77
fi
mapfile -t files < <(git ls-files '*.cpp' '*.hpp' '*.h' '*.cc' 2>/dev/null || true)
if [ ${#files[@]} -eq 0 ]; then
  # Not a git checkout (a source archive): list the files instead.
  mapfile -t files < <(find . -path ./build -prune -o -path './build-*' -prune -o \
                         \( -name '*.cpp' -o -name '*.hpp' \) -print)
fi
bad=()
for f in "${files[@]}"; do
  if ! "$cf" --dry-run --Werror "$f" >/dev/null 2>&1; then bad+=("$f"); fi
done
if [ ${#bad[@]} -ne 0 ]; then
  echo "format_check: ${#bad[@]} file(s) are not formatted as .clang-format says:"
  printf '  %s\n' "${bad[@]}"
  echo "fix: scripts/format.sh"
  exit 1
fi
echo "format_check: ${#files[@]} files formatted"
