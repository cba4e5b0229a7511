#!/usr/bin/env bash
# Here (a machine with the CUDA toolkit and cuDNN in /usr/local/cuda): builds the GPU machine's jiriki
# ahead of time into .carry/bin/jiriki, so that a fresh GPU machine starts in seconds instead of
# building for 4-5 minutes of device time. The binary has what the GPU machine lacks built in or
# left out: CUDA runtime and Boost.Filesystem static, no oneDNN (the GPU machine has none), no MPI
# (its OpenMPI differs), no embedded networks (every script names the network it plays: the shipped
# ones would add 19 MB to what travels); cuDNN, cuBLAS and NCCL are taken from the GPU machine. Beside it,
# .carry/bin/jiriki.sources holds the sources' hash (sources_hash in env.sh): `build` on the GPU
# machine takes the binary only while the tree it travels with has the same sources.
#
#   bash scripts/device/prebuild.sh [BUILD_DIR]      (default /tmp/jiriki-build-device)
set -euo pipefail
cd "$(dirname "$0")/../.."
source scripts/device/sources.sh
DIR=${1:-/tmp/jiriki-build-device}
cmake -S . -B "$DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 -DJIRIKI_DNNL=OFF \
  -DJIRIKI_TESTS=OFF -DJIRIKI_EMBED_NETWORKS=OFF -DCMAKE_DISABLE_FIND_PACKAGE_MPI=ON -DBoost_USE_STATIC_LIBS=ON -DCMAKE_CUDA_RUNTIME_LIBRARY=Static \
  | grep -E "jiriki|Error|error"
cmake --build "$DIR" --target jiriki
mkdir -p .carry/bin
cp "$DIR/jiriki" .carry/bin/jiriki
sources_hash > .carry/bin/jiriki.sources
ls -l .carry/bin/jiriki
echo "needs: $(ldd .carry/bin/jiriki | awk '/=>/ {print $1}' | grep -vE '^lib(c|m|gcc_s|stdc\+\+|pthread|dl|rt)\.so' | tr '\n' ' ')"
