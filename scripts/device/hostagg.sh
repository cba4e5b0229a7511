#!/usr/bin/env bash
# On a GPU machine with two or more GPUs (see the device tool's docs): builds jiriki and its tests with
# CUDA and NCCL and checks and measures host aggregation (--allreduce host) against NCCL:
#   tests      the data-parallel GPU tests ([dp][gpu]: host aggregation in buckets against the host
#              collectives' mean bit for bit, replicas by NCCL and by the host against CPU replicas)
#              and the host collectives ([comm])
#   bench      `jiriki bench train --gpus` on a 10-block, 192-channel network at per-GPU batches
#              BATCHES, on all GPUS (host, then NCCL), later on the first two (host, then NCCL); the
#              host runs end with the floor: the gradient copied down and up alone, its mean alone
#   allreduce  `jiriki bench allreduce` (between the two): the host all-reduce of two and four
#              ranks on threads against one memcpy of the same bytes
#   sweep      host aggregation on GPUS at SWEEP_BATCHES (default 256,1024) for every bucket size of
#              SWEEP_MB (default "2 4 8 16 32") and CPU thread count of SWEEP_THREADS (default
#              "8 16 32", shared out among the GPUs): $OUT/hostagg_sweep.txt
#   trace      (only when named) host aggregation on GPUS at BATCHES with JIRIKI_CUDA_VERBOSE: each
#              GPU's last timed trip through the host, bucket by bucket ($OUT/hostagg_trace.txt)
#   ddp        scripts/torch_ddp_reference.py: PyTorch DDP on GPUS at BATCHES beside `jiriki bench
#              train --gpus` under both modes, in the same run ($OUT/ddp_reference.txt); PyTorch eager
#              and compiled, the faster kept (DDP_VARIANTS, default eager,compile)
#
#   run with carry [".carry/include.tar.xz", ".carry/lib", ".carry/catch2"]:
#     bash scripts/device/hostagg.sh [GPUS] [BATCHES]
# (.carry/catch2: catch2/catch.hpp and cmake/{Catch,CatchAddTests}.cmake, Catch2 2.x's, for the tests.)
#
# GPUS (default: every GPU, e.g. 0,1,2,3) and BATCHES per GPU (default 32,256,1024). STEPS (default
# "tests allreduce bench"; add ddp) picks what runs after the build. Logs: $OUT/hostagg.log (all of it),
# hostagg_tests.txt, hostagg_bench.txt, build.log, cudnn-choices.txt (carry it back as
# .carry/cudnn-choices.txt to skip cuDNN's tuning next time).
set -uo pipefail
source scripts/device/env.sh
STEPS=${STEPS-tests allreduce bench}
start hostagg.log

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
use_carried_cudnn_choices

if [[ " $STEPS " == *" tests "* ]]; then
  step "data-parallel GPU tests and host collectives"
  timeout 150 build-device/jiriki_tests "[dp][gpu],[comm]" --durations yes 2>&1 | tee "$OUT/hostagg_tests.txt" | tail -25
fi

bench() {  # GPUS MODE
  step "bench train --gpus $1 --allreduce $2"
  timeout 150 build-device/jiriki bench train --backend cuda --blocks 10 --channels 192 --gpus "$1" --allreduce "$2" \
    --batch "$BATCHES" --device-steps 30 --positions 16384 2>&1 | grep -v "^\[" | tee -a "$OUT/hostagg_bench.txt"
}
if [[ " $STEPS " == *" bench "* ]]; then
  bench "$GPUS" host
  bench "$GPUS" nccl
fi

if [[ " $STEPS " == *" allreduce "* ]]; then
  step "bench allreduce"
  build-device/jiriki bench allreduce --ranks 2,4 2>&1
  build-device/jiriki bench allreduce --ranks 2,4 --threads 1 2>&1 | tail -2
fi

if [[ " $STEPS " == *" trace "* ]]; then
  step "trace: the host trip's timeline per bucket, --gpus $GPUS --allreduce host"
  JIRIKI_CUDA_VERBOSE=1 timeout 150 build-device/jiriki bench train --backend cuda --blocks 10 --channels 192 \
    --gpus "$GPUS" --allreduce host --batch "$BATCHES" --device-steps 30 --positions 16384 2>&1 |
    grep -E "host trip|^ +[0-9]|^host all-reduce|averaged by" | tee -a "$OUT/hostagg_trace.txt"
fi

if [[ " $STEPS " == *" ddp "* ]]; then
  step "PyTorch DDP beside jiriki bench train --gpus $GPUS, both modes, in the same run"
  timeout 480 python3 scripts/torch_ddp_reference.py --jiriki build-device/jiriki --gpus "$GPUS" --batch "$BATCHES" \
    --variants "${DDP_VARIANTS:-eager,compile}" \
    2>&1 | grep -v "^\[" | tee "$OUT/ddp_reference.txt"
fi

if [[ " $STEPS " == *" sweep "* ]]; then
  for mb in ${SWEEP_MB:-2 4 8 16 32}; do
    for th in ${SWEEP_THREADS:-8 16 32}; do
      step "sweep: --allreduce host on $GPUS, buckets of $mb MB, $th CPU threads in all" | tee -a "$OUT/hostagg_sweep.txt"
      timeout 100 build-device/jiriki bench train --backend cuda --blocks 10 --channels 192 --gpus "$GPUS" \
        --allreduce host --batch "${SWEEP_BATCHES:-256,1024}" --bucket-mb "$mb" --threads "$th" --device-steps 30 \
        --positions 16384 2>&1 | grep -E "^ +[0-9]|^host all-reduce|averaged by" | tee -a "$OUT/hostagg_sweep.txt"
    done
  done
fi

if [[ " $STEPS " == *" bench "* && $FIRST_TWO != "$GPUS" ]]; then
  bench "$FIRST_TWO" host
  bench "$FIRST_TWO" nccl
fi
cp "$JIRIKI_CUDNN_CACHE" "$OUT/cudnn-choices.txt" 2>/dev/null
