#!/usr/bin/env bash
# Here: packs the libFuzzer harnesses NAME... of build-fuzz (cmake --preset fuzz) with the shared
# libraries they need that the GPU machine lacks into .carry/fuzzpack.tar.xz, for scripts/device/fuzz.sh.
set -euo pipefail
D=$(mktemp -d)/fzpack
mkdir -p "$D/lib"
for name in "$@"; do
  cp build-fuzz/fuzz/fuzz_"$name" "$D/"
  strip --strip-debug "$D/fuzz_$name"  # 6 of its 15 MB; crash reports keep the function names
  ldd build-fuzz/fuzz/fuzz_"$name" | awk '/libdnnl|libomp|libOpenCL/ {print $3}' | xargs -r cp -L -t "$D/lib/"
done
tar cf - -C "$(dirname "$D")" fzpack | xz -9 -T0 > .carry/fuzzpack.tar.xz
rm -rf "$(dirname "$D")"
ls -la .carry/fuzzpack.tar.xz
