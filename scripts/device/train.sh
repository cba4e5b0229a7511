#!/usr/bin/env bash
# On the GPU machine (see the device tool's docs): builds jiriki with CUDA, runs the GPU trainer's
# tests (tests/test_train_cuda.cpp: gradients, losses and optimizer steps against the CPU trainer),
# then scripts/torch_train_reference.py, which runs `jiriki bench train --backend cuda` on a
# 10-block, 192-channel network, compares jiriki's gradients with PyTorch's and times PyTorch's
# training step on the same network. Everything goes to $OUT.
#
#   run with carry [".carry"]:  bash scripts/device/train.sh [BATCHES]
#
# STEPS (default "tests compare"; STEPS="" builds only) picks what runs after the build: tests,
# compare, profile (ncu's durations of the kernels of one training step at each batch size,
# summarised by scripts/ncu_summary.py; its engine choices, timed under ncu, stay out of the choice
# file).
# That machine has CUDA, cuDNN (PyTorch's wheel), cmake and ninja but no Catch2 package: the tests
# use the single header carried in .carry/catch2.
set -uo pipefail
source scripts/device/env.sh
BATCHES=${1:-256,1024}
STEPS=${STEPS-tests compare}
start train_device.log

step "machine"
machine

step "build"
if [[ " $STEPS " == *" tests "* ]]; then build jiriki jiriki_tests; else build jiriki; fi

if [[ " $STEPS " == *" tests "* ]]; then
  step "GPU trainer tests"
  time build-device/jiriki_tests "[cuda][train]" --durations yes 2>&1 | tee "$OUT/train_cuda_tests.txt" | tail -150
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
