#!/usr/bin/env bash
# Checks the installed package the way a user consumes it (ctest: package_consumer, package_conan).
#   scripts/check_package.sh BUILD_DIR           install BUILD_DIR into a temporary prefix, then
#       - every installed header includes only <conveyor/...>, CAF and the standard library, and
#         all of them compile together with only -I<prefix>/include (flags from conveyor.pc);
#       - a one-file program links with `pkg-config --libs conveyor` alone and runs;
#       - examples/cpp-consumer builds with find_package(conveyor) and runs standalone;
#       - examples/plugin builds headers-only (a few KB) and the installed `conveyor run --plugin`
#         runs its function on worker processes.
#       (That it holds no simulator is scripts/check_no_sim.sh's job, ctest no_sim_in_product.)
#   scripts/check_package.sh BUILD_DIR --conan   `conan create conan/` (recipe + conan/test_package);
#                                                exit 77 (ctest: skipped) where conan is not installed.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:?usage: check_package.sh BUILD_DIR [--conan]}" && pwd)
mode=${2:-}

if [ "$mode" = "--conan" ]; then
  if ! command -v conan >/dev/null 2>&1; then
    echo "SKIPPED: conan is not installed; the conan/ recipe was not checked (CI with conan runs it)"
    exit 77
  fi
  conan profile detect --exist-ok >/dev/null
  exec conan create "$root/conan" --build=missing
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/conveyor-package.XXXXXX")
trap 'rm -rf "$work"' EXIT
prefix=$work/prefix
step() { echo "== $*"; }
launcher=()
if command -v ccache >/dev/null 2>&1; then launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache); fi

step "install into $prefix"
cmake --install "$build" --prefix "$prefix" >"$work/install.log" || { cat "$work/install.log"; exit 1; }
for f in include/conveyor/client.hpp include/conveyor/server.hpp include/conveyor/dataset.hpp \
         include/conveyor/version.hpp lib*/cmake/conveyor/conveyorConfig.cmake \
         lib*/cmake/conveyor/conveyorConfigVersion.cmake lib*/pkgconfig/conveyor.pc bin/conveyor; do
  compgen -G "$prefix/$f" >/dev/null || { echo "FAIL: $f is not installed"; exit 1; }
done
"$prefix/bin/conveyor" --version

step "installed headers include only public headers"
bad=$(grep -rn '#include "' "$prefix/include/conveyor" | grep -v '#include "conveyor/' || true)
if [ -n "$bad" ]; then echo "FAIL: installed headers include non-public headers:"; echo "$bad"; exit 1; fi

step "every installed header, compiled with pkg-config's flags only; a program linked the same way"
export PKG_CONFIG_PATH="$(dirname "$(compgen -G "$prefix/lib*/pkgconfig/conveyor.pc")")"
{
  for h in $(cd "$prefix/include" && find conveyor -name '*.hpp' | sort); do echo "#include <$h>"; done
  cat <<'CPP'
#include <cstdio>
int main() {
  auto ds = conveyor::Dataset::range(3).map("square");
  std::printf("conveyor %s, protocol %u, %s\n", conveyor::version(), conveyor::protocol_version(),
              ds.validate().ok() ? "dataset ok" : ds.validate().to_string().c_str());
  return ds.validate().ok() && std::string(conveyor::version()) == CONVEYOR_VERSION ? 0 : 1;
}
CPP
} >"$work/all_headers.cpp"
# shellcheck disable=SC2046
"${CXX:-c++}" -std=c++17 -Wall -Wextra "$work/all_headers.cpp" -o "$work/all_headers" \
  $(pkg-config --cflags --libs conveyor)
"$work/all_headers"

step "examples/cpp-consumer with find_package(conveyor)"
cmake -S "$root/examples/cpp-consumer" -B "$work/consumer" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$prefix" "${launcher[@]}" >"$work/configure.log" || { cat "$work/configure.log"; exit 1; }
cmake --build "$work/consumer"
"$work/consumer/cpp-consumer"

