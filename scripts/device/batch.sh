#!/usr/bin/env bash
# On the GPU machine: the batch-size issue's measurements (docs/batch-size.md). Builds jiriki with
# CUDA and runs the phases named in STEPS (default "tests bench sustained tuner"):
#   tests      the GPU trainer's tests ([cuda][train]), with JIRIKI_CUDNN_CANDIDATES=4
#   bench      `jiriki bench train` on a 10x192 network at batches 256 and 1024: the trainer's
#              samples/s against the GPU's step alone (inputs already on the device)
#   sustained  `jiriki train` end to end on the records in DATA for SECONDS_EACH (default 80; start-up
#              included, so 100 leaves 60 s after warm-up) at each of BATCHES (default
#              "256 1024"), then scripts/sustained_rate.py: samples/s after the first 15 s
#   tuner      `jiriki train --batch auto` with --allreduce nccl and host: the step-time tables,
#              noise scale and choices (logs tuner_nccl.jsonl, tuner_host.jsonl)
# Logs go to $OUT. DATA defaults to .carry/data (hcpe3 records, e.g. a loop run's teacher/ or selfplay/ games).
#
#   run with carry [".carry/catch2", ".carry/include", ".carry/lib", ".carry/data"]:
#     STEPS="tests bench" bash scripts/device/batch.sh
set -uo pipefail
source scripts/device/env.sh
STEPS=${STEPS-tests bench sustained tuner}
DATA=${DATA:-.carry/data}
SECONDS_EACH=${SECONDS_EACH:-80}
NET=(--blocks 10 --channels 192)
start batch_device.log

step "machine"
machine

step "build"
if [[ " $STEPS " == *" tests "* ]]; then build jiriki jiriki_tests; else build jiriki; fi
J=build-device/jiriki

if [[ " $STEPS " == *" tests "* ]]; then
  step "GPU trainer tests"
  time JIRIKI_CUDNN_CANDIDATES=4 build-device/jiriki_tests "[cuda][train]" --durations yes 2>&1 \
    | tee "$OUT/batch_tests.txt" | tail -60
fi

if [[ " $STEPS " == *" bench "* ]]; then
  step "bench train: trainer against the GPU's step alone"
  $J bench train --backend cuda "${NET[@]}" --batch 256,1024 --steps 3000 --device-steps 200 --loader-threads 8 \
    2>&1 | tee "$OUT/batch_bench.txt"
fi

if [[ " $STEPS " == *" sustained "* ]]; then
  for b in ${BATCHES:-256 1024}; do
    step "jiriki train at batch $b for $SECONDS_EACH s on $DATA"
    rm -f /tmp/sustained_$b.*
    timeout -s INT "$SECONDS_EACH" $J train --backend cuda --data "$DATA" "${NET[@]}" --batch $b --steps 1000000 \
      --loader-threads 8 --log-every 200 --model-out /tmp/sustained_$b.jnn --log "$OUT/sustained_$b.jsonl" 2>&1 \
      | grep -v "^step" | tail -5
    python3 scripts/sustained_rate.py "$OUT/sustained_$b.jsonl" --skip 15
  done
fi

if [[ " $STEPS " == *" tuner "* ]]; then
  for mode in nccl host; do
    step "jiriki train --batch auto --allreduce $mode"
    rm -f /tmp/tuner_$mode.*
    $J train --backend cuda --data "$DATA" "${NET[@]}" --batch auto --batch-start 64 --allreduce $mode \
      --steps ${TUNER_STEPS:-3000} --loader-threads 8 --tune-every 200 --noise-every 10 --log-every 500 \
      --model-out /tmp/tuner_$mode.jnn --log "$OUT/tuner_$mode.jsonl" 2>&1 | grep -v "^step" | tail -40
  done
fi
