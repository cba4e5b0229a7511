#!/usr/bin/env bash
# Here: packs the libFuzzer harnesses NAME... of build-fuzz (cmake --preset fuzz) with the shared
# libraries they need that the GPU machine lacks into .carry/fuzzpack.tar.xz, for scripts/device/fuzz.sh.
set -euo pipefail
D=$(mktemp -d)/fzpack
mkdir -p "$D/lib"
for name in "$@"; do
  cp build-fuzz/fuzz/fuzz_"$name" "$D/"
  ldd build-fuzz/fuzz/fuzz_"$name" | awk '/libdnnl|libomp|libOpenCL/ {print $3}' | xargs -r cp -L -t "$D/lib/"
done
tar cJf .carry/fuzzpack.tar.xz -C "$(dirname "$D")" fzpack
rm -rf "$(dirname "$D")"
ls -la .carry/fuzzpack.tar.xz