step "examples/plugin: a headers-only function plugin, loaded by the installed conveyor"
cmake -S "$root/examples/plugin" -B "$work/plugin" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$prefix" "${launcher[@]}" >"$work/configure.log" || { cat "$work/configure.log"; exit 1; }
cmake --build "$work/plugin"
plugin=$work/plugin/conveyor_clip.so
size=$(stat -c %s "$plugin")
[ "$size" -lt 200000 ] || { echo "the plugin is $size bytes: it should hold its own code only"; exit 1; }
# Output is captured before grep: with pipefail, `grep -q` exiting at its match
# would fail the pipeline whenever the writer got SIGPIPE on a later write.
functions=$("$prefix/bin/conveyor" inspect --functions --plugin "$plugin")
grep -qF "clip(lo: float = 0.0, hi: float = 1.0)" <<<"$functions" ||
  { echo "inspect --functions does not list the plugin's clip:"; echo "$functions"; exit 1; }
# Each run's output (and its nodes' logs) is shown when it fails.
run_clip() { # run_clip LOG_DIR conveyor-run-flags...
  local logs=$1; shift
  mkdir -p "$logs"
  "$prefix/bin/conveyor" run --plugin "$plugin" --log-dir "$logs" "$@" 2>&1 ||
    { echo "conveyor run $* failed"; tail -n 20 "$logs"/* 2>/dev/null; return 1; }
}
out=$(run_clip "$work/run-off" --dataset 'range(10).map(clip(lo=2, hi=6))' --mode off \
  --workers 2 --samples 0) || { echo "$out"; exit 1; }
grep -q "summary: 20 elements" <<<"$out" || { echo "$out"; exit 1; }
out=$(run_clip "$work/run-dynamic" --dataset 'range(10).map(clip(lo=2, hi=6))' --mode dynamic \
  --workers 1 --samples 10) || { echo "$out"; exit 1; }
first=$(echo "$out" | sed -n '/^first elements:/,/^summary/p' | grep -E '^  [0-9]' | tr -d ' ' |
  sort -n | tr '\n' ' ')
[ "$first" = "2 2 2 3 4 5 6 6 6 6 " ] || { echo "clip gave: $first"; echo "$out"; exit 1; }
if err=$(run_clip "$work/run-bad" --dataset 'range(3).map(clip(lo=5, hi=1))' --workers 1); then
  echo "clip(lo=5, hi=1) should fail"; exit 1
fi
grep -qF 'clip: `lo` (5.000000) must not be above `hi` (1.000000)' <<<"$err" || { echo "$err"; exit 1; }
if [ -f "$build/conveyor_pool_alloc.so" ]; then
  step "the installed conveyor's Python pool finds its allocator (LIBDIR/conveyor/, not bin/)"
  compgen -G "$prefix/lib*/conveyor/conveyor_pool_alloc.so" >/dev/null ||
    { echo "FAIL: conveyor_pool_alloc.so is not installed in LIBDIR/conveyor/"; exit 1; }
  [ ! -e "$prefix/bin/conveyor_pool_alloc.so" ] || { echo "FAIL: a module installed in bin/"; exit 1; }
  logs=$work/run-pool
  mkdir -p "$logs"
  out=$("$prefix/bin/conveyor" run --log-dir "$logs" --workers 1 --samples 3 --dataset \
    'range(3).map(python(import="operator:neg", processes=2, qualname="operator:neg"), num_parallel_calls=2)' 2>&1) ||
    { echo "$out"; tail -n 20 "$logs"/*; exit 1; }
  grep -q "summary: 3 elements" <<<"$out" || { echo "$out"; exit 1; }
  if grep -h "conveyor_pool_alloc" "$logs"/*; then
    echo "FAIL: the installed worker's pool did not find conveyor_pool_alloc.so"; exit 1
  fi
fi
echo "package check passed"
