#!/usr/bin/env bash
# On the GPU machine (see the device tool's docs): builds jiriki with CUDA and NCCL, runs the GPU
# trainer's tests (with the data-parallel ones: a one-rank NCCL all-reduce in buckets must leave
# training bit-identical, two replicas sharing the GPU through host aggregation must train as two
# CPU replicas), then `jiriki bench train --gpus` with both aggregation modes on a 10-block,
# 192-channel network, and a short `jiriki train --batch auto` on self-play records carried in
# .carry/data. Everything goes to $OUT.
#
#   run with carry [".carry"]:  bash scripts/device/dp.sh [GPUS] [BATCHES]
#
# GPUS (default: every GPU, e.g. 0,1) and BATCHES per GPU (default 8,16,...,1024). STEPS (default
# "tests bench auto") picks what runs after the build.
set -uo pipefail
source scripts/device/env.sh
STEPS=${STEPS-tests bench auto}
start dp_device.log

step "machine"
machine
GPU_COUNT=$(nvidia-smi --query-gpu=index --format=csv,noheader | wc -l)
GPUS=${1:-$(seq -s, 0 $((GPU_COUNT - 1)))}
BATCHES=${2:-8,16,32,64,128,256,512,1024}
echo "GPUs $GPUS, per-GPU batches $BATCHES"

step "build"
build jiriki jiriki_tests

if [[ " $STEPS " == *" tests "* ]]; then
  step "GPU trainer tests"
  time build-device/jiriki_tests "[cuda][train]" --durations yes 2>&1 | tee "$OUT/dp_tests.txt" | tail -40
  step "data-parallel tests (CPU replicas, mpirun)"
  build-device/jiriki_tests "[dp]" 2>&1 | tail -5
fi

if [[ " $STEPS " == *" bench "* ]]; then
  for mode in nccl host; do
    step "bench train --gpus $GPUS --allreduce $mode"
    build-device/jiriki bench train --backend cuda --blocks 10 --channels 192 --gpus "$GPUS" --allreduce $mode \
      --batch "$BATCHES" --device-steps 30 --positions 16384 2>&1 | tee "$OUT/dp_bench_$mode.txt"
  done
fi

if [[ " $STEPS " == *" auto "* ]]; then
  step "train --batch auto (10x192, self-play records)"
  build-device/jiriki train --backend cuda --gpus "$GPUS" --data .carry/data --blocks 10 --channels 192 \
    --batch auto --batch-start 64 --tune-min 8 --tune-max 1024 --tune-every 100 --steps 400 --log-every 100 \
    --loader-threads 8 --model-out /tmp/auto.bin --log "$OUT/auto.log.jsonl" 2>&1 | tee "$OUT/dp_auto.txt"
fi
