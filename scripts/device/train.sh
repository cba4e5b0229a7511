#!/usr/bin/env bash
# On the GPU machine (see the device tool's docs): builds jiriki with CUDA, runs the GPU trainer's
# tests (tests/test_train_cuda.cpp: gradients, losses and optimizer steps against the CPU trainer),
# then scripts/torch_train_reference.py, which runs `jiriki bench train --backend cuda` on a
# 10-block, 192-channel network, compares jiriki's gradients with PyTorch's and times PyTorch's
# training step on the same network. Everything goes to $OUT.
#
#   run with carry [".carry"]:  bash scripts/device/train.sh [BATCHES]
#
# STEPS (default "tests compare") picks what runs after the build: tests, compare, profile (ncu's
# durations of the kernels of one training step at each batch size, summarised by
# scripts/ncu_summary.py; its engine choices, timed under ncu, stay out of the choice file).
# That machine has CUDA, cuDNN (PyTorch's wheel), cmake and ninja but no Catch2 package: the tests
# use the single header carried in .carry/catch2.
set -uo pipefail
OUT=${OUT:-/tmp/jiriki-out}
BATCHES=${1:-256,1024}
STEPS=${STEPS:-tests compare}
mkdir -p "$OUT"
exec > >(tee "$OUT/train_device.log") 2>&1
step() { echo; echo "=== $* ($(date +%T))"; }

step "machine"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm --format=csv
nproc

step "cuDNN"
# The system's, else the one inside PyTorch's wheels (lib has only libcudnn.so.9, no plain .so).
source scripts/device/env.sh

step "build"
configure || exit 1
cmake --build build-device -j "$(nproc)" --target jiriki 2>&1 | grep -E "error|FAILED" ; [[ -x build-device/jiriki ]] || exit 1
# Other helpers' test files may be mid-edit: if the whole suite fails to build, build ours alone.
TESTS=build-device/jiriki_tests
if ! cmake --build build-device -j "$(nproc)" --target jiriki_tests > "$OUT/tests_build.log" 2>&1; then
  grep -E "error" "$OUT/tests_build.log" | head -5
  echo "jiriki_tests failed to build; building the GPU trainer's tests alone"
  TESTS=build-device/jiriki_train_cuda_tests
  g++ -std=c++20 -O2 -I. -I.carry/catch2 -I/usr/local/cuda/include -I"$CUDNN_INC" -DJIRIKI_HAVE_CUDA=1 \
    -DJIRIKI_SOURCE_DIR="\"$PWD\"" -DJIRIKI_BINARY="\"$PWD/build-device/jiriki\"" \
    tests/main.cpp tests/test_train_cuda.cpp -o "$TESTS" build-device/libjiriki_training.a build-device/libjiriki_nn.a \
    build-device/libjiriki_rules.a build-device/libjiriki_common.a -L/usr/local/cuda/lib64 -lcudart -lcublas \
    "$CUDNN_LIB" -lpthread -fopenmp || exit 1
fi

if [[ " $STEPS " == *" tests "* ]]; then
  step "GPU trainer tests"
  time "$TESTS" "[cuda][train]" --durations yes 2>&1 | tee "$OUT/train_cuda_tests.txt" | tail -150
fi

if [[ " $STEPS " == *" compare "* ]]; then
  step "PyTorch comparison and benchmark"
  time JIRIKI_CUDA_VERBOSE=1 python3 scripts/torch_train_reference.py --jiriki build-device/jiriki --batch "$BATCHES" \
    2>&1 | tee "$OUT/train_cuda_bench.txt"
fi

if [[ " $STEPS " == *" profile "* ]]; then
  for b in ${BATCHES//,/ }; do
    step "kernels of one step at batch $b (ncu)"
    JIRIKI_CUDNN_CACHE=off JIRIKI_CUDA_PROFILE=1 /usr/local/cuda/bin/ncu --profile-from-start off --cache-control none --clock-control none \
      --metrics gpu__time_duration.sum --csv --page raw build-device/jiriki bench train --backend cuda --blocks 10 \
      --channels 192 --batch "$b" --steps 5 > "$OUT/ncu_$b.csv" 2> "$OUT/ncu_$b.log"
    python3 scripts/ncu_summary.py "$OUT/ncu_$b.csv" || tail -20 "$OUT/ncu_$b.log"
    step "batch-norm kernels at batch $b in detail (ncu)"
    JIRIKI_CUDNN_CACHE=off JIRIKI_CUDA_PROFILE=1 /usr/local/cuda/bin/ncu --profile-from-start off --cache-control none --clock-control none \
      -k regex:"bn_act|channel_sums" --launch-count 5 --section SpeedOfLight --section Occupancy \
      --section MemoryWorkloadAnalysis build-device/jiriki bench train --backend cuda --blocks 10 --channels 192 \
      --batch "$b" --steps 5 > "$OUT/ncu_bn_$b.txt" 2>&1
    grep -E "^  [a-z_]+.*kernel|Duration|DRAM Throughput|L2 Hit Rate|Achieved Occupancy|Registers Per|Block Limit Reg|Mem Busy|Memory Throughput" \
      "$OUT/ncu_bn_$b.txt" | sed -E 's/\(const .*//'
  done
fi
