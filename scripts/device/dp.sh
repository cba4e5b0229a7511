#!/usr/bin/env bash
# On a GPU machine with one or more GPUs (see the device tool's docs): builds jiriki with CUDA and
# NCCL and checks and measures data-parallel training on every GPU of the machine:
#   tests   the GPU trainer's tests (with several GPUs: one replica a GPU, by NCCL and by the host,
#           against as many CPU replicas) and the CPU data-parallel tests ([dp])
#   bench   `jiriki bench train --gpus` under both aggregation modes on a 10-block, 192-channel
#           network: one GPU against all of them at each per-GPU batch, the exposed communication,
#           NCCL's bus bandwidth for one gradient-sized message
#   auto    `jiriki train --batch auto` on all the GPUs under both modes for AUTO_SECONDS (150)
#           each, on the self-play records of docs/batch-size.md (.carry/tt.tar.xz): the tuner's
#           measured step times, noise scale (across replicas) and choices, in $OUT/dp_auto_MODE.jsonl
#
#   run with carry [".carry/include.tar.xz", ".carry/lib", ".carry/catch2", ".carry/tt.tar.xz",
#   ".carry/cudnn-choices.txt"]:  bash scripts/device/dp.sh [GPUS] [BATCHES]
#
# GPUS (default: every GPU, e.g. 0,1) and BATCHES per GPU (default 8,16,...,1024). STEPS (default
# "tests bench auto") picks what runs after the build.
set -uo pipefail
source scripts/device/env.sh
STEPS=${STEPS-tests bench auto}
start dp_device.log

step "machine"
machine
nvidia-smi topo -m 2>/dev/null | head -8
GPU_COUNT=$(gpu_count)
GPUS=${1:-$(seq -s, 0 $((GPU_COUNT - 1)))}
BATCHES=${2:-8,16,32,64,128,256,512,1024}
echo "GPUs $GPUS, per-GPU batches $BATCHES"

step "build"
build jiriki jiriki_tests
use_carried_cudnn_choices

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
      --batch "$BATCHES" --device-steps 30 --positions 16384 2>&1 | grep -v "^batch [0-9]*: " | tee "$OUT/dp_bench_$mode.txt"
  done
fi

if [[ " $STEPS " == *" auto "* ]]; then
  [[ -d /tmp/tt ]] || tar xJf .carry/tt.tar.xz -C /tmp
  for mode in nccl host; do
    step "train --batch auto --gpus $GPUS --allreduce $mode for ${AUTO_SECONDS:-150} s (10x192, self-play records)"
    timeout -s INT "${AUTO_SECONDS:-150}" build-device/jiriki train --backend cuda --gpus "$GPUS" --data /tmp/tt/train \
      --blocks 10 --channels 192 --optimizer sgd --lr 0.0125 --schedule constant --warmup-steps 800 --batch auto \
      --batch-start 64 --allreduce $mode --steps 100000000 --loader-threads 8 --log-every 1000 \
      --model-out /tmp/auto.jnn --log "$OUT/dp_auto_$mode.jsonl" 2>&1 | grep -E "^tuner at|^training|stopped|^ +[0-9]+ +[0-9.]+ " | cut -c1-160
  done
fi
cp "$JIRIKI_CUDNN_CACHE" "$OUT/cudnn-choices.txt"
