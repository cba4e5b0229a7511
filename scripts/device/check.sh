#!/usr/bin/env bash
# On the GPU machine: the checks after a change that touches the CUDA side. Builds jiriki and its
# tests with CUDA, runs every GPU test (CTest's gpu label, as CI would on a
# machine with a GPU; its output in $OUT/check_ctest.txt), and runs selfplay, train and nn eval with no --backend (auto must pick the
# GPU here). Everything goes to $OUT/check.log.
#
#   run with carry [".carry/catch2", ".carry/include", ".carry/lib"]:  bash scripts/device/check.sh
set -uo pipefail
source scripts/device/env.sh
start check.log

step "machine"
machine

step "build"
build jiriki jiriki_tests
J=$PWD/build-device/jiriki

step "ctest -L gpu (every [gpu] test case as its own process, 4 cuDNN candidates per convolution)"
(cd build-device && time JIRIKI_CUDNN_CANDIDATES=4 ctest -L gpu -j 2 --timeout 300 --output-on-failure > "$OUT/check_ctest.txt" 2>&1; tail -25 "$OUT/check_ctest.txt")

step "selfplay, train and nn eval with no --backend"
W=/tmp/check-auto
rm -rf "$W" && mkdir -p "$W"
"$J" nn init --blocks 2 --channels 32 -o "$W/net.jnn" 2>&1 | tail -2
"$J" selfplay --model "$W/net.jnn" --out "$W/sp" --games 4 --playouts 50 2>&1 | grep -Ei "backend|cuda|cpu|games" | head -5
"$J" train --data "$W/sp" --model-out "$W/trained.jnn" --blocks 2 --channels 32 --steps 20 --batch 64 2>&1 | grep -Ei "backend|cuda|cpu|step 20" | head -5
"$J" nn eval "$W/trained.jnn" --top 3 2>&1 | head -6
