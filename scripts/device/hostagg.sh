#!/usr/bin/env bash
# On a GPU machine with two or more GPUs (see the device tool's docs): builds jiriki and its tests with
# CUDA and NCCL and checks and measures host aggregation (--allreduce host) against NCCL:
#   tests      the data-parallel GPU tests ([dp][gpu]: host aggregation in buckets against the host
#              collectives' mean bit for bit, replicas by NCCL and by the host against CPU replicas)
#              and the host collectives ([comm])
#   allreduce  `jiriki bench allreduce`: the host all-reduce of two and four ranks on threads
#              against one memcpy of the same bytes
#   bench      `jiriki bench train --gpus` on a 10-block, 192-channel network at per-GPU batches
#              BATCHES, on all GPUS (host, then NCCL) and on the first two (host, then NCCL); the host
#              runs end with the floor: the gradient copied down and up alone, its mean alone
#
#   run with carry [".carry/include.tar.xz", ".carry/lib"]:  bash scripts/device/hostagg.sh [GPUS] [BATCHES]
#
# GPUS (default: every GPU, e.g. 0,1,2,3) and BATCHES per GPU (default 32,256,1024). STEPS (default
# "tests allreduce bench") picks what runs after the build. Logs: $OUT/hostagg.log (all of it),
# hostagg_tests.txt, hostagg_bench.txt, build.log.
set -uo pipefail
source scripts/device/env.sh
STEPS=${STEPS-tests allreduce bench}
start hostagg.log
# Catch2 travels inside the carried headers (.carry/include/catch2/catch.hpp) when not on its own.
[[ $CATCH2_FLAG == -U* && -f .carry/include/catch2/catch.hpp ]] && CATCH2_FLAG=-DJIRIKI_CATCH2_INCLUDE_DIR="$PWD/.carry/include"

step "machine"
machine
nvidia-smi topo -m 2>/dev/null | head -8
GPU_COUNT=$(gpu_count)
GPUS=${1:-$(seq -s, 0 $((GPU_COUNT - 1)))}
BATCHES=${2:-32,256,1024}
FIRST_TWO=$(echo "$GPUS" | cut -d, -f1-2)
echo "GPUs $GPUS, per-GPU batches $BATCHES"

step "build"
build jiriki jiriki_tests
export JIRIKI_CUDNN_CACHE=/tmp/cudnn-choices.txt
[[ -f $JIRIKI_CUDNN_CACHE || ! -f .carry/cudnn-choices.txt ]] || cp .carry/cudnn-choices.txt "$JIRIKI_CUDNN_CACHE"

if [[ " $STEPS " == *" tests "* ]]; then
  step "data-parallel GPU tests and host collectives"
  timeout 150 build-device/jiriki_tests "[dp][gpu],[comm]" --durations yes 2>&1 | tee "$OUT/hostagg_tests.txt" | tail -25
fi

if [[ " $STEPS " == *" allreduce "* ]]; then
  step "bench allreduce"
  build-device/jiriki bench allreduce --ranks 2,4 2>&1
  build-device/jiriki bench allreduce --ranks 2,4 --threads 1 2>&1 | tail -2
fi

if [[ " $STEPS " == *" bench "* ]]; then
  for run in "$GPUS host" "$GPUS nccl" "$FIRST_TWO host" "$FIRST_TWO nccl"; do
    set -- $run
    step "bench train --gpus $1 --allreduce $2"
    timeout 150 build-device/jiriki bench train --backend cuda --blocks 10 --channels 192 --gpus "$1" --allreduce "$2" \
      --batch "$BATCHES" --device-steps 30 --positions 16384 2>&1 | grep -v "^\[" | tee -a "$OUT/hostagg_bench.txt"
  done
fi
