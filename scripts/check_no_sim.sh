#!/usr/bin/env bash
# Production free of test machinery (ctest: no_sim_in_product). Builds nothing: inspects what
# BUILD_DIR already holds.
#   scripts/check_no_sim.sh BUILD_DIR
# - `nm -C` of BUILD_DIR/conveyor and, after `cmake --install` into a temporary prefix, of every
#   installed library and program: no symbol of the simulator (namespace conveyor::sim, sim/sim.hpp's
#   SimConfig/simulate/sweep/Fault...), no planted bug, no planted-bug hook or hooks installer
#   (conveyor::actors::hooks, node/hooks.hpp: production objects have no hook call at all);
# - the installed tree has no sim header, no conveyor_sim/conveyor_hooked library, no conveyor-sim
#   and no conveyor::sim target.
# Each binary must show conveyor symbols at all, so a stripped file cannot pass by showing nothing.
set -euo pipefail
build=$(cd "${1:?usage: check_no_sim.sh BUILD_DIR}" && pwd)
command -v nm >/dev/null || { echo "FAIL: nm (binutils) is not installed"; exit 1; }

# What only the simulator build defines (sim/, sim/sim.hpp, node/hooks.hpp under CONVEYOR_SIM_HOOKS).
forbidden='conveyor::sim::|conveyor::actors::hooks::|[Pp]lant(ed)?_?[Bb]ug|'
forbidden+='conveyor::(simulate|sweep|replay_command|parse_faults)\(|'
forbidden+='conveyor::(SimConfig|SimResult|SimConsumer|SweepResult|Fault|FaultSpec)([^A-Za-z0-9_]|$)'

failed=0
fail() { echo "FAIL: $*"; failed=1; }

# check_symbols FILE: FILE has conveyor symbols and none of the forbidden ones.
check_symbols() {
  local file=$1 symbols bad
  symbols=$(nm -C "$file" 2>/dev/null || true)
  if ! grep -q 'conveyor::' <<<"$symbols"; then
    fail "$file: nm shows no conveyor symbol (stripped or not a conveyor object?), nothing to check"
    return
  fi
  # hooks::kCompiledIn is the switch itself (constexpr false in production objects; an unoptimized
  # build keeps it as a local constant): its presence says no hook is compiled in.
  bad=$(grep -E "$forbidden" <<<"$symbols" | grep -v 'conveyor::actors::hooks::kCompiledIn$' |
        sort -u | head -20 || true)
  if [ -n "$bad" ]; then
    fail "$file contains simulator / planted-bug / hooks symbols (first 20):"
    echo "$bad"
  else
    echo "ok: $file ($(grep -c 'conveyor::' <<<"$symbols") conveyor symbols, none from the simulator)"
  fi
}

[ -x "$build/conveyor" ] || { echo "FAIL: $build/conveyor is not built"; exit 1; }
check_symbols "$build/conveyor"

work=$(mktemp -d "${TMPDIR:-/tmp}/conveyor-no-sim.XXXXXX")
trap 'rm -rf "$work"' EXIT
prefix=$work/prefix
cmake --install "$build" --prefix "$prefix" >"$work/install.log" || { cat "$work/install.log"; exit 1; }

n=0
while IFS= read -r -d '' f; do
  check_symbols "$f"
  n=$((n + 1))
done < <(find "$prefix" -type f \( -name '*.a' -o -name '*.so*' -o -path '*/bin/*' \) -print0)
[ "$n" -gt 0 ] || fail "the install into $prefix holds no library or program"

sim_files=$(cd "$prefix" && find . \( -iname '*sim*' -o -iname '*hook*' -o -iname '*planted*' \) | sort)
[ -z "$sim_files" ] || { fail "installed simulator files:"; echo "$sim_files"; }
if grep -rlE 'conveyor::sim|conveyor_sim|conveyor_hooked' "$prefix" >/dev/null 2>&1; then
  fail "installed files mention the simulator:"
  grep -rlE 'conveyor::sim|conveyor_sim|conveyor_hooked' "$prefix"
fi

if [ "$failed" -ne 0 ]; then
  echo "no-sim check FAILED"
  exit 1
fi
echo "no-sim check passed: conveyor and the installed package contain no simulator"
